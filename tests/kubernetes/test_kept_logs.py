"""Logs that outlive their pods: what an attached run or `logs -f` read of a job is kept on this machine, and
`logs` reads it back, with the same filters, once the cluster has no pod (or no job) to ask. Emulator only: the
test deletes pods and jobs under a finished run, as a TTL, a garbage collector or `cancel` would."""

# ruff: noqa: F811 - pytest fixtures are imported from tests.support.cluster and named as parameters

from __future__ import annotations

import io
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kubetrain.backends.kubernetes.backend import KubernetesBackend
from kubetrain.backends.kubernetes.client.errors import KubernetesError
from kubetrain.backends.logfiles.kept import MAX_OPEN, Keeper, find
from kubetrain.backends.logfiles.reader import log_files
from kubetrain.contract.errors import JobNotFound, UsageError
from kubetrain.contract.logs import LogRecord
from kubetrain.jobspec import from_dict
from kubetrain.status import JobPhase
from kubetrain.terminal import OutputSink
from tests.support.cluster import FAST_RETRY, Cluster, emulated, job_doc  # noqa: F401


def _until(cond: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def _kept_root() -> Path:
    return Path(os.environ["KUBETRAIN_HOME"]) / "kept-logs"


def _finish(emulated: Cluster, name: str, pods: dict[str, str], flavor: str = "job") -> None:
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    for pod in pods.values():
        emu.set_pod_phase("default", pod, "Succeeded", exit_code=0)
    c.conclude(flavor, name, "Succeeded")


def _delete_pods(emulated: Cluster, pods: dict[str, str]) -> None:
    assert emulated.emu is not None
    for pod in pods.values():
        emulated.emu.delete("pods", pod, "default")


def _followed(b: KubernetesBackend, name: str) -> tuple[list[LogRecord], threading.Thread]:
    got: list[LogRecord] = []
    t = threading.Thread(target=lambda: got.extend(b.logs(name, follow=True)), daemon=True)
    t.start()
    return got, t


def test_logs_f_keeps_what_it_read_and_logs_reads_it_back_once_the_pods_are_gone(emulated: Cluster) -> None:
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("kept", replicas=2)), flavor="job")
    pods = c.create_pods("job", sub.name)
    for replica, pod in pods.items():
        emu.set_pod_phase("default", pod, "Running")
        emu.append_log("default", pod, "".join(f"{replica} step {i}\n" for i in range(3)))
    got, follower = _followed(b, "kept")
    _until(lambda: len(got) == 6, "the lines so far")
    for replica, pod in pods.items():
        emu.append_log("default", pod, f"{replica} says goodbye\n")
    _until(lambda: len(got) == 8, "the last lines")
    _finish(emulated, "kept", pods)
    follower.join(10)
    assert not follower.is_alive()
    from_api = list(b.logs("kept"))
    assert len(from_api) == 8

    _delete_pods(emulated, pods)
    assert list(b.logs("kept", on_note=lambda _t: None)) != []  # the API has no log now: the kept ones answer
    notes: list[str] = []
    kept = list(b.logs("kept", on_note=notes.append))
    # The same lines, times and replicas as the API gave while the pods were there.
    assert [(r.key, r.time_ns, r.text) for r in kept] == [(r.key, r.time_ns, r.text) for r in from_api]
    [note] = notes
    assert note.startswith("job kept has no pods left: reading the logs this machine kept of it, saved by "
                           "kubetrain logs -f from ")
    assert "2 replica(s)" in note and str(_kept_root()) in note

    # The same filters as on the API's logs.
    assert [r.text for r in b.logs("kept", role="worker", index=1)] == \
        [f"worker-1 step {i}" for i in range(3)] + ["worker-1 says goodbye"]
    assert [r.text for r in b.logs("kept", role="worker", index=0, tail=2)] == ["worker-0 step 2",
                                                                                "worker-0 says goodbye"]
    assert sorted(r.text for r in b.logs("kept", grep="goodbye")) == ["worker-0 says goodbye",
                                                                      "worker-1 says goodbye"]
    cut = next(r for r in kept if r.text == "worker-0 says goodbye").time_ns
    at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=cut // 1000)  # the emulator stamps to the µs
    before = [r.text for r in b.logs("kept", until=at, role="worker", index=0)]
    assert before == [f"worker-0 step {i}" for i in range(3)]
    assert [r.text for r in b.logs("kept", since=at, role="worker", index=0)] == ["worker-0 says goodbye"]
    assert list(b.logs("kept", since=timedelta(seconds=-60))) == []
    with pytest.raises(UsageError, match="merges"):
        b.logs("kept", stream="stderr")

    # The job itself deleted: found by name, in this namespace of this context.
    b.delete("kept")
    _until(lambda: not emu.objects("jobs", "default"), "the job deleted")
    gone: list[str] = []
    assert [(r.key, r.text) for r in b.logs("kept", on_note=gone.append)] == [(r.key, r.text) for r in from_api]
    assert gone[0].startswith("job kept is no longer on the cluster: reading the logs this machine kept of it")
    with pytest.raises(KubernetesError, match=r"have no role ps \(kept: worker-0, worker-1\)"):
        list(b.logs("kept", role="ps"))
    # `logs -f` of a job that is gone: what was kept, and the end (nothing left to follow).
    assert len(list(b.logs("kept", follow=True))) == 8


