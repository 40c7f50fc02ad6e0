"""Bounded following: an attached run and `logs -f` stream at most `--max-log-requests` replicas (default 5, as
kubectl), rank 0 of each role first; a replica left out that fails or restarts still shows its last lines;
`--role/--index` follow what they name. The streams are counted on the emulator's side. Emulator only."""

# ruff: noqa: F811 - pytest fixtures are imported from tests.support.cluster and named as parameters

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from kubetrain.backends.kubernetes.log_choice import ranked
from kubetrain.backends.kubernetes.options import KubernetesOptions
from kubetrain.cli.main import build_parser
from kubetrain.cli.options import backend_options
from kubetrain.contract.logs import LogRecord
from kubetrain.jobspec import from_dict
from kubetrain.status import JobPhase
from tests.kubernetes.test_run import Attached
from tests.support.cluster import Cluster, emulated, job_doc  # noqa: F401


def _until(cond: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def _followed_pods(c: Cluster) -> set[str]:
    """The pods whose log was requested with follow=true: the streams held open."""
    assert c.emu is not None
    return {r.path.split("/")[-2] for r in c.emu.requests
            if r.path.endswith("/log") and r.query.get("follow") == "true"}


def _read_pods(c: Cluster) -> set[str]:
    assert c.emu is not None
    return {r.path.split("/")[-2] for r in c.emu.requests if r.path.endswith("/log")}


def _attached_twelve(c: Cluster, name: str, **options: Any) -> tuple[Attached, dict[str, str]]:
    emu, ctl = c.emu, c.controllers
    assert emu is not None and ctl is not None
    run = Attached(c.backend(flavor="job", **options), from_dict(job_doc(name, replicas=12)))
    _until(lambda: emu.find("jobs", f"{name}-worker") is not None, "the Job")
    pods = ctl.create_pods("job", name)
    for replica, pod in pods.items():
        emu.set_pod_phase("default", pod, "Running")
        emu.append_log("default", pod, f"hello from {replica}\n")
    return run, pods


def _finish(c: Cluster, name: str, pods: dict[str, str], run: Attached) -> None:
    assert c.emu is not None
    for pod in pods.values():
        if c.emu.get("pods", pod, "default")["status"].get("phase") == "Running":
            c.emu.set_pod_phase("default", pod, "Succeeded", exit_code=0)
    c.conclude("job", name, "Succeeded")
    run.done()


def test_an_attached_run_of_twelve_replicas_streams_rank_zero_first_and_five_at_most(emulated: Cluster) -> None:
    run, pods = _attached_twelve(emulated, "twelve")
    _until(lambda: all(f"hello from worker-{i}" in run.out.getvalue() for i in range(5)), "the first five replicas")
    _finish(emulated, "twelve", pods, run)
    assert _followed_pods(emulated) == {pods[f"worker-{i}"] for i in range(5)}
    assert "hello from worker-5" not in run.out.getvalue()
    [note] = [e for e in run.events if e.startswith("following the logs")]
    assert note.startswith("following the logs of 5 of 12 replicas (worker-0, worker-1, worker-2, worker-3, worker-4)")
    assert "--max-log-requests 12" in note and "kubetrain logs -f twelve --role ROLE --index N" in note


def test_a_failing_replica_left_out_shows_its_last_lines(emulated: Cluster) -> None:
    """worker-9 is not streamed; when the watch sees it fail, its last lines are read once and printed,
    and the failure comes from the watch, as for any replica."""
    emu = emulated.emu
    assert emu is not None
    run, pods = _attached_twelve(emulated, "tail")
    _until(lambda: "hello from worker-4" in run.out.getvalue(), "the followed replicas")
    emu.append_log("default", pods["worker-9"], "".join(f"step {i}\n" for i in range(30))
                   + "Traceback (most recent call last):\nValueError: bad shape\n")
    emu.set_pod_phase("default", pods["worker-9"], "Failed", exit_code=3)
    _until(lambda: "[worker-9] ValueError: bad shape" in run.out.getvalue(), "worker-9's last lines")
    assert run.saw("worker-9 failed: exit code 3")
    emulated.conclude("job", "tail", "Failed")
    result = run.done()
    assert result.status is not None and result.status.phase is JobPhase.FAILED
    shown = [line for line in run.out.getvalue().splitlines() if line.startswith("[worker-9]")]
    assert shown[-2:] == ["[worker-9] Traceback (most recent call last):", "[worker-9] ValueError: bad shape"]
    assert len(shown) == 20  # its last lines, not its whole log
    assert pods["worker-9"] not in _followed_pods(emulated) and pods["worker-9"] in _read_pods(emulated)


def test_a_replica_left_out_shows_each_restart_and_its_failure_among_other_changes(emulated: Cluster) -> None:
    """The follower looks only at the replicas whose pods changed since its last look: a replica left out that
    restarts, then fails after other replicas changed, shows its last lines each time, and the replicas that
    only ran are never read."""
    emu = emulated.emu
    assert emu is not None
    run, pods = _attached_twelve(emulated, "changes")
    _until(lambda: "hello from worker-4" in run.out.getvalue(), "the followed replicas")
    emu.append_log("default", pods["worker-7"], "first try: NaN loss\n")
    emu.set_pod_phase("default", pods["worker-7"], "Running", restart=True, exit_code=1)
    _until(lambda: "[worker-7] first try: NaN loss" in run.out.getvalue(), "worker-7's lines before its restart")
    for i in (8, 10, 11):  # other replicas change: looked at, nothing to show
        emu.patch_status("pods", pods[f"worker-{i}"], {"message": "still going"})
    emu.set_pod_phase("default", pods["worker-6"], "Succeeded", exit_code=0)
    emu.append_log("default", pods["worker-7"], "second try: ValueError: bad shape\n")
    emu.set_pod_phase("default", pods["worker-7"], "Failed", exit_code=3)
    _until(lambda: "[worker-7] second try: ValueError: bad shape" in run.out.getvalue(), "worker-7's failure")
    assert run.saw("worker-7 failed: exit code 3")
    emulated.conclude("job", "changes", "Failed")
    result = run.done()
    assert result.status is not None and result.status.phase is JobPhase.FAILED
    assert run.out.getvalue().count("[worker-7] first try: NaN loss") == 1  # each instance's lines once
    followed = {pods[f"worker-{i}"] for i in range(5)}
    assert _read_pods(emulated) - followed == {pods["worker-7"]}


def test_max_log_requests_twenty_follows_all_twelve(emulated: Cluster) -> None:
    run, pods = _attached_twelve(emulated, "all", max_log_requests=20)
    _until(lambda: all(f"hello from worker-{i}" in run.out.getvalue() for i in range(12)), "every replica")
    _finish(emulated, "all", pods, run)
    assert _followed_pods(emulated) == set(pods.values())
    assert not any(e.startswith("following the logs") for e in run.events)


def _follow(b: Any, name: str, **kwargs: Any) -> tuple[list[LogRecord], list[str], threading.Event]:
    got: list[LogRecord] = []
    notes: list[str] = []
    done = threading.Event()

    def run() -> None:
        for rec in b.logs(name, follow=True, on_note=notes.append, **kwargs):
            got.append(rec)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return got, notes, done


def test_logs_follow_streams_what_the_filters_name_and_shows_a_restart_left_out(emulated: Cluster) -> None:
    emu, ctl = emulated.emu, emulated.controllers
    assert emu is not None and ctl is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("filtered", replicas=12, restartPolicy="OnFailure",
                                     runPolicy={"backoffLimit": 3})), flavor="kubeflow")
    pods = ctl.create_pods("kubeflow", sub.name)
    for replica, pod in pods.items():
        emu.set_pod_phase("default", pod, "Running")
        emu.append_log("default", pod, f"hello from {replica}\n")
    named, named_notes, named_done = _follow(b, "filtered", role="worker", index=9)
    _until(lambda: [r.text for r in named] == ["hello from worker-9"], "the replica the filters name")
    assert _followed_pods(emulated) == {pods["worker-9"]}
    everyone, notes, done = _follow(b, "filtered")
    _until(lambda: len(_followed_pods(emulated)) == 6, "the first five replicas' streams")
    assert _followed_pods(emulated) == {pods[f"worker-{i}"] for i in (0, 1, 2, 3, 4, 9)}
    _until(lambda: len(notes) == 1, "the note")
    assert notes[0].startswith("following the logs of 5 of 12 replicas") and named_notes == []
    emu.append_log("default", pods["worker-7"], "worker-7 crashes\n")
    emu.set_pod_phase("default", pods["worker-7"], "Running", restart=True, exit_code=139)
    _until(lambda: any(r.text == "worker-7 crashes" for r in everyone), "the restarted replica's last lines")
    for pod in pods.values():
        emu.set_pod_phase("default", pod, "Succeeded", exit_code=0)
    emulated.conclude("kubeflow", "filtered", "Succeeded")
    assert done.wait(10) and named_done.wait(10)
    assert pods["worker-7"] not in _followed_pods(emulated)


