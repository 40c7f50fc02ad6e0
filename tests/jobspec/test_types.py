"""Integer fields take whole numbers only: `true` or `1.0` is a mistake, not 1; and every one is bounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubetrain.jobspec import DistributedConfig, SpecError, from_dict, load_file
from kubetrain.jobspec.types import INT32_MAX, MAX_DEADLINE_SECONDS, MAX_PROCS_PER_REPLICA, MAX_REPLICAS

HEAD = "apiVersion: kubetrain.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: t}\nspec:\n  run: {exec: [echo, hi]}\n"

# (YAML under spec, the field path in the message, what the message shows)
NOT_WHOLE = [
    ("replicas: true", "spec.replicas", "true"),
    ("procsPerReplica: true", "spec.procsPerReplica", "true"),
    ("runPolicy: {backoffLimit: true}", "spec.runPolicy.backoffLimit", "true"),
    ("runPolicy: {backoffLimit: false}", "spec.runPolicy.backoffLimit", "false"),
    ("runPolicy: {activeDeadlineSeconds: 1.0}", "spec.runPolicy.activeDeadlineSeconds", "1.0"),
    ("runPolicy: {ttlSecondsAfterFinished: 2.5}", "spec.runPolicy.ttlSecondsAfterFinished", "2.5"),
    ("roles: {worker: {replicas: 2.0}}", "spec.roles.worker.replicas", "2.0"),
    ("elastic: {minReplicas: true, maxReplicas: 2}", "spec.elastic.minReplicas", "true"),
    ("ports: [{container: true}]", "spec.ports[0].container", "true"),
    ("security: {runAsUid: 1.0}", "spec.security.runAsUid", "1.0"),
    ("scheduling: {minAvailable: true}", "spec.scheduling.minAvailable", "true"),
]


@pytest.mark.parametrize(("yaml", "path", "shown"), NOT_WHOLE)
def test_a_boolean_or_float_integer_field_is_refused_in_a_file(
    tmp_path: Path, yaml: str, path: str, shown: str
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(HEAD + "  " + yaml + "\n")
    with pytest.raises(SpecError) as info:
        load_file(job)
    assert f"{path}: must be a whole number (got {shown})" in str(info.value)
    assert "job.yaml:6" in str(info.value)


def spec(**fields: Any) -> dict[str, Any]:  # keys as in a job file
    return {"metadata": {"name": "t"}, "spec": {"run": {"exec": ["echo"]}, **fields}}


@pytest.mark.parametrize(
    ("fields", "path", "shown"),
    [
        ({"replicas": True}, "spec.replicas", "true"),
        ({"procsPerReplica": True}, "spec.procsPerReplica", "true"),
        ({"runPolicy": {"backoffLimit": True}}, "spec.runPolicy.backoffLimit", "true"),
        ({"runPolicy": {"activeDeadlineSeconds": 1.0}}, "spec.runPolicy.activeDeadlineSeconds", "1.0"),
        ({"exitCodes": {"retryable": [True]}}, "spec.exitCodes.retryable[0]", "true"),
    ],
)
def test_a_boolean_or_float_integer_field_is_refused_from_python(fields: dict[str, Any], path: str, shown: str) -> None:
    with pytest.raises(SpecError) as info:
        from_dict(spec(**fields))
    assert f"{path}: must be a whole number (got {shown})" in str(info.value)


def test_whole_numbers_still_validate() -> None:
    job = from_dict(spec(replicas=3, procsPerReplica=2, runPolicy={"backoffLimit": 0, "activeDeadlineSeconds": 60}))
    assert (job.spec.replicas, job.spec.procs_per_replica) == (3, 2)
    assert (job.spec.run_policy.backoff_limit, job.spec.run_policy.active_deadline_seconds) == (0, 60)
    assert type(job.spec.replicas) is int


@pytest.mark.parametrize(
    ("fields", "path", "bound"),
    [
        ({"replicas": MAX_REPLICAS + 1}, "spec.replicas", MAX_REPLICAS),
        ({"roles": {"worker": {"replicas": 10**20}}}, "spec.roles.worker.replicas", MAX_REPLICAS),
        ({"procsPerReplica": 99999999999999999999}, "spec.procsPerReplica", MAX_PROCS_PER_REPLICA),
        ({"runPolicy": {"backoffLimit": 99999999999999999999}}, "spec.runPolicy.backoffLimit", INT32_MAX),
        (
            {"runPolicy": {"activeDeadlineSeconds": 10**10}},
            "spec.runPolicy.activeDeadlineSeconds",
            MAX_DEADLINE_SECONDS,
        ),
    ],
)
def test_every_integer_is_bounded(fields: dict[str, Any], path: str, bound: int) -> None:
    with pytest.raises(SpecError) as info:
        from_dict(spec(**fields))
    text = str(info.value)
    assert f"{path}: must be less than or equal to {bound}" in text


def test_the_bounds_themselves_validate() -> None:
    job = from_dict(
        spec(replicas=MAX_REPLICAS, runPolicy={"activeDeadlineSeconds": MAX_DEADLINE_SECONDS, "backoffLimit": 3})
    )
    assert job.spec.replicas == MAX_REPLICAS


def test_distributed_config_refuses_a_boolean_backoff_limit() -> None:
    with pytest.raises(SpecError) as info:
        DistributedConfig(run_policy={"backoffLimit": True})
    assert "backoffLimit: must be a whole number (got true)" in str(info.value)


@pytest.mark.parametrize("text", ["'3'", "two"])
def test_text_in_an_integer_field_is_refused(tmp_path: Path, text: str) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(HEAD + f"  replicas: {text}\n")
    with pytest.raises(SpecError) as info:
        load_file(job)
    assert "spec.replicas: must be a valid integer" in str(info.value)