def test_another_context_or_namespace_never_sees_them(emulated: Cluster, tmp_path: Path) -> None:
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("twin", replicas=1)), flavor="job")
    pods = c.create_pods("job", sub.name)
    emu.set_pod_phase("default", pods["worker-0"], "Running")
    emu.append_log("default", pods["worker-0"], "from the first cluster\n")
    got, follower = _followed(b, "twin")
    _until(lambda: len(got) == 1, "the line")
    _finish(emulated, "twin", pods)
    follower.join(10)
    b.delete("twin")
    _until(lambda: not emu.objects("jobs", "default"), "the job deleted")
    assert [r.text for r in b.logs("twin")] == ["from the first cluster"]

    other = KubernetesBackend(kubeconfig=emu.write_kubeconfig(tmp_path / "other", context="other-cluster"),
                              namespace="default", retry=FAST_RETRY)
    elsewhere = KubernetesBackend(kubeconfig=emulated.kubeconfig, namespace="team-b", retry=FAST_RETRY)
    try:
        for backend in (other, elsewhere):
            with pytest.raises(JobNotFound):
                backend.logs("twin")
    finally:
        other.close()
        elsewhere.close()
    assert sorted(p.name for p in _kept_root().iterdir()) == ["kube-emulator"]


def test_an_attached_run_keeps_its_output(emulated: Cluster) -> None:
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    b = emulated.backend(flavor="job")
    out = io.StringIO()
    result: list[Any] = []
    sink = OutputSink(out=out, err=io.StringIO(), color=False)
    t = threading.Thread(target=lambda: result.append(b.run(from_dict(job_doc("attached-kept")), sink=sink)),
                         daemon=True)
    t.start()
    _until(lambda: result or emu.objects("jobs", "default"), "the Job")
    assert not result, result
    pods = c.create_pods("job", "attached-kept")
    for replica, pod in pods.items():
        emu.set_pod_phase("default", pod, "Running")
        emu.append_log("default", pod, f"epoch 1 on {replica}\n")
    _until(lambda: "epoch 1 on worker-1" in out.getvalue() and "epoch 1 on worker-0" in out.getvalue(), "output")
    _finish(emulated, "attached-kept", pods)
    t.join(10)
    assert result and result[0].status.phase is JobPhase.SUCCEEDED
    _delete_pods(emulated, pods)
    notes: list[str] = []
    assert sorted(r.text for r in b.logs("attached-kept", on_note=notes.append)) == ["epoch 1 on worker-0",
                                                                                    "epoch 1 on worker-1"]
    assert "saved by kubetrain run from " in notes[0]


def test_a_second_follow_appends_only_what_is_new(emulated: Cluster) -> None:
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("twice", replicas=1)), flavor="job")
    pods = c.create_pods("job", sub.name)
    emu.set_pod_phase("default", pods["worker-0"], "Running")
    emu.append_log("default", pods["worker-0"], "one\ntwo\nthree\n")  # three lines, one timestamp
    got, first = _followed(b, "twice")
    _until(lambda: len(got) == 3, "the first lines")
    second_got, second = _followed(b, "twice")  # another reader, while the first still follows
    _until(lambda: len(second_got) == 3, "the second reader's lines")
    emu.append_log("default", pods["worker-0"], "four\n")
    _until(lambda: len(got) == 4 and len(second_got) == 4, "the new line, for both")
    _finish(emulated, "twice", pods)
    first.join(10)
    second.join(10)
    _delete_pods(emulated, pods)
    assert [r.text for r in b.logs("twice")] == ["one", "two", "three", "four"]


