"""Workload objects and pods → the shared status model. Pure functions: objects are written by hand, in the
shape the API server and each engine's controller give them."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.backends.kubernetes.status_map import (
    job_status,
    jobs_by_name,
    parse_time,
    pod_index,
    replica_from_pod,
)
from kubetrain.status import JobPhase, ReplicaPhase

T0 = "2026-03-01T10:00:00Z"
T1 = "2026-03-01T10:00:05Z"
T2 = "2026-03-01T10:01:00Z"


def labels(role: str, **extra: str) -> dict[str, str]:
    return {"kubetrain.dev/job": "demo", "kubetrain.dev/role": role, "app.kubernetes.io/managed-by": "kubetrain",
            **extra}


def template(role: str, container: str = "main") -> dict[str, Any]:
    return {"metadata": {"labels": labels(role)}, "spec": {"containers": [{"name": container, "image": "x"}]}}


def batch_job(role: str, completions: int, *, root: bool = True, status: dict[str, Any] | None = None,
              **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"demo-{role}", "namespace": "ml", "labels": labels(role),
                            "creationTimestamp": T0, "uid": f"uid-{role}"}
    if not root:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "demo-launcher", "uid": "u"}]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"completions": completions, "parallelism": completions, "backoffLimit": 2,
                     "template": template(role), **spec},
            "status": status or {}}


def pod(role: str, index: int, phase: str = "Running", *, created: str = T0, name: str | None = None,
        container: str = "main", index_label: str = "batch.kubernetes.io/job-completion-index",
        state: dict[str, Any] | None = None, restarts: int = 0, last: dict[str, Any] | None = None,
        conditions: list[dict[str, Any]] | None = None, **extra_labels: str) -> dict[str, Any]:
    if state is None:
        state = {"running": {"startedAt": T1}} if phase == "Running" else (
            {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": T2}} if phase == "Succeeded"
            else {"waiting": {"reason": "ContainerCreating"}})
    cs = {"name": container, "state": state, "restartCount": restarts, "ready": phase == "Running"}
    if last:
        cs["lastState"] = {"terminated": last}
    return {
        "metadata": {"name": name or f"demo-{role}-{index}-abcde", "uid": name or f"{role}-{index}-{created}",
                     "creationTimestamp": created,
                     "labels": {**labels(role), index_label: str(index), **extra_labels}},
        "spec": {"containers": [{"name": container}], "nodeName": "node-a"},
        "status": {"phase": phase, "startTime": T1, "containerStatuses": [cs], "conditions": conditions or []},
    }


def test_parse_time() -> None:
    assert parse_time("1970-01-01T00:01:00Z") == 60.0
    assert parse_time("1970-01-01T00:01:00.25Z") == 60.25
    assert parse_time("1970-01-01T01:01:00+01:00") == 60.0
    assert parse_time(None) is None and parse_time("yesterday") is None


def test_job_flavor_running_with_a_pending_replica() -> None:
    st = job_status([batch_job("worker", 3)], [pod("worker", 0), pod("worker", 1, "Pending")], job_id="demo")
    assert st.phase is JobPhase.RUNNING and st.backend == "kubernetes" and st.namespace == "ml"
    assert [(r.name, r.phase) for r in st.replicas] == [
        ("worker-0", ReplicaPhase.RUNNING), ("worker-1", ReplicaPhase.PENDING), ("worker-2", ReplicaPhase.PENDING)]
    assert st.replicas[1].reason == "ContainerCreating"
    assert st.replicas[2].reason == "NoPod"
    assert st.counts()["worker"].running == 1 and st.counts()["worker"].pending == 2
    assert st.replicas[0].host == "node-a" and st.started_at == parse_time(T1)
    assert st.backoff_limit == 2 and st.created_at == parse_time(T0)


def test_job_flavor_failure_names_the_first_failed_replica_and_the_policy() -> None:
    failed = {"conditions": [
        {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": T2},
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
         "message": "Job has reached the specified backoff limit", "lastTransitionTime": T2}]}
    pods = [
        pod("worker", 0, "Failed", state={"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": T2}}),
        pod("worker", 1, "Failed", name="w1-old", created=T0,
            state={"terminated": {"exitCode": 3, "reason": "Error", "finishedAt": T1}}),
        pod("worker", 1, "Failed", name="w1-new", created=T1,
            state={"terminated": {"exitCode": 3, "reason": "Error", "finishedAt": T1}}),
    ]
    st = job_status([batch_job("worker", 2, status=failed)], pods)
    assert st.phase is JobPhase.FAILED and st.reason == "BackoffLimitExceeded"
    assert st.message == "Job has reached the specified backoff limit"
    assert st.finished_at == parse_time(T2)
    w1 = st.replica("worker", 1)
    assert w1 is not None and w1.restarts == 1 and w1.exit_code == 3  # the replaced pod counts as a restart
    assert st.first_failure is not None and st.first_failure.replica == "worker-1"
    assert st.first_failure.headline() == "worker-1 exited with code 3 (backoffLimit 2 reached, gave up)"
    assert st.total_restarts() == 1


def test_oom_crashloop_and_completed_indexes() -> None:
    oom = pod("worker", 0, "Failed", state={"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": T1}})
    crash = pod("worker", 1, "Running", state={"waiting": {"reason": "CrashLoopBackOff"}}, restarts=4,
                last={"exitCode": 2, "reason": "Error", "finishedAt": T1})
    job = batch_job("worker", 3, status={"completedIndexes": "2"})
    st = job_status([job], [oom, crash])
    assert st.replica("worker", 0).describe_exit() == "OOMKilled (137)"  # type: ignore[union-attr]
    r1 = st.replica("worker", 1)
    assert r1 is not None and r1.phase is ReplicaPhase.RUNNING and r1.reason == "CrashLoopBackOff"
    assert r1.restarts == 4 and r1.message == "last exit code 2"
    assert st.replica("worker", 2).phase is ReplicaPhase.SUCCEEDED  # type: ignore[union-attr]


def test_unscheduled_and_evicted_pods() -> None:
    unsched = pod("worker", 0, "Pending", state={}, conditions=[
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", "lastTransitionTime": T1}])
    evicted = pod("worker", 1, "Failed", state={})
    evicted["status"].update(reason="Evicted", message="The node was low on resource: ephemeral-storage.")
    st = job_status([batch_job("worker", 2)], [unsched, evicted])
    r0, r1 = st.replicas
    assert (r0.phase, r0.reason) == (ReplicaPhase.PENDING, "Unschedulable") and "nvidia.com/gpu" in (r0.message or "")
    assert (r1.phase, r1.reason, r1.exit_code) == (ReplicaPhase.FAILED, "Evicted", None)


def test_job_flavor_multi_role_root_decides_and_suspension() -> None:
    launcher = batch_job("launcher", 1, status={"conditions": [
        {"type": "Complete", "status": "True", "lastTransitionTime": T2}]})
    workers = batch_job("worker", 2, root=False)
    pods = [pod("launcher", 0, "Succeeded", index_label="kubetrain.dev/replica-index"),
            pod("worker", 0), pod("worker", 1)]
    st = job_status([workers, launcher], pods)  # any order: the root is the Job nobody owns
    assert st.phase is JobPhase.SUCCEEDED
    assert [r.role for r in st.replicas] == ["launcher", "worker", "worker"]
    assert [c.type for c in st.conditions] == ["Created", "Complete"]
    assert st.conditions[1].message is None

    paused = batch_job("worker", 2, suspend=True)
    paused["metadata"]["annotations"] = {"kubetrain.dev/paused": "true"}
    st = job_status([paused], [])
    assert st.phase is JobPhase.SUSPENDED and all(r.reason == "Suspended" for r in st.replicas)
    queued = batch_job("worker", 2, suspend=True)
    queued["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "team-a"
    st = job_status([queued], [])
    assert st.phase is JobPhase.PENDING and st.reason == "WaitingForAdmission"


def test_a_job_being_deleted_is_cancelled() -> None:
    job = batch_job("worker", 1)
    job["metadata"]["deletionTimestamp"] = T2
    st = job_status([job], [pod("worker", 0)])
    assert st.phase is JobPhase.CANCELLED and st.reason == "Deleted"
    # Its running pod is stopped with it: Cancelled, as a cancelled local replica, not Running or Failed.
    assert [(r.phase, r.reason) for r in st.replicas] == [(ReplicaPhase.CANCELLED, "Cancelled")]


def jobset(status: dict[str, Any], replicas: int = 2, max_restarts: int = 2) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "demo", "namespace": "ml", "labels": labels("x"), "creationTimestamp": T0},
            "spec": {"failurePolicy": {"maxRestarts": max_restarts}, "replicatedJobs": [
                {"name": "worker", "replicas": 1, "template": {"metadata": {"labels": labels("worker")},
                                                               "spec": {"completions": replicas,
                                                                        "template": template("worker")}}}]},
            "status": status}


def test_jobset_gang_restarts_and_attempts() -> None:
    old = pod("worker", 0, "Failed", name="old", created=T0, state={"terminated": {"exitCode": 1, "finishedAt": T1}},
              **{"jobset.sigs.k8s.io/restart-attempt": "0"})
    new = [pod("worker", i, "Running", name=f"new{i}", created=T1, **{"jobset.sigs.k8s.io/restart-attempt": "1"})
           for i in range(2)]
    st = job_status([jobset({"restarts": 1})], [old, *new])
    assert st.phase is JobPhase.RUNNING and st.backoff_count == 1 and st.backoff_limit == 2
    assert [r.restarts for r in st.replicas] == [0, 0] and st.total_restarts() == 1  # counted once, for the gang
    failed = jobset({"restarts": 2, "conditions": [
        {"type": "Failed", "status": "True", "reason": "ReachedMaxRestarts", "message": "jobset failed",
         "lastTransitionTime": T2}]})
    st = job_status([failed], [pod("worker", 0, "Failed", state={"terminated": {"exitCode": 1, "finishedAt": T2}})])
    assert st.phase is JobPhase.FAILED and st.first_failure is not None
    assert st.first_failure.policy_action == "restarted 2/2, gave up"


def test_volcano_states() -> None:
    def vj(state: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                "metadata": {"name": "demo", "namespace": "ml", "labels": labels("x"), "creationTimestamp": T0},
                "spec": {"maxRetry": 3, "tasks": [{"name": "worker", "replicas": 2, "template": template("worker")}]},
                "status": {"state": state, "retryCount": 1}}

    vpod = pod("worker", 1, "Running", index_label="volcano.sh/task-index")
    assert job_status([vj({"phase": "Running"})], [vpod]).phase is JobPhase.RUNNING
    done = job_status([vj({"phase": "Completed", "lastTransitionTime": T2})], [])
    assert done.phase is JobPhase.SUCCEEDED and all(r.phase is ReplicaPhase.SUCCEEDED for r in done.replicas)
    aborted = job_status([vj({"phase": "Aborted"})], [])
    assert aborted.phase is JobPhase.SUSPENDED
    failed = job_status([vj({"phase": "Failed", "reason": "PodFailed", "lastTransitionTime": T2})], [])
    assert failed.phase is JobPhase.FAILED and failed.reason == "PodFailed" and failed.backoff_count == 1
    # pods named <job>-<task>-<index>, without an index label, are still placed
    bare = pod("worker", 0, name="demo-worker-0", index_label="unrelated")
    assert pod_index(bare) == 0


def test_kubeflow_conditions_and_replica_types() -> None:
    kf = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
          "metadata": {"name": "demo", "namespace": "ml", "labels": labels("x"), "creationTimestamp": T0},
          "spec": {"runPolicy": {"backoffLimit": 3}, "pytorchReplicaSpecs": {
              "Master": {"replicas": 1, "template": template("master", "pytorch")},
              "Worker": {"replicas": 2, "template": template("worker", "pytorch")}}},
          "status": {"conditions": [
              {"type": "Created", "status": "True", "lastTransitionTime": T0},
              {"type": "Running", "status": "True", "lastTransitionTime": T1}]}}
    pods = [pod("master", 0, container="pytorch", index_label="training.kubeflow.org/replica-index"),
            pod("worker", 0, container="pytorch", index_label="training.kubeflow.org/replica-index", restarts=2)]
    st = job_status([kf], pods)
    assert st.phase is JobPhase.RUNNING and [r.name for r in st.replicas] == ["master-0", "worker-0", "worker-1"]
    assert st.replica("worker", 0).restarts == 2  # type: ignore[union-attr]
    kf["status"]["conditions"].append({"type": "Succeeded", "status": "True", "message": "done",
                                       "lastTransitionTime": T2})
    st = job_status([kf], pods)
    assert st.phase is JobPhase.SUCCEEDED and st.message is None and st.backoff_limit == 3


def test_jobs_by_name_leaves_out_the_jobs_a_jobset_owns() -> None:
    child = batch_job("worker", 2)
    child["metadata"]["ownerReferences"] = [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                             "name": "demo", "uid": "x"}]
    role_job = batch_job("worker", 2, root=False)
    groups = jobs_by_name([child, role_job, batch_job("launcher", 1)])
    assert [j["metadata"]["name"] for j in groups["demo"]] == ["demo-worker", "demo-launcher"]


@pytest.mark.parametrize(("phase", "expected"), [("Running", ReplicaPhase.RUNNING), ("Weird", ReplicaPhase.UNKNOWN)])
def test_replica_phases(phase: str, expected: ReplicaPhase) -> None:
    assert replica_from_pod("worker", 0, pod("worker", 0, phase)).phase is expected
