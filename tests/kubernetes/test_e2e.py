"""End to end, per flavor: submit → pods → Running → Succeeded; a replica exiting 3; restarts per policy;
an unschedulable GPU request explained; logs merged and followed across a restart; cancel; suspend/resume.

Each test runs on the API emulator (the ``cluster`` fixture plays the controllers and the kubelet) and,
with KUBETRAIN_TEST_KUBECONFIG, unchanged on a real cluster (the job's own command does what the
emulator's kubelet is told to do; see docs/kubernetes.md).
"""

# ruff: noqa: F811 - pytest fixtures are imported from tests.support.cluster and named as parameters

from __future__ import annotations

import io
import threading
import time
from typing import Any

import pytest

from kubetrain.backends.kubernetes.client.resources import PODS
from kubetrain.contract.errors import JobNotFound
from kubetrain.contract.logs import LogRecord
from kubetrain.status import JobPhase, ReplicaPhase
from kubetrain.terminal import OutputSink
from tests.support.cluster import FLAVORS, Cluster, cluster  # noqa: F401

# A replica that says hello, stays up long enough to be seen Running, and says bye.
HELLO = 'echo "hello from $KUBETRAIN_REPLICA_INDEX"; sleep 15; echo "bye from $KUBETRAIN_REPLICA_INDEX"'
# worker-1 fails with exit code 3 after a line on stderr; worker-0 would run on.
EXIT3 = 'if [ "$KUBETRAIN_REPLICA_INDEX" = 1 ]; then echo "boom at step 7" >&2; exit 3; fi; sleep 60'
# worker-1 fails on every attempt: the policy restarts it (backoffLimit 1), then gives up.
FLAKY = ('echo "start $KUBETRAIN_REPLICA_INDEX"; sleep 3; '
         'if [ "$KUBETRAIN_REPLICA_INDEX" = 1 ]; then echo "crash 1"; exit 1; fi; sleep 60')


def _all(phase: ReplicaPhase) -> Any:
    return lambda s: bool(s.replicas) and all(r.phase is phase for r in s.replicas)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_submit_run_succeed(cluster: Cluster, flavor: str) -> None:
    b = cluster.backend()
    if not cluster.require(b, flavor):
        return
    job = cluster.job(f"ok-{flavor}", script=HELLO)
    sub = b.submit(job, flavor=flavor)
    assert sub.flavor == flavor and sub.name == job.metadata.name
    first = b.status(sub.name)
    assert first.backend == "kubernetes" and first.namespace == cluster.namespace
    assert [r.name for r in first.replicas] == ["worker-0", "worker-1"]
    assert first.phase in (JobPhase.PENDING, JobPhase.RUNNING)

    pods = cluster.start_pods(b, flavor, sub.name)
    assert sorted(pods) == ["worker-0", "worker-1"]
    for replica, pod in pods.items():
        cluster.kubelet(pod, "Running", f"hello from {replica[-1]}")
    running = cluster.expect(b, sub.name, _all(ReplicaPhase.RUNNING))
    assert running.phase is JobPhase.RUNNING
    assert running.counts()["worker"].running == 2 and running.replicas_column() == "2/2"

    for replica, pod in pods.items():
        cluster.kubelet(pod, "Succeeded", f"bye from {replica[-1]}", exit_code=0)
    cluster.conclude(flavor, sub.name, "Succeeded")
    done = cluster.expect(b, sub.name, lambda s: s.phase.is_terminal)
    assert done.phase is JobPhase.SUCCEEDED, done.summary_line()
    assert all(r.phase is ReplicaPhase.SUCCEEDED and r.exit_code == 0 for r in done.replicas)
    assert done.finished_at is not None and done.first_failure is None
    assert done.summary_line() == f"{sub.name} Succeeded: 2/2 replicas succeeded"

    lines = [(r.key, r.text) for r in b.logs(sub.name)]
    for i in (0, 1):
        mine = [text for key, text in lines if key == f"worker-{i}"]
        assert mine == [f"hello from {i}", f"bye from {i}"]
    [listed] = [s for s in b.list() if s.job_id == sub.name]
    assert listed.phase is JobPhase.SUCCEEDED