def test_the_cap_keeps_the_newest_lines_and_says_how_many_it_cut(emulated: Cluster,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBETRAIN_KEPT_LOGS_MAX_SIZE", "64Ki")
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("chatty", replicas=1)), flavor="job")
    pods = c.create_pods("job", sub.name)
    emu.set_pod_phase("default", pods["worker-0"], "Running")
    got, follower = _followed(b, "chatty")
    for batch in range(10):
        emu.append_log("default", pods["worker-0"], "".join(f"line {batch * 100 + i:04d} {'x' * 80}\n"
                                                            for i in range(100)))
    _until(lambda: len(got) == 1000, "every line")
    _finish(emulated, "chatty", pods)
    follower.join(10)
    _delete_pods(emulated, pods)
    kept = list(b.logs("chatty"))
    first, rest = kept[0], kept[1:]
    # Rotation kept the newest lines, to the end, in order; what it removed is counted in the first line read.
    assert rest[-1].text.startswith("line 0999 ") and [r.text[:9] for r in rest] == \
        [f"line {i:04d}" for i in range(1000 - len(rest), 1000)]
    assert first.stream == "stderr" and first.text.startswith(f"kubetrain: {1000 - len(rest):,} earlier lines")
    assert "rotated away (kubetrain keeps at most 64.0 KiB of a job's logs on this machine" in first.text
    assert "KUBETRAIN_KEPT_LOGS_MAX_SIZE sets that" in first.text
    folder = next(_kept_root().rglob("worker-0.log")).parent
    on_disk = sum(p.stat().st_size for p in log_files(folder / "worker-0.log"))
    assert on_disk <= 64 * 1024
    assert datetime.fromtimestamp(first.time_ns / 1e9, UTC) <= rest[0].time


def test_keeping_none_when_the_cap_is_zero(emulated: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBETRAIN_KEPT_LOGS_MAX_SIZE", "0")
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("unkept", replicas=1)), flavor="job")
    pods = c.create_pods("job", sub.name)
    emu.set_pod_phase("default", pods["worker-0"], "Running")
    emu.append_log("default", pods["worker-0"], "said once\n")
    got, follower = _followed(b, "unkept")
    _until(lambda: len(got) == 1, "the line")
    _finish(emulated, "unkept", pods)
    follower.join(10)
    _delete_pods(emulated, pods)
    assert list(b.logs("unkept")) == []
    assert not _kept_root().exists()


def test_a_keeper_holds_few_files_open_however_many_replicas_it_keeps(tmp_path: Path) -> None:
    """Thousands of failing replicas each have their last lines read: the keeper holds at most `MAX_OPEN` files
    open, and a replica written again after its file was closed carries on in it, every line once."""
    keeper = Keeper("ctx", "ns", "many", lambda: "uid-1", by="test", root=tmp_path)
    keeper.replicas = 3 * MAX_OPEN
    base = time.time_ns()

    def open_kept() -> int:
        return sum(1 for fd in Path("/proc/self/fd").iterdir() if str(tmp_path) in os.path.realpath(fd))

    for round_ in range(2):
        for r in range(3 * MAX_OPEN):
            for i in range(3):
                keeper.add(LogRecord(base + (round_ * 10 + i) * 1000, "stdout", f"r{r} round {round_} line {i}",
                                     key=f"worker-{r}"))
            keeper.flush()
            assert open_kept() <= MAX_OPEN
    keeper.close()
    assert open_kept() == 0
    found = find("ctx", "ns", "many", root=tmp_path)
    assert found is not None and len(found.paths()) == 3 * MAX_OPEN
    assert [r.text for r in found.read(role="worker", index=5)] == \
        [f"r5 round {rnd} line {i}" for rnd in range(2) for i in range(3)]


def test_logs_f_of_a_finished_job_whose_pods_are_gone_prints_what_was_kept(emulated: Cluster) -> None:
    """A finished job whose pods were cleaned up while the job stays (a cleanPodPolicy, a garbage collector):
    nothing is left to follow, and `logs -f` (the web view's reader too) shows what was kept, then ends."""
    emu, c = emulated.emu, emulated.controllers
    assert emu is not None and c is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("cleaned", replicas=2)), flavor="job")
    pods = c.create_pods("job", sub.name)
    for replica, pod in pods.items():
        emu.set_pod_phase("default", pod, "Running")
        emu.append_log("default", pod, f"{replica} trained\n")
    got, follower = _followed(b, "cleaned")
    _until(lambda: len(got) == 2, "the lines")
    _finish(emulated, "cleaned", pods)
    follower.join(10)
    _delete_pods(emulated, pods)
    assert b.status("cleaned").phase is JobPhase.SUCCEEDED  # the job stays, its pods are gone
    notes: list[str] = []
    again = list(b.logs("cleaned", follow=True, on_note=notes.append))
    assert sorted(r.text for r in again) == ["worker-0 trained", "worker-1 trained"]
    assert notes and notes[0].startswith("job cleaned has no pods left: reading the logs this machine kept")
