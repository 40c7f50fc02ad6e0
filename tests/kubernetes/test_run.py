"""The verbs as the CLI uses them: run (attached, detached, paused, interrupted), list, describe, cancel,
delete, suspend/resume where the engine cannot. Emulator only: the test plays the cluster while ``run``
follows the job in the foreground."""

# ruff: noqa: F811 - pytest fixtures are imported from tests.support.cluster and named as parameters

from __future__ import annotations

import io
import json
import threading
import time
from typing import Any

import pytest

from kubetrain.backends.base import RunResult
from kubetrain.backends.kubernetes.client.errors import KubernetesError
from kubetrain.contract.errors import JobNotFound
from kubetrain.jobspec import from_dict
from kubetrain.status import JobPhase
from kubetrain.status_text import format_table
from kubetrain.terminal import OutputSink
from tests.support.cluster import Cluster, emulated, job_doc  # noqa: F401


def _wait_for(cond: Any, what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


class Attached:
    """``backend.run(...)`` in a thread, with its output and events captured."""

    def __init__(self, b: Any, job: Any, **kwargs: Any) -> None:
        self.out = io.StringIO()
        self.err = io.StringIO()
        self.events: list[str] = []
        self.result: list[RunResult | BaseException] = []
        sink = OutputSink(out=self.out, err=self.err, color=False)

        def run() -> None:
            try:
                self.result.append(b.run(job, sink=sink, on_event=self.events.append, **kwargs))
            except BaseException as exc:
                self.result.append(exc)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def saw(self, text: str) -> bool:
        return any(text in e for e in self.events)

    def done(self, timeout: float = 10.0) -> RunResult:
        self.thread.join(timeout)
        assert self.result, "run did not return"
        [result] = self.result
        if isinstance(result, BaseException):
            raise result
        return result


def test_attached_run_prints_output_causes_and_the_end(emulated: Cluster) -> None:
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    b = emulated.backend(flavor="jobset")
    run = Attached(b, from_dict(job_doc("attached")))
    _wait_for(lambda: emu.find("jobsets", "attached") is not None, "the JobSet")
    pods = c.create_pods("jobset", "attached")
    emu.set_pod_phase("default", pods["worker-1"], "Pending", reason="Unschedulable")
    _wait_for(lambda: run.saw("pending: Unschedulable (worker-1)"), "the pending cause")
    for replica, pod in pods.items():
        emu.set_pod_phase("default", pod, "Running")
        emu.append_log("default", pod, f"epoch 1 on {replica}\n")
    _wait_for(lambda: "epoch 1 on worker-1" in run.out.getvalue(), "merged output")
    for pod in pods.values():
        emu.set_pod_phase("default", pod, "Succeeded", exit_code=0)
    c.conclude("jobset", "attached", "Succeeded")
    result = run.done()
    assert result.exit_code == 0 and result.status is not None and result.status.phase is JobPhase.SUCCEEDED
    lines = run.out.getvalue().splitlines()
    assert sorted(lines) == ["[worker-0] epoch 1 on worker-0", "[worker-1] epoch 1 on worker-1"]
    assert next(e for e in run.events if not e.startswith("warning: ")) == \
        "created job attached (jobset flavor) in namespace default: JobSet/attached"
    [pending] = [e for e in run.events if e.startswith("pending:")]
    assert "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. — hint: no node has enough free" in pending
    assert "worker-0 succeeded" in run.events and "worker-1 succeeded" in run.events
    assert run.events[-1] == "job attached Succeeded"
    # a constant number of requests from submit to the end: discovery, the creates, 2 lists, 2 watches,
    # the two log streams, the pending causes' reads
    assert emu.count_requests() <= 14, [(r.method, r.path) for r in emu.requests]


def test_attached_failure_explains_itself(emulated: Cluster) -> None:
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    b = emulated.backend(flavor="job")
    run = Attached(b, from_dict(job_doc("broken")))
    _wait_for(lambda: emu.find("jobs", "broken-worker") is not None, "the Job")
    pods = c.create_pods("job", "broken")
    emu.set_pod_phase("default", pods["worker-0"], "Running")
    emu.set_pod_phase("default", pods["worker-1"], "Running")
    emu.append_log("default", pods["worker-1"], "Traceback (most recent call last):\nValueError: bad shape\n")
    emu.set_pod_phase("default", pods["worker-1"], "Failed", exit_code=3)
    c.conclude("job", "broken", "Failed")
    result = run.done()
    assert result.exit_code == 1
    status = result.status
    assert status is not None and status.first_failure is not None
    assert status.first_failure.explain("broken").splitlines() == [
        "Job broken failed: worker-1 exited with code 3 (backoffLimit 0 reached, gave up)",
        "  last output of worker-1:",
        "    | Traceback (most recent call last):",
        "    | ValueError: bad shape",
    ]
    assert "worker-1 failed: exit code 3" in run.events


def test_detached_and_paused_runs_return_at_once(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    detached = emulated.backend(flavor="job").run(from_dict(job_doc("later")), detach=True)
    assert detached.exit_code == 0 and detached.status is not None and detached.detached
    assert detached.status.phase is JobPhase.PENDING and detached.job_id == "later"
    assert (detached.backend, detached.namespace, detached.flavor) == ("kubernetes", "default", "job")
    b = emulated.backend(flavor="jobset")
    paused = b.run(from_dict(job_doc("held", runMode="Pause")))
    assert paused.status is not None and paused.status.phase is JobPhase.SUSPENDED
    assert emu.get("jobsets", "held")["metadata"]["annotations"]["kubetrain.dev/paused"] == "true"
    resumed = b.resume("held")
    assert resumed.phase is JobPhase.PENDING
    assert emu.get("jobsets", "held")["spec"]["suspend"] is False
    assert "kubetrain.dev/paused" not in (emu.get("jobsets", "held")["metadata"].get("annotations") or {})


def test_ctrl_c_cancels_an_attached_run(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend(flavor="job")

    def interrupt(text: str) -> None:
        if text.startswith("job"):
            raise KeyboardInterrupt

    result = b.run(from_dict(job_doc("interrupted")), on_event=interrupt)
    assert result.exit_code == 130 and result.status is not None and result.status.phase is JobPhase.CANCELLED
    assert emu.find("jobs", "interrupted-worker") is None


def test_list_describe_and_output_formats(emulated: Cluster) -> None:
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    b = emulated.backend()
    for name, flavor in (("a-job", "job"), ("b-set", "jobset"), ("c-vol", "volcano"), ("d-kf", "kubeflow")):
        b.submit(from_dict(job_doc(name)), flavor=flavor)
        pods = c.create_pods(flavor, name)
        emu.set_pod_phase("default", pods["worker-0"], "Running")
        emu.set_pod_phase("default", pods["worker-1"], "Pending", reason="ErrImagePull", message="not found")
    emu.create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "not-ours", "namespace": "default"},
                "spec": {"template": {"spec": {"restartPolicy": "Never",
                                               "containers": [{"name": "c", "image": "busybox"}]}}}})
    emu.clear_requests()
    jobs = b.list()
    assert sorted(j.job_id for j in jobs) == ["a-job", "b-set", "c-vol", "d-kf"]
    assert all(j.phase is JobPhase.RUNNING and j.reason == "ImagePull" for j in jobs)
    # one list per workload kind served (JobSet, Job, Volcano Job, 4 Kubeflow kinds) and one of pods
    assert emu.count_requests() == 8
    table = format_table(jobs, wide=True).splitlines()
    assert table[0].split() == ["NAME", "PHASE", "REPLICAS", "RESTARTS", "AGE", "BACKEND", "NAMESPACE", "REASON"]
    assert "kubernetes" in table[1] and "ImagePull" in table[1]
    desc = b.describe("c-vol")
    data = json.loads(json.dumps(desc.to_dict()))
    assert data["diagnosis"][0]["cause"] == "ImagePull" and data["pods"]["worker-1"]["name"] == "c-vol-worker-1"
    assert data["objects"] == [{"kind": "Job", "name": "c-vol", "apiVersion": "batch.volcano.sh/v1alpha1"}]
    assert "Pods:\n  worker-0" in desc.text() and "Objects:\n  Job/c-vol (batch.volcano.sh/v1alpha1)" in desc.text()
    with pytest.raises(JobNotFound, match="no kubetrain job nope in namespace default"):
        b.status("nope")