@pytest.mark.parametrize("flavor", FLAVORS)
def test_exit_code_3_fails_naming_the_replica(cluster: Cluster, flavor: str) -> None:
    b = cluster.backend()
    if not cluster.require(b, flavor):
        return
    sub = b.submit(cluster.job(f"exit3-{flavor}", script=EXIT3), flavor=flavor)
    pods = cluster.start_pods(b, flavor, sub.name)
    cluster.kubelet(pods["worker-0"], "Running")
    cluster.kubelet(pods["worker-1"], "Failed", "boom at step 7", exit_code=3)
    cluster.conclude(flavor, sub.name, "Failed")

    status = cluster.expect(b, sub.name, lambda s: s.phase.is_terminal)
    assert status.phase is JobPhase.FAILED
    failure = status.first_failure
    assert failure is not None and failure.replica == "worker-1" and failure.exit_code == 3
    assert "boom at step 7" in failure.last_lines
    assert "worker-1 exited with code 3" in status.summary_line()
    assert status.replica("worker", 1).describe_exit() == "exit code 3"  # type: ignore[union-attr]
    text = b.describe(sub.name).text()
    assert "Job " + sub.name + " failed: worker-1 exited with code 3" in text and "| boom at step 7" in text


@pytest.mark.parametrize("flavor", FLAVORS)
def test_restart_per_policy_then_give_up(cluster: Cluster, flavor: str) -> None:
    """restartPolicy OnFailure, backoffLimit 1: worker-1 fails, is restarted as the flavor restarts (a new
    pod, a gang restart, a container restart), fails again, and the job gives up."""
    b = cluster.backend()
    if not cluster.require(b, flavor):
        return
    job = cluster.job(f"restart-{flavor}", script=FLAKY, restartPolicy="OnFailure", runPolicy={"backoffLimit": 1})
    sub = b.submit(job, flavor=flavor)
    pods = cluster.start_pods(b, flavor, sub.name)
    for pod in pods.values():
        cluster.kubelet(pod, "Running")
    c = cluster.controllers
    if c is not None:  # the first failure and what each engine does about it
        if flavor == "job":
            cluster.kubelet(pods["worker-1"], "Failed", "crash 1", exit_code=1)
            pods.update(c.create_pods(flavor, sub.name, only={"worker-1"}))
        elif flavor in ("jobset", "volcano"):
            cluster.kubelet(pods["worker-1"], "Failed", "crash 1", exit_code=1)
            pods = c.gang_restart(flavor, sub.name)
        else:
            cluster.emu.set_pod_phase("default", pods["worker-1"], "Running", restart=True, exit_code=1)  # type: ignore[union-attr]
        for pod in pods.values():
            cluster.kubelet(pod, "Running")
    restarted = cluster.expect(b, sub.name, lambda s: s.total_restarts() >= 1 or s.phase.is_terminal)
    assert restarted.total_restarts() >= 1
    if flavor == "job":
        assert restarted.replica("worker", 1).restarts == 1  # type: ignore[union-attr]
    if flavor == "jobset":
        assert restarted.backoff_count == 1 and restarted.backoff_limit == 1

    cluster.kubelet(pods["worker-1"], "Failed", "crash 1", exit_code=1)
    cluster.conclude(flavor, sub.name, "Failed", restarts=1,
                     reason="ReachedMaxRestarts" if flavor == "jobset" else None)
    final = cluster.expect(b, sub.name, lambda s: s.phase.is_terminal)
    assert final.phase is JobPhase.FAILED
    assert final.first_failure is not None and final.first_failure.replica == "worker-1"
    assert final.total_restarts() >= 1
    if flavor == "job":
        assert final.first_failure.policy_action == "backoffLimit 1 reached, gave up"
    if flavor == "jobset":
        assert final.first_failure.policy_action == "restarted 1/1, gave up"