def test_rank_zero_of_each_role_comes_first() -> None:
    replicas = [("worker", 2), ("worker", 0), ("ps", 1), ("worker", 1), ("ps", 0), ("chief", 0)]
    assert ranked(replicas) == [("worker", 0), ("ps", 0), ("chief", 0), ("worker", 1), ("ps", 1), ("worker", 2)]


def test_choosing_five_of_10000_replicas_ranks_only_the_first_places() -> None:
    """The choice at the start of a 10,000-replica job: the same five as ranking everyone, without a sort key
    for each of 10,000 replicas held at once (a megabyte and a half, at the moment the run's memory peaks)."""
    import tracemalloc

    from kubetrain.backends.kubernetes.log_choice import choose

    places = [("worker", i) for i in range(1, 10_000)] + [("chief", 0), ("worker", 0)]
    choice = choose(5)
    tracemalloc.start()
    try:
        assert choice.update(iter(places))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert choice.followed == {f"{r}-{i}" for r, i in ranked(places)[:5]}
    assert choice.candidates == 10_001 and choice.left_out == 9_996
    assert peak < 800_000, f"{peak} bytes at the peak"
    assert not choice.update(iter(places))  # full: nothing added


def test_max_log_requests_is_a_flag_of_run_and_logs(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["logs", "-f", "x", "--backend", "k8s", "--max-log-requests", "20"],
                 ["run", "--backend", "k8s", "--max-log-requests", "20", "job.yaml"]):
        assert backend_options(build_parser(argv[0]).parse_args(argv)) == KubernetesOptions(max_log_requests=20)
    assert KubernetesOptions().max_log_requests == 5  # as kubectl
    with pytest.raises(SystemExit) as exit_:
        build_parser("logs").parse_args(["logs", "x", "--backend", "k8s", "--max-log-requests", "0"])
    assert exit_.value.code == 2 and "--max-log-requests: 0 is not 1 or more" in capsys.readouterr().err


