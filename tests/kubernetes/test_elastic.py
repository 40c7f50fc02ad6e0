"""Elastic jobs on Kubernetes, on the API emulator: a lost worker pod is recreated without the Job failing,
`scale` patches an Indexed Job's completions and parallelism together (as the API server requires since
1.27) or a Kubeflow job's Worker replicas, and the flavors that cannot scale say why. Every manifest the
emulator is sent is checked against the official schemas and CRDs (the `emulated` fixture)."""

# ruff: noqa: F811 - pytest fixtures are imported from tests.support.cluster and named as parameters

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.backends.kubernetes.client.errors import KubernetesError
from kubetrain.backends.kubernetes.client.resources import JOBS
from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.contract.errors import UsageError
from kubetrain.jobspec import from_dict
from kubetrain.status import JobPhase
from tests.support.cluster import Cluster, emulated, job_doc  # noqa: F401
from tests.support.manifest_schemas import assert_valid

ELASTIC: dict[str, Any] = {"elastic": {"minReplicas": 1, "maxReplicas": 3}, "restartPolicy": "OnFailure",
                           "runPolicy": {"backoffLimit": 2}}


def worker_job(emulated: Cluster, name: str) -> dict[str, Any]:
    assert emulated.emu is not None
    return next(j for j in emulated.emu.objects("jobs")
                if j["metadata"]["labels"].get("kubetrain.dev/role") == "worker"
                and j["metadata"]["labels"].get("kubetrain.dev/job") == name)


def test_a_lost_worker_pod_is_recreated_and_the_job_runs_on(emulated: Cluster) -> None:
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    b = emulated.backend(flavor="job")
    b.submit(from_dict(job_doc("el", **ELASTIC)))
    pods = c.create_pods("job", "el")
    # worker-1's agent SIGKILLed (exit 137): the Job controller recreates index 1's pod, counting the failure
    # for that index alone.
    job = c.job_pod_failed(pods["worker-1"], 137)
    assert not [cond for cond in (job.get("status") or {}).get("conditions") or [] if cond["type"] == "Failed"]
    assert job["spec"]["backoffLimitPerIndex"] == 2
    live = [p for p in emu.objects("pods") if p["status"].get("phase") != "Failed"]
    assert sorted(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] for p in live) == ["0", "1"]
    status = b.status("el")
    assert status.phase is not JobPhase.FAILED
    worker1 = status.replica("worker", 1)
    assert worker1 is not None and worker1.restarts == 1
    # An index out of its retries is failed alone; the other runs on, and the Job is not failed.
    for _ in range(2):
        newest = max((p for p in emu.objects("pods")
                      if p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "1"
                      and p["status"].get("phase") != "Failed"), key=lambda p: p["metadata"]["creationTimestamp"])
        job = c.job_pod_failed(newest["metadata"]["name"], 137)
    assert job["status"]["failedIndexes"] == "1"
    assert not [cond for cond in job["status"].get("conditions") or [] if cond["type"] == "Failed"]


def test_without_elastic_the_same_loss_fails_the_job(emulated: Cluster) -> None:
    """The emulated Job controller is no pushover: a Job that allows no failure fails on the same loss."""
    c = emulated.controllers
    assert c is not None
    b = emulated.backend(flavor="job")
    b.submit(from_dict(job_doc("gang")))
    pods = c.create_pods("job", "gang")
    job = c.job_pod_failed(pods["worker-1"], 137)
    assert [cond["reason"] for cond in job["status"]["conditions"] if cond["type"] == "Failed"] == [
        "BackoffLimitExceeded"]
    assert b.status("gang").phase is JobPhase.FAILED


def test_scale_patches_completions_and_parallelism_together(emulated: Cluster) -> None:
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    b = emulated.backend(flavor="job")
    b.submit(from_dict(job_doc("el", **ELASTIC)))
    c.create_pods("job", "el")
    emu.clear_requests()
    b.scale("el", 3)
    patches = [r for r in emu.requests if r.method == "PATCH"]
    assert len(patches) == 1 and patches[0].path.endswith("/jobs/el-worker")
    spec = worker_job(emulated, "el")["spec"]
    assert (spec["completions"], spec["parallelism"]) == (3, 3)
    # The new index gets its pod (the Job controller's part), and the job says three workers.
    c.create_pods("job", "el", only={"worker-2"})
    assert [r.name for r in b.status("el").replicas] == ["worker-0", "worker-1", "worker-2"]
    b.scale("el", 1)
    spec = worker_job(emulated, "el")["spec"]
    assert (spec["completions"], spec["parallelism"]) == (1, 1)
    with pytest.raises(UsageError, match=r"--replicas 4 is outside the job's elastic bounds \[1, 3\]"):
        b.scale("el", 4)