@pytest.mark.parametrize("flavor", FLAVORS)
def test_pending_gpu_request_is_explained(cluster: Cluster, flavor: str) -> None:
    b = cluster.backend()
    if not cluster.require(b, flavor):
        return
    sub = b.submit(cluster.job(f"gpu-{flavor}", script="sleep 60", resources={"gpu": 64}), flavor=flavor)
    pods = cluster.start_pods(b, flavor, sub.name)
    for pod in pods.values():
        cluster.kubelet(pod, "Pending", reason="Unschedulable")
    if flavor == "volcano" and cluster.controllers is not None:
        cluster.controllers.podgroup_unschedulable(
            sub.name, "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable; "
                      "Pending: 2 Unschedulable")

    status = cluster.expect(b, sub.name, lambda s: s.reason in ("Unschedulable", "PodGroup"))
    assert status.phase is JobPhase.PENDING
    assert status.message is not None and "nvidia.com/gpu" in status.message
    assert all(r.reason == "Unschedulable" for r in status.replicas)
    desc = b.describe(sub.name)
    [unsched] = [d for d in desc.diagnoses if d.cause == "Unschedulable"]
    assert unsched.replicas == ["worker-0", "worker-1"]
    assert "no node has enough free nvidia.com/gpu" in unsched.hint
    assert "Pending:\n  Unschedulable (worker-0, worker-1): " in desc.text()
    assert "— hint: " in desc.text()
    if flavor == "volcano" and not cluster.real:
        assert any(d.cause == "PodGroup" and "minAvailable" in d.hint for d in desc.diagnoses)
    b.cancel(sub.name)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_logs_merged_and_followed_across_a_restart(cluster: Cluster, flavor: str) -> None:
    b = cluster.backend()
    if not cluster.require(b, flavor):
        return
    job = cluster.job(f"follow-{flavor}", script=FLAKY, restartPolicy="OnFailure", runPolicy={"backoffLimit": 1})
    sub = b.submit(job, flavor=flavor)
    got: list[LogRecord] = []
    done = threading.Event()

    def follow() -> None:
        for rec in b.logs(sub.name, follow=True):  # started before any pod exists: Pending is waited for
            got.append(rec)
        done.set()

    threading.Thread(target=follow, daemon=True).start()

    def seen(key: str, text: str, times: int = 1) -> None:
        deadline = time.monotonic() + cluster.timeout
        while sum(1 for r in got if r.key == key and r.text == text) < times:
            seen_so_far = [(r.key, r.text) for r in got]
            assert time.monotonic() < deadline, f"{key}: {text!r} x{times} not seen; got {seen_so_far}"
            time.sleep(0.01)

    pods = cluster.start_pods(b, flavor, sub.name)
    for replica, pod in pods.items():
        cluster.kubelet(pod, "Running", f"start {replica[-1]}")
    seen("worker-0", "start 0")
    seen("worker-1", "start 1")
    c = cluster.controllers
    if c is not None:
        emu = cluster.emu
        assert emu is not None
        if flavor == "job":
            cluster.kubelet(pods["worker-1"], "Failed", "crash 1", exit_code=1)
            pods.update(c.create_pods(flavor, sub.name, only={"worker-1"}))
            cluster.kubelet(pods["worker-1"], "Running", "start 1")
        elif flavor in ("jobset", "volcano"):
            emu.append_log("default", pods["worker-1"], "crash 1\n")
            seen("worker-1", "crash 1")
            cluster.kubelet(pods["worker-1"], "Failed", exit_code=1)
            pods = c.gang_restart(flavor, sub.name)
            for replica, pod in pods.items():
                cluster.kubelet(pod, "Running", f"start {replica[-1]}")
        else:
            emu.append_log("default", pods["worker-1"], "crash 1\n")
            emu.set_pod_phase("default", pods["worker-1"], "Running", restart=True, exit_code=1)
            emu.append_log("default", pods["worker-1"], "start 1\n")
    seen("worker-1", "start 1", 2)
    if c is not None:
        cluster.kubelet(pods["worker-1"], "Failed", "crash 1", exit_code=1)
        cluster.conclude(flavor, sub.name, "Failed", restarts=1)
    assert done.wait(cluster.timeout), "logs -f did not end with the job"
    worker1 = [r.text for r in got if r.key == "worker-1"]
    assert worker1 == ["start 1", "crash 1", "start 1", "crash 1"]
    assert next(r.text for r in got if r.key == "worker-0") == "start 0"
    assert all(got[i].time_ns <= got[i + 1].time_ns for i in range(len(got) - 1) if got[i].key == got[i + 1].key)

    out = io.StringIO()
    sink = OutputSink(out=out, err=out, color=False, keys=["worker-0", "worker-1"])
    for rec in b.logs(sub.name, role="worker", index=1, previous=flavor == "kubeflow"):
        sink.record(rec)
    sink.flush()
    assert out.getvalue().splitlines()[:2] == ["[worker-1] start 1", "[worker-1] crash 1"]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_cancel_cascades(cluster: Cluster, flavor: str) -> None:
    b = cluster.backend()
    if not cluster.require(b, flavor):
        return
    sub = b.submit(cluster.job(f"cancel-{flavor}", script="sleep 300"), flavor=flavor)
    pods = cluster.start_pods(b, flavor, sub.name)
    for pod in pods.values():
        cluster.kubelet(pod, "Running")
    cluster.expect(b, sub.name, _all(ReplicaPhase.RUNNING))
    status = b.cancel(sub.name)
    assert status.phase is JobPhase.CANCELLED and status.condition("Cancelled") is not None
    assert all(r.phase is ReplicaPhase.CANCELLED for r in status.replicas)
    deadline = time.monotonic() + cluster.timeout
    while True:
        try:
            left = b.status(sub.name)
        except JobNotFound:
            break
        assert left.phase is JobPhase.CANCELLED  # being deleted (foreground)
        assert time.monotonic() < deadline
        time.sleep(0.5)
    while b.kube.list(PODS, cluster.namespace, label_selector=f"kubetrain.dev/job={sub.name}")[0]:
        assert time.monotonic() < deadline, "pods outlived the cancelled job"
        time.sleep(0.5)
    if cluster.emu is not None:
        assert cluster.emu.objects("services", label_selector=f"kubetrain.dev/job={sub.name}") == []


