"""Logs from every replica: merged in time order with the local backend's prefixes; tail/since/grep/role/index;
previous; following that waits for Pending replicas and survives restarts. Emulator only."""

# ruff: noqa: F811 - pytest fixtures are imported from tests.support.cluster and named as parameters

from __future__ import annotations

import io
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubetrain.backends.kubernetes.client.errors import KubernetesError
from kubetrain.backends.kubernetes.logs import parse_line
from kubetrain.contract.errors import UsageError
from kubetrain.contract.logs import LogRecord
from kubetrain.jobspec import from_dict
from kubetrain.terminal import OutputSink
from tests.support.cluster import Cluster, emulated, job_doc  # noqa: F401


def _start(c: Cluster, name: str, replicas: int = 2, flavor: str = "job", **spec: Any) -> tuple[Any, dict[str, str]]:
    b = c.backend()
    sub = b.submit(from_dict(job_doc(name, replicas=replicas, **spec)), flavor=flavor)
    assert c.controllers is not None
    return b, c.controllers.create_pods(flavor, sub.name)


def test_merged_in_time_order_with_the_local_prefixes(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b, pods = _start(emulated, "merge")
    for pod in pods.values():
        emu.set_pod_phase("default", pod, "Running")
    for step in range(3):
        for replica in ("worker-1", "worker-0"):
            emu.append_log("default", pods[replica], f"{replica} step {step}\n")
    records = list(b.logs("merge"))
    assert [r.text for r in records] == [f"{r} step {s}" for s in range(3) for r in ("worker-1", "worker-0")]
    assert all(r.key == r.text.split()[0] for r in records)
    out = io.StringIO()
    sink = OutputSink(out=out, err=out, color=False, keys=["worker-0", "worker-1"])
    for rec in records:
        sink.record(rec)
    sink.flush()
    assert out.getvalue().splitlines()[:2] == ["[worker-1] worker-1 step 0", "[worker-0] worker-0 step 0"]
    logs = [r for r in emu.requests if r.path.endswith("/log")]
    assert len(logs) == 2 and all(r.query.get("timestamps") == "true" for r in logs)


def test_tail_since_grep_role_and_index(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b, pods = _start(emulated, "filters", replicas=3)
    for replica, pod in pods.items():
        emu.set_pod_phase("default", pod, "Running")
        emu.append_log("default", pod, "".join(f"{replica} loss={i}\n{replica} note {i}\n" for i in range(5)))
    tail = list(b.logs("filters", tail=2))
    assert sorted(r.text for r in tail if r.key == "worker-2") == ["worker-2 loss=4", "worker-2 note 4"]
    assert len(tail) == 6
    grep = list(b.logs("filters", grep=r"loss=[34]", role="worker", index=1))
    assert [r.text for r in grep] == ["worker-1 loss=3", "worker-1 loss=4"]
    assert list(b.logs("filters", since=timedelta(seconds=-60))) == []  # "since" in the future: nothing yet
    assert len(list(b.logs("filters", since=timedelta(minutes=5)))) == 30
    with pytest.raises(KubernetesError, match="--index needs --role"):
        b.logs("filters", index=1)
    with pytest.raises(KubernetesError, match=r"no role 'ps' \(roles: worker\)"):
        b.logs("filters", role="ps")
    with pytest.raises(KubernetesError, match=r"replicas 0\.\.2"):
        b.logs("filters", role="worker", index=3)


def test_tail_counts_the_lines_shown_as_locally(emulated: Cluster) -> None:
    """`--tail N` gives the last N lines the user sees, as the local backend's does: metric lines (hidden) and
    lines `--grep` leaves out do not count, though the API's tailLines counts every line."""
    from kubetrain.metrics.wire import MARKER

    emu = emulated.emu
    assert emu is not None
    b, pods = _start(emulated, "shown", replicas=1)
    pod = pods["worker-0"]
    emu.set_pod_phase("default", pod, "Running")
    metric = MARKER + '{"step": 1, "loss": 0.5}\n'
    emu.append_log("default", pod, "".join(f"step {i}\n" + metric * 30 for i in range(4)))
    assert [r.text for r in b.logs("shown", tail=2)] == ["step 2", "step 3"]
    assert [r.text for r in b.logs("shown", tail=3, grep="step [013]")] == ["step 0", "step 1", "step 3"]
    assert [r.text for r in b.logs("shown", tail=9, grep="^step")] == [f"step {i}" for i in range(4)]


def test_previous_reads_the_container_before_its_restart(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b, pods = _start(emulated, "prev", replicas=2, flavor="kubeflow", restartPolicy="OnFailure",
                     runPolicy={"backoffLimit": 3})
    for pod in pods.values():
        emu.set_pod_phase("default", pod, "Running")
    emu.append_log("default", pods["worker-0"], "before the crash\n")
    emu.set_pod_phase("default", pods["worker-0"], "Running", restart=True, exit_code=139)
    emu.append_log("default", pods["worker-0"], "after the restart\n")
    missing: list[tuple[str, str]] = []
    previous = list(b.logs("prev", previous=True, on_missing=lambda r, why: missing.append((r, why))))
    assert [(r.key, r.text) for r in previous] == [("worker-0", "before the crash")]
    assert [m[0] for m in missing] == ["worker-1"] and "previous" in missing[0][1]
    assert [r.text for r in b.logs("prev", role="worker", index=0)] == ["after the restart"]
    status = b.status("prev")
    assert status.replica("worker", 0).restarts == 1  # type: ignore[union-attr]
    with pytest.raises(KubernetesError, match="cannot be followed"):
        b.logs("prev", follow=True, previous=True)


def _follow(b: Any, name: str, **kwargs: Any) -> tuple[list[LogRecord], threading.Event]:
    got: list[LogRecord] = []
    done = threading.Event()

    def run() -> None:
        for rec in b.logs(name, follow=True, **kwargs):
            got.append(rec)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return got, done


def _until(cond: Any, what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def test_follow_waits_for_a_pending_replica(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b, pods = _start(emulated, "wait", replicas=2)
    emu.set_pod_phase("default", pods["worker-0"], "Running")
    emu.set_pod_phase("default", pods["worker-1"], "Pending", reason="Unschedulable")
    emu.append_log("default", pods["worker-0"], "zero is up\n")
    got, done = _follow(b, "wait")
    _until(lambda: any(r.text == "zero is up" for r in got), "worker-0's line")
    time.sleep(0.1)
    assert not done.is_set()  # worker-1 is Pending: waited for, not an error
    emu.set_pod_phase("default", pods["worker-1"], "Running")
    emu.append_log("default", pods["worker-1"], "one is up at last\n")
    _until(lambda: any(r.text == "one is up at last" for r in got), "worker-1's line once it ran")
    for pod in pods.values():
        emu.append_log("default", pod, "finished\n")
        emu.set_pod_phase("default", pod, "Succeeded", exit_code=0)
    assert emulated.controllers is not None
    emulated.controllers.conclude("job", "wait", "Succeeded")
    assert done.wait(5)
    assert [r.text for r in got if r.key == "worker-1"] == ["one is up at last", "finished"]


@pytest.mark.parametrize(("tail", "grep", "first"), [(2, None, ["step 2", "step 3"]),
                                                     (2, "step [013]", ["step 1", "step 3"])])
def test_follow_tail_counts_the_lines_shown_as_the_one_shot_read(
    emulated: Cluster, tail: int, grep: str | None, first: list[str]
) -> None:
    """`logs -f --tail N` starts with the same N lines `logs --tail N` shows (and the local backend's, either
    way): metric lines (hidden) and lines `--grep` leaves out do not count, then it follows what comes."""
    from kubetrain.metrics.wire import MARKER

    emu = emulated.emu
    assert emu is not None
    b, pods = _start(emulated, "followshown", replicas=1)
    pod = pods["worker-0"]
    emu.set_pod_phase("default", pod, "Running")
    metric = MARKER + '{"step": 1, "loss": 0.5}\n'
    emu.append_log("default", pod, "".join(f"step {i}\n" + metric * 30 for i in range(4)))
    assert [r.text for r in b.logs("followshown", tail=tail, grep=grep)] == first
    got, done = _follow(b, "followshown", tail=tail, grep=grep)
    _until(lambda: len(got) >= len(first), "the last lines shown")
    emu.append_log("default", pod, metric + "step 1 again\n" + metric)
    _until(lambda: [r.text for r in got][-1:] == ["step 1 again"], "a line written while following")
    emu.set_pod_phase("default", pod, "Succeeded", exit_code=0)
    assert emulated.controllers is not None
    emulated.controllers.conclude("job", "followshown", "Succeeded")
    assert done.wait(5)
    assert [r.text for r in got] == [*first, "step 1 again"]


def test_follow_reads_a_restart_it_did_not_see_through_previous(emulated: Cluster) -> None:
    """A container that crashes and restarts between two looks: its last run is read with previous=true."""
    emu = emulated.emu
    assert emu is not None
    b, pods = _start(emulated, "fast", replicas=1, flavor="kubeflow", restartPolicy="OnFailure",
                     runPolicy={"backoffLimit": 3})
    pod = pods["worker-0"]
    emu.set_pod_phase("default", pod, "Running")
    emu.append_log("default", pod, "run 1\n")
    got, done = _follow(b, "fast")
    _until(lambda: [r.text for r in got] == ["run 1"], "the first run")
    emu.delay_next(0.3, "GET", path_regex="/log$")  # we are slow to look again ...
    emu.set_pod_phase("default", pod, "Running", restart=True)  # ... and it crashes twice meanwhile
    emu.append_log("default", pod, "run 2\n")
    emu.set_pod_phase("default", pod, "Running", restart=True)
    emu.append_log("default", pod, "run 3\n")
    _until(lambda: [r.text for r in got][-1:] == ["run 3"], "the third run")
    assert [r.text for r in got] == ["run 1", "run 2", "run 3"]
    emu.set_pod_phase("default", pod, "Succeeded", exit_code=0)
    assert emulated.controllers is not None
    emulated.controllers.conclude("kubeflow", "fast", "Succeeded")
    assert done.wait(5)


def test_follow_ends_after_a_grace_when_hosting_pods_never_end(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b, pods = _start(emulated, "host", replicas=2)
    for pod in pods.values():
        emu.set_pod_phase("default", pod, "Running")
        emu.append_log("default", pod, "serving\n")
    got, done = _follow(b, "host")
    _until(lambda: len(got) == 2, "both replicas")
    assert emulated.controllers is not None
    emulated.controllers.conclude("job", "host", "Succeeded")  # the pods run on (an sshd, a parameter server)
    start = time.monotonic()
    assert done.wait(60)  # it ends (a follow that waited for the pods would never)
    assert time.monotonic() - start > 0.5  # after its grace (1 s in these tests), not at once


def test_lines_are_read_from_the_raw_stream() -> None:
    rec = parse_line(b"2026-01-02T03:04:05.123456789Z caf\xc3\xa9 \xff ok", "worker-0")
    assert rec.text == "café \ufffd ok" and rec.time_ns % 1_000_000_000 == 123456789 and rec.key == "worker-0"
    partial = parse_line(b"2026-01-02T03:04:05Z no newline yet", "worker-0", partial=True)
    assert partial.partial and partial.text == "no newline yet"
    odd = parse_line(b"not a timestamp", "worker-1")
    assert odd.text == "not a timestamp"


def test_a_follow_abandoned_midway_leaves_the_connections_usable(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    b, pods = _start(emulated, "quit", replicas=2)
    for pod in pods.values():
        emu.set_pod_phase("default", pod, "Running")
        emu.append_log("default", pod, "first\nsecond\n")
    follow = b.logs("quit", follow=True)
    assert next(follow).text == "first"
    follow.close()  # `logs -f | head -1`: the streams are still open on the server's side
    start = time.monotonic()
    for _ in range(5):  # pooled connections must not be the abandoned streams
        assert b.status("quit").phase.value == "Running"
    assert time.monotonic() - start < 2


def test_a_follow_ends_when_its_reader_says_stop(emulated: Cluster) -> None:
    """A reader that went away (a closed web page) sets `stop`: the follow of a quiet running job ends,
    instead of waiting for the job's next line."""
    emu = emulated.emu
    assert emu is not None
    b, pods = _start(emulated, "quiet", replicas=1)
    emu.set_pod_phase("default", pods["worker-0"], "Running")
    emu.append_log("default", pods["worker-0"], "started\n")
    stop = threading.Event()
    got, done = _follow(b, "quiet", stop=stop)
    _until(lambda: any(r.text == "started" for r in got), "the first line")
    assert not done.is_set()  # the job runs on, quiet: the follow waits
    stop.set()
    assert done.wait(10)


def test_until_is_applied_by_kubetrain_and_stream_is_refused(emulated: Cluster) -> None:
    """The API has no `until`: kubetrain ends each stream at it (with --tail: the last lines before it). It
    merges stdout and stderr: `stream` is refused with a hint, not answered with both."""
    emu = emulated.emu
    assert emu is not None
    b, pods = _start(emulated, "window", replicas=2)
    for pod in pods.values():
        emu.set_pod_phase("default", pod, "Running")
        emu.append_log("default", pod, "early 1\nearly 2\nearly 3\n")
    cut = time.time()
    while time.time() <= cut:  # the lines below are stamped after the cut
        time.sleep(0.001)
    for pod in pods.values():
        emu.append_log("default", pod, "late 1\nlate 2\n")
    until = datetime.fromtimestamp(cut, UTC)
    assert sorted(r.text for r in b.logs("window", until=until)) == sorted(["early 1", "early 2", "early 3"] * 2)
    assert [r.text for r in b.logs("window", until=until, tail=2, role="worker", index=1)] == ["early 2", "early 3"]
    assert [r.text for r in b.logs("window", tail=2, role="worker", index=1)] == ["late 1", "late 2"]
    assert list(b.logs("window", until=timedelta(hours=1))) == []
    for stream in ("stdout", "stderr"):
        with pytest.raises(UsageError, match="merges a container's stdout and stderr") as refused:
            b.logs("window", stream=stream)
        assert "leave --stream out" in str(refused.value)
    with pytest.raises(UsageError, match="-f follows"):
        b.logs("window", follow=True, until=until)