def test_a_change_before_the_followers_watcher_runs_still_wakes_it(emulated: Cluster, monkeypatch: Any) -> None:
    """The follower's first look sees worker-0 Pending; it starts Running before the thread that wakes the
    follower on changes gets to run. That change must still wake it (it was lost: on 1,000 replicas the
    attached run printed nothing)."""
    from kubetrain.backends.kubernetes import log_follower as logs

    emu, ctl = emulated.emu, emulated.controllers
    assert emu is not None and ctl is not None
    b = emulated.backend()
    sub = b.submit(from_dict(job_doc("late", replicas=1)), flavor="job")
    pods = ctl.create_pods("job", sub.name)
    first_look, watcher_may_run = threading.Event(), threading.Event()
    followers: list[Any] = []
    step, watch_changes = logs.LogFollower._step, logs.LogFollower._watch_changes

    def looked(self: Any, *args: Any) -> bool:
        done = step(self, *args)
        followers.append(self)
        first_look.set()
        return done

    def late(self: Any, *args: Any) -> None:
        watcher_may_run.wait()
        watch_changes(self, *args)

    monkeypatch.setattr(logs.LogFollower, "_step", looked)
    monkeypatch.setattr(logs.LogFollower, "_watch_changes", late)
    got, _notes, done = _follow(b, "late")
    assert first_look.wait(10)
    emu.set_pod_phase("default", pods["worker-0"], "Running")
    emu.append_log("default", pods["worker-0"], "up at last\n")

    def seen_running() -> bool:  # by the follower's own watch
        _status, grouped, _containers = followers[0].state()
        return bool(grouped.current.get(("worker", 0), {}).get("status", {}).get("phase") == "Running")

    _until(seen_running, "the follower's watch holding the change")
    watcher_may_run.set()
    _until(lambda: any(r.text == "up at last" for r in got), "the line of the pod that started")
    emu.set_pod_phase("default", pods["worker-0"], "Succeeded", exit_code=0)
    emulated.conclude("job", "late", "Succeeded")
    assert done.wait(10)
