"""Foreign job files' harder corners: a sidecar kept beside the main container, values the source
system would reject are errors (not notes that claim them mapped), args without a command refused with a hint,
approximations without a home of their own worded as such."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

import kubetrain
from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.contract.choices import FLAVORS
from kubetrain.foreign import convert
from kubetrain.foreign.loader import load_job_file
from kubetrain.jobspec import Run, SpecError
from tests.support.helpers import cli
from tests.support.kubelet import containers_of
from tests.support.manifest_schemas import assert_valid

PROGRAM = ["python", "-c", "print(1)"]


def _pytorchjob(master_containers: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "side"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "imagePullSecrets": [{"name": "regcred"}],
                            "initContainers": [{"name": "fetch", "image": "busybox", "command": ["true"]}],
                            "containers": master_containers,
                        }
                    },
                },
                "Worker": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "pytorch", "image": "pt:1", "command": PROGRAM}]}},
                },
            }
        },
    }


def _pod_specs(objects: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("containers"), list):
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(objects)
    return found


LOGGER = {"name": "logger", "image": "fluent/fluent-bit"}
MAIN = {"name": "pytorch", "image": "pt:1", "command": PROGRAM}


@pytest.mark.parametrize("containers", [[LOGGER, MAIN], [MAIN, LOGGER]], ids=["sidecar-first", "sidecar-second"])
def test_a_sidecar_is_kept_beside_the_main_container_on_every_flavor(containers: list[dict[str, Any]]) -> None:
    """The main container carries nothing untyped: it still leads the podTemplate, so kubetrain's container
    merges into it and the sidecar keeps its own image."""
    conversion = convert(_pytorchjob(containers))
    template = conversion.job.spec.roles["master"].pod_template  # type: ignore[index]
    assert [c["name"] for c in template["spec"]["containers"]] == ["pytorch", "logger"]
    for flavor in FLAVORS:
        objects = render_manifests(conversion.job, flavor).objects
        assert_valid(objects)
        master = [s for s in _pod_specs(objects) if any(c["name"] == "logger" for c in s["containers"])]
        assert len(master) == 1, flavor
        by_name = {c["name"]: c for c in master[0]["containers"]}
        assert len(by_name) == 2 and by_name["logger"]["image"] == "fluent/fluent-bit", flavor
        main = master[0]["containers"][0]
        assert main["image"] == "pt:1" and "print(1)" in yaml.safe_dump(main), flavor
        assert [c["name"] for c in master[0]["initContainers"]] == ["fetch"]
        assert master[0]["imagePullSecrets"] == [{"name": "regcred"}]


def _deepspeedjob(spec_extra: dict[str, Any], config_extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "DeepSpeedJob",
        "metadata": {"name": "ds"},
        "spec": {
            "config": {"run": {"python": ["train.py"]}, **(config_extra or {})},
            "worker": {"replicas": 1, "template": {"spec": {"containers": [{"name": "worker", "image": "foo"}]}}},
            **spec_extra,
        },
    }


@pytest.mark.parametrize("text", ["true", "yes"])
def test_a_deepspeedjob_run_mode_flag_given_as_text_is_an_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "ds.yaml"
    path.write_text(yaml.safe_dump(_deepspeedjob({"runMode": {"debug": {"enable": text}}}), sort_keys=False))
    with pytest.raises(SpecError) as caught:
        load_job_file(path)
    (error,) = caught.value.errors
    assert error.path == ("spec", "runMode", "debug", "enable") and error.value == text
    lines = path.read_text().splitlines()
    assert error.file is not None and error.line == 1 + next(i for i, line in enumerate(lines) if "enable:" in line)
    assert "boolean" in error.message and error.hint is not None and "enable: true" in error.hint


def test_invalid_deepspeedjob_enums_are_errors_with_a_did_you_mean() -> None:
    doc = _deepspeedjob({"runPolicy": {"cleanUpPolicy": "Unfinshed"}}, {"autotune": "tun"})
    with pytest.raises(SpecError) as caught:
        convert(doc)
    errors = {e.path[-1]: e for e in caught.value.errors}
    assert set(errors) == {"cleanUpPolicy", "autotune"}
    assert errors["cleanUpPolicy"].hint is not None and "did you mean 'Unfinished'?" in errors["cleanUpPolicy"].hint
    assert errors["autotune"].hint is not None and "did you mean 'tune'?" in errors["autotune"].hint


def test_a_false_debug_flag_claims_nothing() -> None:
    conversion = convert(_deepspeedjob({"runMode": {"debug": {"enable": False}, "pause": {"enable": True}}}))
    assert conversion.job.spec.run_mode == "Pause"
    assert conversion.sources_of().get("spec.runMode") == ["spec.runMode.pause.enable"]


def test_args_without_a_command_run_the_images_entrypoint_on_kubernetes_and_are_refused_here(tmp_path: Path) -> None:
    """The image's ENTRYPOINT runs the args: valid for Kubernetes (the container keeps no command, as written);
    refused locally before anything starts, naming the image and the source line, with the way out."""
    path = tmp_path / "xgb.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            apiVersion: kubeflow.org/v1
            kind: XGBoostJob
            metadata: {name: xgb}
            spec:
              xgbReplicaSpecs:
                Master:
                  replicas: 1
                  template:
                    spec:
                      containers:
                        - name: xgboost
                          image: xgb:1
                          args: [--job_type=Train]
            """
        )
    )
    job, _ = load_job_file(path)
    assert job.spec.role_settings("master").run == Run(entrypoint=["--job_type=Train"])
    for flavor in ("kubeflow", "job"):
        (container,) = containers_of(kubetrain.render(job, flavor))
        assert "command" not in container and container["args"] == ["--job_type=Train"], flavor
    refused = cli("run", path)
    assert refused.returncode == 2, refused.stderr
    assert f"{path}:13: spec.xgbReplicaSpecs.Master.template.spec.containers[0].args" in refused.stderr
    assert "ENTRYPOINT (xgb:1)" in refused.stderr and "give the container its command" in refused.stderr


def test_an_approximation_without_a_home_of_its_own_says_only_how() -> None:
    doc = _pytorchjob([MAIN])
    doc["spec"]["runPolicy"] = {"managedBy": "kubeflow.org/training-operator"}
    conversion = convert(doc)
    managed = [n for n in conversion.approximated() if n.source == "spec.runPolicy.managedBy"]
    assert len(managed) == 1 and managed[0].target is None
    assert "as None" not in str(managed[0]) and "approximated: the operator's default" in str(managed[0])
    assert not any("as None" in line for line in conversion.warnings())


def test_a_deepspeedjob_never_restarting_with_a_backoff_limit_converts_as_meant() -> None:
    """No worker restarts, so the limit has nothing to count: valid, as the PyTorchJob equivalent is, and said."""
    doc = _deepspeedjob({"runPolicy": {"backoffLimit": 1}})
    doc["spec"]["worker"]["restartPolicy"] = "Never"
    conversion = convert(doc)
    assert conversion.job.spec.restart_policy == "Never"
    assert (conversion.job.spec.job_restart_policy(), conversion.job.spec.backoff_limit_of()) == ("Never", 0)
    (note,) = [n for n in conversion.approximated() if n.source == "spec.runPolicy.backoffLimit"]
    assert "Never" in note.reason