def test_cancel_keeps_finished_pods_under_clean_pod_policy_none_and_delete_removes_them(emulated: Cluster) -> None:
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    b = emulated.backend()
    b.submit(from_dict(job_doc("keep", runPolicy={"cleanPodPolicy": "None"})), flavor="kubeflow")
    pods = c.create_pods("kubeflow", "keep")
    emu.set_pod_phase("default", pods["worker-0"], "Succeeded", exit_code=0)
    emu.set_pod_phase("default", pods["worker-1"], "Running")
    status = b.cancel("keep")
    assert status.phase is JobPhase.CANCELLED
    assert emu.find("pytorchjobs", "keep") is None
    assert [p["metadata"]["name"] for p in emu.objects("pods")] == [pods["worker-0"]]  # kept for its logs
    with pytest.raises(JobNotFound):
        b.cancel("keep")
    b.delete("keep")  # what the job left behind
    assert emu.objects("pods") == []
    with pytest.raises(JobNotFound):
        b.delete("keep")


def test_cancel_of_an_ended_job_is_refused_and_delete_works(emulated: Cluster) -> None:
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    b = emulated.backend()
    b.submit(from_dict(job_doc("over")), flavor="job")
    c.conclude("job", "over", "Succeeded")
    with pytest.raises(KubernetesError, match=r"already ended \(Succeeded\); kubetrain delete over removes it"):
        b.cancel("over")
    with pytest.raises(KubernetesError, match="already ended"):
        b.suspend("over")
    b.delete("over")
    assert emu.objects("jobs") == [] and emu.objects("services", label_selector="kubetrain.dev/job") == []


def test_volcano_suspend_needs_volcano_commands(emulated: Cluster) -> None:
    b = emulated.backend()
    b.submit(from_dict(job_doc("vc")), flavor="volcano")
    with pytest.raises(KubernetesError, match=r"Volcano's Command API \(bus\.volcano\.sh/v1alpha1\)"):
        b.suspend("vc")


def test_launcher_jobs_stop_their_hosts_when_the_root_ends(emulated: Cluster) -> None:
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    b = emulated.backend(flavor="job")
    doc = job_doc("mpi", framework="mpi", replicas=2)
    run = Attached(b, from_dict(doc))
    _wait_for(lambda: len(emu.objects("jobs")) == 2, "the launcher and worker Jobs")
    root = next(j for j in emu.objects("jobs") if not j["metadata"].get("ownerReferences"))
    assert root["metadata"]["labels"]["kubetrain.dev/role"] == "launcher"
    c.create_pods("job", "mpi")
    c.conclude("job", "mpi", "Succeeded")
    result = run.done()
    assert result.status is not None and result.status.phase is JobPhase.SUCCEEDED
    workers = next(j for j in emu.objects("jobs") if j["metadata"].get("ownerReferences"))
    assert workers["spec"]["suspend"] is True  # their pods go; the record stays
