"""Status by watch: list, then watch from the list's resourceVersion; relist on 410; nothing missed; a
constant number of requests per job however long it runs. Emulator only (faults on demand)."""

# ruff: noqa: F811 - pytest fixtures are imported from tests.support.cluster and named as parameters

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from kubetrain.backends.kubernetes.client.resources import JOBS, PODS
from kubetrain.backends.kubernetes.essentials import KeptPod
from kubetrain.backends.kubernetes.follow import job_state
from kubetrain.backends.kubernetes.watch import JobWatch
from kubetrain.jobspec import from_dict
from kubetrain.status import JobPhase, JobStatus
from tests.support.cluster import Cluster, emulated, job_doc, now  # noqa: F401


def _complete(emu: Any, job: str) -> None:
    t = now()
    emu.patch_status("jobs", job, {"conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": t}]})


def _in_thread(fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            out.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def _watches(emu: Any, plural: str) -> list[Any]:
    return [r for r in emu.requests if r.method == "GET" and r.path.endswith(f"/{plural}")
            and r.query.get("watch") == "true"]


def _lists(emu: Any, plural: str) -> list[Any]:
    return [r for r in emu.requests if r.method == "GET" and r.path.endswith(f"/{plural}")
            and r.query.get("watch") != "true"]


def test_watch_resumes_after_410_without_losing_the_terminal_event(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("gone", replicas=1)), flavor="job")
    [pod] = emu.create_job_pods("default", "gone-worker")
    emu.set_pod_phase("default", pod["metadata"]["name"], "Running")
    thread, out = _in_thread(lambda: b.wait(sub.name, timeout=10))
    deadline = time.monotonic() + 5
    while len(_watches(emu, "jobs")) < 1 or len(_watches(emu, "pods")) < 1:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    lists_before = len(_lists(emu, "jobs"))
    # The watch connection breaks; while we are away the job finishes and the server forgets its history.
    emu.delay_next(0.3, "GET", path_regex="/jobs$")
    emu.end_streams()
    emu.set_pod_phase("default", pod["metadata"]["name"], "Succeeded", exit_code=0)
    _complete(emu, "gone-worker")
    emu.compact()
    thread.join(10)
    [status] = out
    assert isinstance(status, JobStatus) and status.phase is JobPhase.SUCCEEDED
    assert len(_lists(emu, "jobs")) == lists_before + 1  # the 410 made it list again, which showed the end
    resumed = _watches(emu, "jobs")[-1]
    assert resumed.status == 200


def test_a_relist_after_410_keeps_the_pods_that_did_not_change_as_they_were_kept(emulated: Cluster) -> None:
    """A relist holds the pods that did not change once (the objects kept before), the changed ones anew."""
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("relist", replicas=2)), flavor="job")
    pods = [p["metadata"]["name"] for p in emu.create_job_pods("default", "relist-worker")]
    for name in pods:
        emu.set_pod_phase("default", name, "Running")
    with JobWatch(b.kube, "default", sub.name, JOBS) as jw:
        assert jw.wait_synced(10)
        deadline = time.monotonic() + 10
        while {(p["status"] or {}).get("phase") for p in jw.pods.snapshot()} != {"Running"}:
            assert time.monotonic() < deadline, "the watch never saw the pods run"
            jw.wait_change(jw.version, timeout=1)
        before = {p["metadata"]["name"]: p for p in jw.pods.snapshot()}
        lists = len(_lists(emu, "pods"))
        emu.delay_next(0.3, "GET", path_regex="/pods$")  # the watch comes back after the history is gone
        emu.end_streams()
        emu.set_pod_phase("default", pods[1], "Failed", exit_code=2)
        emu.compact()
        def phase_of(name: str) -> str | None:
            return next((p["status"] or {}).get("phase") for p in jw.pods.snapshot() if p["metadata"]["name"] == name)

        while len(_lists(emu, "pods")) == lists or phase_of(pods[1]) != "Failed":
            assert time.monotonic() < deadline, "no relist showed the failure"
            jw.wait_change(jw.version, timeout=1)
        after = {p["metadata"]["name"]: p for p in jw.pods.snapshot()}
    assert jw.pods.relists >= 1
    assert after[pods[0]] is before[pods[0]]  # unchanged: the object kept before, not a second copy
    assert after[pods[1]] is not before[pods[1]] and after[pods[1]]["status"]["phase"] == "Failed"
    # ... and the changed one shares with its version before what did not change (one copy of its labels).
    new, old = after[pods[1]], before[pods[1]]
    assert isinstance(new, KeptPod) and isinstance(old, KeptPod)
    assert new.labels is old.labels and new.own is old.own and new.spec is old.spec
    assert new["metadata"]["labels"] == old["metadata"]["labels"]


def test_the_watch_lists_pods_a_small_page_at_a_time(emulated: Cluster) -> None:
    """A page of whole pods is held while its pods are reduced to what kubetrain keeps: pages of 100, not
    kubectl's 500 (several MB once parsed, more than the essentials of thousands of pods)."""
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("paged", replicas=250)), flavor="job")
    emu.create_job_pods("default", "paged-worker")
    emu.clear_requests()
    with JobWatch(b.kube, "default", sub.name, JOBS) as jw:
        assert jw.wait_synced(30)
        assert len(jw.pods.snapshot()) == 250
    pages = _lists(emu, "pods")
    assert len(pages) == 3 and {r.query.get("limit") for r in pages} == {"100"}