def test_the_api_server_refuses_completions_changed_alone(emulated: Cluster) -> None:
    """What makes scale patch both: the emulator holds the API server's rule."""
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend(flavor="job")
    b.submit(from_dict(job_doc("el", **ELASTIC)))
    with pytest.raises(KubernetesError, match=r"can only be modified in tandem with spec\.parallelism"):
        b.kube.merge_patch(JOBS, "el-worker", "default", {"spec": {"completions": 3}})


def test_a_job_that_is_not_elastic_is_not_scaled(emulated: Cluster) -> None:
    b = emulated.backend(flavor="job")
    b.submit(from_dict(job_doc("fixed")))
    with pytest.raises(KubernetesError, match="is not elastic"):
        b.scale("fixed", 3)


def test_kubeflow_scale_patches_the_worker_replicas(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend(flavor="kubeflow")
    b.submit(from_dict(job_doc("kf", **ELASTIC)))
    b.scale("kf", 3)
    kf = emu.get("pytorchjobs", "kf")
    assert kf["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    assert kf["spec"]["elasticPolicy"]["minReplicas"] == 1
    with pytest.raises(UsageError, match=r"\[1, 3\]"):
        b.scale("kf", 5)


@pytest.mark.parametrize("flavor, why", [("jobset", "replicatedJobs cannot change"),
                                         ("volcano", "does not resize a Volcano Job")])
def test_jobset_and_volcano_refuse_to_scale_saying_why(emulated: Cluster, flavor: str, why: str) -> None:
    b = emulated.backend(flavor=flavor)
    b.submit(from_dict(job_doc(f"el-{flavor}", **ELASTIC)))
    with pytest.raises(KubernetesError, match=why):
        b.scale(f"el-{flavor}", 3)


@pytest.mark.parametrize("flavor", ["job", "jobset", "volcano", "kubeflow"])
def test_elastic_renders_are_valid_and_tolerate_a_lost_worker(flavor: str) -> None:
    objects = render_manifests(from_dict(job_doc("el", **ELASTIC)), flavor=flavor).objects
    assert_valid(objects)
    if flavor == "job":
        worker = next(o for o in objects if o["kind"] == "Job" and o["metadata"]["name"].endswith("-worker"))
        assert "backoffLimit" not in worker["spec"]
        assert worker["spec"]["backoffLimitPerIndex"] == 2
        assert worker["spec"]["successPolicy"] == {"rules": [{"succeededCount": 1}]}
        assert worker["metadata"]["annotations"]["kubetrain.dev/elastic"] == "1:3"
    elif flavor == "jobset":
        rj = objects[0]["spec"]["replicatedJobs"][-1]["template"]["spec"]
        assert rj["backoffLimitPerIndex"] == 2 and "backoffLimit" not in rj


@pytest.mark.parametrize("policy", ["OnFailure", "Never"])
def test_an_elastic_job_that_lost_a_worker_says_it_is_degraded(emulated: Cluster, policy: str) -> None:
    """As locally ("Running (degraded: 1/2 replicas)"): while a lost worker's replacement has not started, or for
    good when its index is not retried (restartPolicy Never), the running job says how many workers run."""
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    b = emulated.backend(flavor="job")
    spec = {**ELASTIC, "restartPolicy": policy} if policy == "OnFailure" else {
        "elastic": ELASTIC["elastic"], "restartPolicy": "Never"}
    b.submit(from_dict(job_doc("el", **spec)))
    pods = c.create_pods("job", "el")
    for pod in pods.values():
        emu.set_pod_phase("default", pod, "Running")
    assert not b.status("el").degraded  # every worker runs
    c.job_pod_failed(pods["worker-1"], 137)
    status = b.status("el")
    assert status.phase is JobPhase.RUNNING and status.degraded, status.summary_line()
    assert status.phase_text() == "Running (degraded: 1/2 replicas)"
    if policy == "OnFailure":  # the replacement starts: whole again
        new = next(p["metadata"]["name"] for p in emu.objects("pods")
                   if p["metadata"]["name"] != pods["worker-1"]
                   and p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "1")
        emu.set_pod_phase("default", new, "Running")
        assert not b.status("el").degraded
