"""Volcano Jobs (batch.volcano.sh/v1alpha1) as kubetrain jobs: valid against the upstream CRD, converted field
by field (plugins naming the framework), rendered for every flavor that can express them, round-tripped through
kubetrain's own volcano render, and run here through torch.distributed."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.contract.choices import FLAVORS
from kubetrain.foreign import convert
from kubetrain.foreign.loader import load_job_file
from kubetrain.jobspec import SpecError, load_file
from tests.foreign.test_kubeflow import FOREIGN, crd_errors, ddp_shim, read
from tests.support.helpers import EXAMPLES, assert_ddp_in_step, no_process_left_behind, run_job  # noqa: F401
from tests.support.manifest_schemas import assert_valid


@pytest.mark.parametrize("name", ["volcano-job.yaml", "volcano-job-kitchen-sink.yaml"])
def test_the_example_is_valid_against_the_upstream_crd(name: str) -> None:
    assert crd_errors(read(name)) == []


def test_the_pytorch_plugin_makes_a_pytorch_job_of_master_and_worker_tasks() -> None:
    job, conversion = load_job_file(FOREIGN / "volcano-job.yaml")
    assert conversion is not None and conversion.kind == "Job"
    assert conversion.refused() == [], conversion.warnings()
    spec = job.spec
    assert spec.framework.value == "pytorch"
    assert spec.role_replicas() == {"master": 1, "worker": 1}
    assert (spec.scheduling.min_available, spec.scheduling.queue) == (2, "default")
    assert spec.run_policy.backoff_limit == 2
    assert spec.restart_policy_of("master") == spec.restart_policy_of("worker") == "OnFailure"


@pytest.mark.parametrize("flavor", FLAVORS)
def test_the_example_renders_valid_manifests_for_every_flavor(flavor: str) -> None:
    job, _ = load_job_file(FOREIGN / "volcano-job.yaml")
    if flavor == "job":  # minAvailable is a gang, which plain Jobs cannot express
        with pytest.raises(SpecError, match="minAvailable"):
            render_manifests(job, flavor)
        return
    objects = render_manifests(job, flavor).objects
    assert_valid(objects)
    if flavor == "volcano":
        root = objects[0]
        assert (root["spec"]["minAvailable"], root["spec"]["queue"]) == (2, "default")
        assert [t["name"] for t in root["spec"]["tasks"]] == ["master", "worker"]


def test_every_field_of_the_kitchen_sink_is_accounted_for() -> None:
    job, conversion = load_job_file(FOREIGN / "volcano-job-kitchen-sink.yaml")
    assert conversion is not None
    verdicts = {n.source: (n.verdict, n.target) for n in conversion.notes}
    assert {s for s, (v, _) in verdicts.items() if v == "refused"} == {
        "spec.minSuccess",
        "spec.policies[2]",
        "spec.volumes[1]",
        "spec.tasks[0].maxRetry",
        "spec.tasks[1].minAvailable",
        "spec.tasks[1].topologyPolicy",
    }
    assert {s for s, (v, _) in verdicts.items() if v == "approximated"} == {
        "spec.schedulerName",
        "spec.plugins.ssh",  # the job's sshAuthMountPath
        "spec.tasks[1].name",
    }
    mapped = {s: t for s, (v, t) in verdicts.items() if v == "mapped"}
    # Volcano's contract gives what its plugins give: they are taken as written (ssh: sshAuthMountPath, above).
    for plugin in ("tensorflow", "svc", "env"):
        assert mapped[f"spec.plugins.{plugin}"] == f"spec.controller.plugins.{plugin}"
    assert mapped["spec.policies[0]"] == "spec.scheduling.terminateAfterPreemption"
    assert mapped["spec.policies[1]"] == "spec.restartPolicy"
    assert mapped["spec.tasks[0].policies[0]"] == "spec.roles.ps.restartPolicy"
    assert mapped["spec.volumes[0]"] == "spec.mounts"
    assert mapped["spec.priorityClassName"] == "spec.scheduling.priorityClass"
    spec = job.spec
    assert spec.framework.value == "tensorflow"
    assert spec.role_replicas() == {"worker": 2, "ps": 1}  # the plugin's --worker=trainer task is the worker role
    assert (spec.restart_policy, spec.restart_policy_of("ps"), spec.restart_policy_of("worker")) == (
        "OnFailure",
        "Never",
        "OnFailure",
    )
    assert spec.scheduling.terminate_after_preemption is True
    assert (spec.run_policy.backoff_limit, spec.run_policy.ttl_seconds_after_finished) == (4, 120)
    assert [(m.src, m.dst) for m in spec.mounts or []] == [("shared-data", "/data")]  # type: ignore[union-attr]


@pytest.mark.parametrize("example", ["pytorch-ddp", "tensorflow-multiworker", "generic"])
def test_a_job_rendered_by_the_volcano_flavor_converts_back_to_the_same_manifests(example: str) -> None:
    job = load_file(EXAMPLES / example / "job.yaml")
    first = render_manifests(job, "volcano").objects
    conversion = convert(copy.deepcopy(first[0]))
    assert conversion.job.spec.framework == job.spec.framework
    assert render_manifests(conversion.job, "volcano").objects == first


@pytest.mark.slow
def test_the_volcano_job_runs_here_through_torch_distributed(tmp_path: Path) -> None:
    shim = ddp_shim(tmp_path)
    doc = read("volcano-job.yaml")
    for task in doc["spec"]["tasks"]:
        task["template"]["spec"]["containers"][0]["command"] = ["python", str(shim), "--steps", "3"]
    job = convert(doc, base_dir=str(FOREIGN)).job
    assert_ddp_in_step(run_job(job, FOREIGN), "master-0", "worker-0")