def test_a_job_that_ends_between_list_and_watch_is_not_missed(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("quick", replicas=1)), flavor="job")
    [pod] = emu.create_job_pods("default", "quick-worker")
    emu.delay_next(0.0, "GET", path_regex="/jobs$")  # the list: answered at once
    emu.delay_next(0.4, "GET", path_regex="/jobs$")  # the watch: arrives late, after the job has ended
    with b.watch(sub.name, resource=JOBS) as jw:
        assert jw.workloads.synced.wait(5)
        emu.set_pod_phase("default", pod["metadata"]["name"], "Succeeded", exit_code=0)
        _complete(emu, "quick-worker")
        state = job_state(jw, sub.name)
        seen, deadline = 0, time.monotonic() + 5
        while (status := state()[0]) is None or status.phase is not JobPhase.SUCCEEDED:
            assert time.monotonic() < deadline, "the end of the job was missed"
            seen = jw.wait_change(seen, timeout=1)
    assert len(_lists(emu, "jobs")) == 1  # seen through the watch from the list's version, not a relist


def test_requests_per_job_do_not_grow_with_its_length(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()

    def run_job(name: str, steps: int) -> tuple[int, JobPhase]:
        sub = b.submit(from_dict(job_doc(name, replicas=2)), flavor="job")
        pods = [p["metadata"]["name"] for p in emu.create_job_pods("default", f"{name}-worker")]
        emu.clear_requests()
        thread, out = _in_thread(lambda: b.wait(sub.name, timeout=20))
        for i in range(steps):  # a long job: many status changes, log lines, restarts
            pod = pods[i % 2]
            emu.set_pod_phase("default", pod, "Running", restart=i > 0 and i % 10 == 0)
            emu.append_log("default", pod, f"step {i}\n")
        for pod in pods:
            emu.set_pod_phase("default", pod, "Succeeded", exit_code=0)
        _complete(emu, f"{name}-worker")
        thread.join(20)
        return len(emu.requests), out[0].phase

    short, phase_short = run_job("short", 2)
    long, phase_long = run_job("long", 200)
    assert phase_short is phase_long is JobPhase.SUCCEEDED
    # The locate (JobSet and Job lists), the two informers' lists and watches: at most 7 whatever the length
    # (a watch may not even start when the job ends first), and never one per event: no polling.
    assert short <= 7 and long <= 7


def test_a_server_side_watch_timeout_resumes_from_the_last_version(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend(watch_timeout=1)
    sub = b.submit(from_dict(job_doc("slow", replicas=1)), flavor="job")
    [pod] = emu.create_job_pods("default", "slow-worker")
    thread, out = _in_thread(lambda: b.wait(sub.name, timeout=10))
    # Wait until the jobs watch ended once (timeoutSeconds=1) and was resumed; on a loaded machine that can
    # take longer than the timeout itself, so wait for the resumed request rather than for a fixed time.
    deadline = time.monotonic() + 10
    while len(_watches(emu, "jobs")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    emu.set_pod_phase("default", pod["metadata"]["name"], "Succeeded", exit_code=0)
    _complete(emu, "slow-worker")
    thread.join(10)
    assert out[0].phase is JobPhase.SUCCEEDED
    assert len(_lists(emu, "jobs")) == 2 and len(_watches(emu, "jobs")) >= 2  # locate + informer; no relist
    assert all(r.query.get("resourceVersion") not in (None, "", "0") for r in _watches(emu, "jobs"))


def test_a_deleted_job_ends_the_wait_as_cancelled(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("deleted", replicas=1)), flavor="job")
    thread, out = _in_thread(lambda: b.wait(sub.name, timeout=10))
    # Delete once the wait has found the job and watches it (its jobs watch is open), not after a fixed time: on
    # a loaded machine the job could be gone before the wait looked it up (JobNotFound, not a cancelled job).
    deadline = time.monotonic() + 10
    while not _watches(emu, "jobs") and time.monotonic() < deadline:
        time.sleep(0.05)
    emu.delete("jobs", "deleted-worker", propagation="Background")
    thread.join(10)
    assert out[0].phase is JobPhase.CANCELLED and out[0].reason == "Deleted"


def test_job_watch_counts_and_stops(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    b.submit(from_dict(job_doc("jw", replicas=2)), flavor="job")
    with JobWatch(b.kube, "default", "jw", JOBS) as jw:
        assert jw.wait_synced(5)
        seen = jw.version
        pods = emu.create_job_pods("default", "jw-worker")
        while len(jw.snapshot()[1]) < 2:
            seen = jw.wait_change(seen, timeout=5)
        workloads, pod_objs, deleted = jw.snapshot()
        assert [w["metadata"]["name"] for w in workloads] == ["jw-worker"] and not deleted
        assert sorted(p["metadata"]["name"] for p in pod_objs) == sorted(p["metadata"]["name"] for p in pods)
        assert all(p["kind"] == "Pod" for p in pod_objs)
    assert b.kube.request_count >= 4


def test_a_watch_that_is_refused_is_reported(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("denied", replicas=1)), flavor="job")
    emu.fail_next("GET", path_regex="/pods$", status=403, message="pods is forbidden: cannot watch", times=3)
    with pytest.raises(Exception, match="403 Forbidden: pods is forbidden"):
        b.wait(sub.name, timeout=5)
    assert PODS.plural == "pods"