@pytest.mark.parametrize("flavor", ["job", "jobset", "kubeflow"])
def test_suspend_and_resume(cluster: Cluster, flavor: str) -> None:
    b = cluster.backend()
    if not cluster.require(b, flavor):
        return
    sub = b.submit(cluster.job(f"pause-{flavor}", script="sleep 300"), flavor=flavor)
    pods = cluster.start_pods(b, flavor, sub.name)
    for pod in pods.values():
        cluster.kubelet(pod, "Running")
    suspended = b.suspend(sub.name)
    assert suspended.phase is JobPhase.SUSPENDED
    if cluster.emu is not None:  # the controller removes the pods of a suspended job
        for pod in pods.values():
            cluster.emu.delete("pods", pod)
        root = cluster.controllers.root(flavor, sub.name)  # type: ignore[union-attr]
        spec = root["spec"]
        assert (spec.get("suspend") or spec.get("runPolicy", {}).get("suspend")) is True
    assert b.suspend(sub.name).phase is JobPhase.SUSPENDED  # idempotent
    cluster.expect(b, sub.name, lambda s: s.phase is JobPhase.SUSPENDED and all(
        r.phase is ReplicaPhase.PENDING for r in s.replicas))
    resumed = b.resume(sub.name)
    assert resumed.phase in (JobPhase.PENDING, JobPhase.RUNNING)
    with pytest.raises(Exception, match="not Suspended"):
        b.resume(sub.name)
    pods = cluster.start_pods(b, flavor, sub.name)
    for pod in pods.values():
        cluster.kubelet(pod, "Running")
    cluster.expect(b, sub.name, _all(ReplicaPhase.RUNNING))
    b.cancel(sub.name)
