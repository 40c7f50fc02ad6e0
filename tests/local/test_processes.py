"""The local backend's process layer, with real processes: output, exits, stopping, no orphans, log files."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from kubetrain.backends.local import spawning
from kubetrain.backends.local._watchdog import TAG_VAR, add_tag, kill_tagged
from kubetrain.backends.local.job_processes import kill_recorded
from kubetrain.backends.local.log_follow import follow_log
from kubetrain.backends.local.processes import ExitEvent, LaunchSpec, ProcessGroup
from kubetrain.backends.local.procfs import proc_start_time
from kubetrain.backends.local.spawning import find_program
from kubetrain.backends.logfiles import format as log_format
from kubetrain.backends.logfiles import reader as log_reader
from kubetrain.backends.logfiles.reader import iter_log, merge_logs
from kubetrain.backends.logfiles.writer import LineAssembler, LogWriter
from kubetrain.contract.logs import LogRecord
from kubetrain.terminal import OutputSink
from tests.support.helpers import alive

PY = sys.executable


# --------------------------------------------------------------------------- helpers


def spec(tmp_path: Path, key: str, argv: list[str], **env: str) -> LaunchSpec:
    return LaunchSpec(key, argv, {**os.environ, **env}, str(tmp_path), tmp_path / "logs" / f"{key}.log")


def wait_until(cond: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def pump_until(group: ProcessGroup, cond: Callable[[], bool], timeout: float = 10.0) -> list[ExitEvent]:
    """Pump the group's output until ``cond()``; returns the exits seen meanwhile."""
    events: list[ExitEvent] = []
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        events += group.wait_exit(0.05)
    return events


def read_pids(path: Path) -> list[int]:
    try:
        return [int(x) for x in path.read_text().split()]
    except (FileNotFoundError, ValueError):
        return []


def tagged_processes(token: str) -> list[int]:
    """Pids of live processes carrying ``token`` in their environment."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and alive(int(name)):
            try:
                environ = Path(f"/proc/{name}/environ").read_bytes()
            except OSError:
                continue
            if f"{TAG_VAR}=".encode() in environ and f"{token}:".encode() in environ:
                found.append(int(name))
    return found


@pytest.fixture
def sink_io() -> Iterator[tuple[OutputSink, io.StringIO, io.StringIO]]:
    out, err = io.StringIO(), io.StringIO()
    yield OutputSink(out, err, color=False), out, err


# --------------------------------------------------------------------------- output


def test_output_of_two_replicas_reaches_sink_and_log_files(
    tmp_path: Path, sink_io: tuple[OutputSink, io.StringIO, io.StringIO]
) -> None:
    sink, out, err = sink_io
    code = textwrap.dedent(
        """
        import sys
        i = sys.argv[1]
        print(f"hello from {i}", flush=True)
        print(f"problem in {i}", file=sys.stderr, flush=True)
        sys.stdout.buffer.write(b"bytes \\xff\\xfe end\\n")
        sys.stdout.write(f"no newline {i}")
        """
    )
    specs = [spec(tmp_path, f"worker-{i}", [PY, "-c", code, str(i)]) for i in range(2)]
    with ProcessGroup(specs, sink=sink) as group:
        started = group.start()
        assert set(started) == {"worker-0", "worker-1"}
        events = pump_until(group, lambda: not group.running())
        events += group.terminate()
    assert sorted((e.key, e.returncode) for e in events) == [("worker-0", 0), ("worker-1", 0)]

    for i in range(2):
        assert f"[worker-{i}] hello from {i}\n" in out.getvalue()
        assert f"[worker-{i}] bytes \ufffd\ufffd end\n" in out.getvalue()
        # The last line had no newline: kept, and ended on the terminal so the next prefix starts a line.
        assert f"[worker-{i}] no newline {i}\n" in out.getvalue()
        assert f"[worker-{i}] problem in {i}\n" in err.getvalue()
        assert "problem" not in out.getvalue()

        log = tmp_path / "logs" / f"worker-{i}.log"
        recs = list(iter_log(log))
        by_stream = {s: [r.text for r in recs if r.stream == s] for s in ("stdout", "stderr")}
        assert by_stream["stdout"] == [f"hello from {i}", "bytes \ufffd\ufffd end", f"no newline {i}"]
        assert by_stream["stderr"] == [f"problem in {i}"]
        assert [r.partial for r in recs if r.stream == "stdout"] == [False, False, True]
        # The file keeps the bytes as written; only readers replace invalid UTF-8.
        raw = log.read_bytes()
        assert b"bytes \xff\xfe end\n" in raw
        assert re.match(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z (stdout|stderr) [FP] ", raw)


def test_prefixes_are_padded_and_coloured_per_replica() -> None:
    out = io.StringIO()
    sink = OutputSink(out, out, color=True, keys=["worker-0", "worker-10", "launcher"])
    for k in ("worker-0", "worker-10", "launcher"):
        sink.line(k, "stdout", "x")
    sink.flush()
    lines = out.getvalue().splitlines()
    colours = [re.match(r"\x1b\[(\d+)m", line).group(1) for line in lines]  # type: ignore[union-attr]
    assert len(set(colours)) == 3
    plain = [re.sub(r"\x1b\[\d+m", "", line) for line in lines]
    assert plain == ["[worker-0]  x", "[worker-10] x", "[launcher]  x"]


def test_no_colour_without_a_terminal_or_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    monkeypatch.delenv("NO_COLOR", raising=False)
    OutputSink(tty, tty, keys=["a"]).line("a", "stdout", "x")
    s = OutputSink(tty, tty, keys=["a"])
    s.line("a", "stdout", "x")
    s.flush()
    assert "\x1b[" in tty.getvalue()

    monkeypatch.setenv("NO_COLOR", "1")
    tty2 = Tty()
    s = OutputSink(tty2, tty2, keys=["a"])
    s.line("a", "stdout", "x")
    s.flush()
    assert tty2.getvalue() == "[a] x\n"

    monkeypatch.delenv("NO_COLOR")
    plain = io.StringIO()
    s = OutputSink(plain, plain, keys=["a"])
    s.line("a", "stdout", "x")
    s.flush()
    assert plain.getvalue() == "[a] x\n"


def test_sink_survives_a_closed_output() -> None:
    r, w = os.pipe()
    os.close(r)
    out = open(w, "w")  # noqa: SIM115 - closed below
    try:
        sink = OutputSink(out, out, color=False)
        sink.line("a", "stdout", "x" * 100_000)
        sink.flush()  # EPIPE: printing stops, nothing raises
        sink.line("a", "stdout", "y")
        sink.flush()
    finally:
        with contextlib.suppress(OSError):
            out.close()


def test_long_lines_are_split_without_breaking_characters() -> None:
    asm = LineAssembler()
    line = ("é" * (log_format.MAX_LINE // 2 + 10)).encode()  # 2 bytes a character, longer than MAX_LINE
    chunks = [line[i : i + 4093] for i in range(0, len(line), 4093)]
    pieces: list[tuple[bytes, bool]] = []
    for c in chunks:
        pieces += asm.feed(c)
    pieces += asm.feed(b"\nnext")
    pieces += asm.finish()
    assert b"".join(p for p, partial in pieces[:-2]) + pieces[-2][0] == line
    assert all(partial for _, partial in pieces[:-2]) and pieces[-2][1] is False
    assert all(len(p) <= log_format.MAX_LINE for p, _ in pieces)
    for p, _ in pieces[:-1]:
        p.decode()  # no character cut in two
    assert pieces[-1] == (b"next", True)


def test_a_long_line_from_a_replica_is_kept_whole_across_records(tmp_path: Path) -> None:
    size = log_format.MAX_LINE * 2 + 123
    s = spec(tmp_path, "w", [PY, "-c", f"print('a' * {size})"])
    with ProcessGroup([s]) as group:
        group.start()
        pump_until(group, lambda: not group.running())
        group.terminate()
    recs = list(iter_log(s.log_path))
    assert "".join(r.text for r in recs) == "a" * size
    assert [r.partial for r in recs] == [True, True, False]


# --------------------------------------------------------------------------- exits and stopping


def test_exit_code_is_reported_and_terminate_stops_the_rest(tmp_path: Path) -> None:
    specs = [
        spec(tmp_path, "fails", ["sh", "-c", "exit 3"]),
        spec(tmp_path, "sleeps", ["sleep", "300"]),
    ]
    with ProcessGroup(specs) as group:
        pids = group.start()
        events = group.wait_exit(timeout=30)
        assert [(e.key, e.returncode, e.pid) for e in events] == [("fails", 3, pids["fails"][0])]
        assert group.running() == {"sleeps"}
        rest = group.terminate(grace=10)
        assert [(e.key, e.returncode) for e in rest] == [("sleeps", -signal.SIGTERM)]
        assert group.running() == set()
        assert group.wait_exit(timeout=None) == []  # nothing left to wait for
    assert not alive(pids["sleeps"][0])


def test_a_replica_ignoring_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    s = spec(tmp_path, "stubborn", ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"])
    with ProcessGroup([s]) as group:
        pid = group.start()["stubborn"][0]
        pump_until(group, lambda: any(r.text == "ready" for r in iter_log(s.log_path)))
        t0 = time.monotonic()
        rest = group.terminate(grace=0.5)
        assert time.monotonic() - t0 >= 0.5  # it did get its grace
        assert [(e.key, e.returncode) for e in rest] == [("stubborn", -signal.SIGKILL)]
    assert not alive(pid)


def test_hurry_cuts_the_grace_short(tmp_path: Path) -> None:
    s = spec(tmp_path, "stubborn", ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"])
    with ProcessGroup([s]) as group:
        group.start()
        pump_until(group, lambda: any(r.text == "ready" for r in iter_log(s.log_path)))
        threading.Timer(0.2, group.hurry).start()  # a second Ctrl-C, while terminate() waits
        rest = group.terminate(grace=600)
        assert [(e.key, e.returncode) for e in rest] == [("stubborn", -signal.SIGKILL)]


GRANDCHILDREN = textwrap.dedent(
    """
    import os, subprocess, sys, time
    # One child in our process group, one in a new session as torchrun starts its workers.
    a = subprocess.Popen(["sleep", "300"])
    b = subprocess.Popen(["sleep", "300"], start_new_session=True)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {a.pid} {b.pid}")
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    if sys.argv[2] == "exit":
        sys.exit(0)
    time.sleep(300)
    """
)


def test_terminate_kills_grandchildren_inside_and_outside_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    specs = [
        spec(tmp_path, "py", [PY, "-c", GRANDCHILDREN, str(pidfile), "stay"]),
        spec(tmp_path, "sh", ["sh", "-c", f"sleep 300 & echo $! > {tmp_path}/shpid; wait"]),
    ]
    with ProcessGroup(specs) as group:
        group.start()
        pump_until(group, lambda: len(read_pids(pidfile)) == 3 and len(read_pids(tmp_path / "shpid")) == 1)
        pids = read_pids(pidfile) + read_pids(tmp_path / "shpid")
        assert all(alive(p) for p in pids)
        group.terminate(grace=5)
        # terminate() waits for every tagged process to be gone: no polling needed.
        assert [p for p in pids if alive(p)] == []
        assert tagged_processes(group.token) == []


def test_a_replica_exit_takes_its_leftover_children_with_it(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    specs = [
        spec(tmp_path, "leaves-children", [PY, "-c", GRANDCHILDREN, str(pidfile), "exit"]),
        spec(tmp_path, "other", ["sleep", "300"]),
    ]
    with ProcessGroup(specs) as group:
        group.start()
        events = group.wait_exit(timeout=30)
        assert [(e.key, e.returncode) for e in events] == [("leaves-children", 0)]
        children = read_pids(pidfile)[1:]
        assert len(children) == 2
        # SIGKILLed when the leader exit was handled; dying is asynchronous.
        assert wait_until(lambda: not any(alive(p) for p in children))
        assert group.running() == {"other"}


SUPERVISOR = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from pathlib import Path
    from kubetrain.backends.local.processes import LaunchSpec, ProcessGroup

    # Ctrl-C as in a terminal, even if this test runs where SIGINT is ignored (a background job).
    signal.signal(signal.SIGINT, signal.default_int_handler)

    out = Path(sys.argv[1])
    code = sys.argv[2]
    tmp = out.parent
    specs = [
        LaunchSpec("sleeper", ["sleep", "300"], dict(os.environ), None, tmp / "sleeper.log"),
        LaunchSpec("py", [sys.executable, "-c", code, str(tmp / "pypids"), "stay"], dict(os.environ),
                   None, tmp / "py.log"),
        LaunchSpec("sh", ["sh", "-c", f"sleep 300 & echo $! > {tmp}/shpid; wait"], dict(os.environ),
                   None, tmp / "sh.log"),
    ]
    with ProcessGroup(specs) as group:
        started = group.start()
        info = {"replicas": {k: list(v) for k, v in started.items()}, "watchdog": group._watchdog.pid,
                "token": group.token}
        (tmp / "info.tmp").write_text(json.dumps(info))
        os.rename(tmp / "info.tmp", out)
        while True:
            group.wait_exit(None)
    """
)


def _run_supervisor(tmp_path: Path) -> tuple[subprocess.Popen[bytes], dict[str, object], list[int]]:
    script = tmp_path / "supervisor.py"
    script.write_text(SUPERVISOR)
    info_path = tmp_path / "info.json"
    sup = subprocess.Popen([PY, str(script), str(info_path), GRANDCHILDREN])
    assert wait_until(
        lambda: (
            info_path.exists() and len(read_pids(tmp_path / "pypids")) == 3 and len(read_pids(tmp_path / "shpid")) == 1
        ),
        timeout=30,
    ), "supervisor did not start its replicas"
    info = json.loads(info_path.read_text())
    pids = [p for p, _ in info["replicas"].values()]
    pids += read_pids(tmp_path / "pypids")[1:] + read_pids(tmp_path / "shpid")
    assert len(pids) == 6 and all(alive(p) for p in pids)
    return sup, info, pids


def test_sigkill_of_the_supervisor_leaves_no_process(tmp_path: Path) -> None:
    sup, info, pids = _run_supervisor(tmp_path)
    os.kill(sup.pid, signal.SIGKILL)
    sup.wait()
    assert wait_until(lambda: not any(alive(p) for p in pids), timeout=10), [p for p in pids if alive(p)]
    watchdog = info["watchdog"]
    assert isinstance(watchdog, int)
    assert wait_until(lambda: not alive(watchdog), timeout=10)


def test_ctrl_c_of_the_supervisor_leaves_no_process(tmp_path: Path) -> None:
    # KeyboardInterrupt out of wait_exit(); leaving the `with` block closes the group.
    sup, info, pids = _run_supervisor(tmp_path)
    os.kill(sup.pid, signal.SIGINT)
    assert sup.wait(timeout=30) != 0
    # close() returned only after every process was gone: no waiting needed.
    assert [p for p in pids if alive(p)] == []
    watchdog = info["watchdog"]
    assert isinstance(watchdog, int)
    assert wait_until(lambda: not alive(watchdog), timeout=10)


def test_replica_leaders_die_with_the_supervisor_even_without_the_watchdog(tmp_path: Path) -> None:
    # PR_SET_PDEATHSIG comes through util-linux setpriv, part of every Debian system (util-linux is Essential).
    assert spawning.pdeathsig_prefix(), "setpriv with --pdeathsig is missing"
    sup, info, pids = _run_supervisor(tmp_path)
    leaders = [p for p, _ in info["replicas"].values()]  # type: ignore[attr-defined]
    watchdog = info["watchdog"]
    assert isinstance(watchdog, int)
    os.kill(watchdog, signal.SIGKILL)
    os.kill(sup.pid, signal.SIGKILL)
    sup.wait()
    try:
        assert wait_until(lambda: not any(alive(p) for p in leaders), timeout=10)
    finally:
        # Without the watchdog, only the leaders are covered; clean up the rest.
        kill_tagged(str(info["token"]), wait=5)
    assert not any(alive(p) for p in pids)


def test_kill_tagged_finds_what_a_dead_supervisor_left(tmp_path: Path) -> None:
    # As `kubetrain cancel` from another shell would, with only the recorded token.
    s = spec(tmp_path, "w", ["sh", "-c", "sleep 300 & sleep 300"])
    group = ProcessGroup([s])
    try:
        pid = group.start()["w"][0]
        assert wait_until(lambda: len(tagged_processes(group.token)) == 3)
        victims = tagged_processes(group.token)
        assert pid in victims
        assert kill_tagged(group.token, wait=5) == 3
        assert not any(alive(p) for p in victims)
        assert [(e.key, e.returncode) for e in group.wait_exit(30)] == [("w", -signal.SIGKILL)]
    finally:
        group.close()


def test_kill_recorded_checks_the_start_time(tmp_path: Path) -> None:
    with ProcessGroup([spec(tmp_path, "w", ["sleep", "300"])]) as group:
        pid, start = group.start()["w"]
        assert proc_start_time(pid) == start
        assert kill_recorded(pid, start + 1, signal.SIGKILL) is False  # a "reused" pid: untouched
        assert alive(pid)
        assert kill_recorded(pid, start, signal.SIGKILL) is True
        assert [(e.key, e.returncode) for e in group.wait_exit(30)] == [("w", -signal.SIGKILL)]
    assert kill_recorded(pid, start, signal.SIGKILL) is False


def test_proc_start_time() -> None:
    me = proc_start_time(os.getpid())
    assert isinstance(me, int) and me > 0
    assert proc_start_time(2**22 + 12345) is None


def test_wake_returns_a_blocked_wait_from_another_thread(tmp_path: Path) -> None:
    with ProcessGroup([spec(tmp_path, "w", ["sleep", "300"])]) as group:
        group.start()
        threading.Timer(0.2, group.wake).start()
        assert group.wait_exit(timeout=60) == []
        group.wake()  # before waiting: the next wait returns at once
        assert group.wait_exit(timeout=60) == []
        assert group.wait_exit(timeout=0) == []  # consumed
        assert group.running() == {"w"}


def test_wake_from_a_signal_handler(tmp_path: Path) -> None:
    with ProcessGroup([spec(tmp_path, "w", ["sleep", "300"])]) as group:
        group.start()
        old = signal.signal(signal.SIGUSR1, lambda *_: group.wake())
        try:
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1)).start()
            assert group.wait_exit(timeout=60) == []
        finally:
            signal.signal(signal.SIGUSR1, old)


def test_restart_appends_to_the_same_logs(tmp_path: Path) -> None:
    s = spec(tmp_path, "w", ["sh", "-c", 'echo "attempt $ATTEMPT"; exit 1'])
    with ProcessGroup([s]) as group:
        for attempt in range(2):
            new = LaunchSpec(s.key, s.argv, {**s.env, "ATTEMPT": str(attempt)}, s.cwd, s.log_path)
            group.start([new])
            assert [e.returncode for e in pump_until(group, lambda: not group.running())] == [1]
            group.terminate()
    assert [r.text for r in iter_log(s.log_path)] == ["attempt 0", "attempt 1"]


def test_start_refuses_while_replicas_run(tmp_path: Path) -> None:
    with ProcessGroup([spec(tmp_path, "w", ["sleep", "300"])]) as group:
        group.start()
        with pytest.raises(RuntimeError, match="still running"):
            group.start()


def test_close_kills_what_still_runs(tmp_path: Path) -> None:
    group = ProcessGroup([spec(tmp_path, "w", ["sleep", "300"])])
    pid = group.start()["w"][0]
    group.close()
    group.close()
    assert not alive(pid)


# --------------------------------------------------------------------------- programs


def test_missing_program_is_an_exit_127_with_a_log_line(tmp_path: Path) -> None:
    specs = [spec(tmp_path, "bad", ["no-such-program-kt"]), spec(tmp_path, "ok", ["true"])]
    with ProcessGroup(specs) as group:
        started = group.start()
        assert set(started) == {"ok"}
        events = pump_until(group, lambda: not group.running())
    assert ("bad", 0, 127) in [(e.key, e.pid, e.returncode) for e in events]
    assert "kubetrain: program not found: no-such-program-kt" in [
        r.text.split(" (")[0] for r in iter_log(specs[0].log_path)
    ]


def test_programs_are_looked_up_in_the_childs_path(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    prog = bindir / "kt-hello"
    prog.write_text('#!/bin/sh\necho "hi from $0"\n')
    prog.chmod(0o755)
    (bindir / "kt-noexec").write_text("#!/bin/sh\n")
    env = {"PATH": f"{bindir}:/usr/bin:/bin"}
    assert find_program("kt-hello", env) == str(prog)
    with pytest.raises(FileNotFoundError):
        find_program("kt-hello", {"PATH": "/usr/bin:/bin"})
    with pytest.raises(PermissionError):
        find_program("kt-noexec", env)
    assert os.path.samefile(find_program("./bin/kt-hello", {}, str(tmp_path)), prog)

    s = LaunchSpec("w", ["kt-hello"], env, str(tmp_path), tmp_path / "w.log")
    bad = LaunchSpec("x", ["kt-noexec"], env, str(tmp_path), tmp_path / "x.log")
    with ProcessGroup([s, bad]) as group:
        group.start()
        events = pump_until(group, lambda: not group.running())
    assert sorted((e.key, e.returncode) for e in events) == [("w", 0), ("x", 126)]
    assert next(r.text for r in iter_log(s.log_path)).startswith("hi from ")


def test_tags_nest() -> None:
    assert add_tag(None, "a:1") == "a:1"
    assert add_tag("outer:3", "a:1") == "outer:3 a:1"


def test_spec_validation(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        LaunchSpec("w", [], {}, None, tmp_path / "x")
    with pytest.raises(ValueError):
        LaunchSpec("", ["true"], {}, None, tmp_path / "x")
    with pytest.raises(ValueError, match="duplicate"):
        ProcessGroup([spec(tmp_path, "a", ["true"]), spec(tmp_path, "a", ["true"])])


# --------------------------------------------------------------------------- log reader


T0 = 1_800_000_000 * 10**9  # a fixed wall-clock instant, in ns


def write_log(path: Path, records: list[tuple[int, str, str]]) -> None:
    w = LogWriter(path)
    for t, stream, text in records:
        w.add(t, stream, text.encode())
    w.close()


def test_iter_log_filters(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    recs = [(T0 + i * 10**9, "stderr" if i % 3 == 0 else "stdout", f"step {i} loss {i / 10}") for i in range(10)]
    write_log(log, recs)

    def steps(**filters: Any) -> list[int]:
        return [int(r.text.split()[1]) for r in iter_log(log, **filters)]

    def at(i: int) -> float:  # epoch seconds of record i
        return (T0 + i * 10**9) / 1e9

    assert [r.text for r in iter_log(log)] == [t for _, _, t in recs]
    assert [r.time_ns for r in iter_log(log)] == [t for t, _, _ in recs]
    assert [r.stream for r in iter_log(log)] == [s for _, s, _ in recs]
    assert steps(since=at(7)) == [7, 8, 9]
    assert steps(until=at(2)) == [0, 1]
    assert steps(since=at(3), until=at(5)) == [3, 4]
    assert steps(tail=2) == [8, 9]
    assert steps(tail=0) == []
    assert steps(grep=r"step [45]\b") == [4, 5]
    assert steps(grep=re.compile("LOSS 0.1", re.I)) == [1]
    assert steps(streams={"stderr"}) == [0, 3, 6, 9]
    # Filters combine; tail counts what passes the other filters.
    assert steps(streams=["stderr"], tail=2) == [6, 9]
    assert steps(since=at(5), grep="loss 0.[13579]", tail=10) == [5, 7, 9]
    assert list(iter_log(tmp_path / "missing.log")) == []


def test_iter_log_since_relative_and_on_a_large_file(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    now = time.time_ns()
    n = 20_000  # well over the reader's block size, so since/tail seek instead of scanning
    write_log(log, [(now - (n - i) * 10**8, "stdout", f"line {i} " + "x" * 40) for i in range(n)])
    assert log.stat().st_size > 10 * log_reader._BLOCK
    # Records 0.1 s apart: the last 5 minutes hold the last ~3000. "5 minutes ago" is taken when the reader
    # runs, so the count lies between what the clock just before and just after the call allow.
    stamps = [now - (n - i) * 10**8 for i in range(n)]
    before = time.time_ns()
    recent = list(iter_log(log, since=timedelta(minutes=5)))
    after = time.time_ns()
    window = 5 * 60 * 10**9
    assert sum(t >= after - window for t in stamps) <= len(recent) <= sum(t >= before - window for t in stamps)
    assert len(recent) > 2000
    assert recent[-1].text.startswith(f"line {n - 1} ")
    # Half-way between two records: a float of epoch seconds is only precise to a few hundred ns.
    texts = [r.text.split()[1] for r in iter_log(log, since=(now - 1000 * 10**8 - 5 * 10**7) / 1e9)]
    assert texts == [str(i) for i in range(n - 1000, n)]
    assert [r.text.split()[1] for r in iter_log(log, tail=3)] == [str(n - 3), str(n - 2), str(n - 1)]


def test_iter_log_from_an_offset_reads_what_was_appended_since(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    # Both parts over the reader's block size: tail and since seek within what follows the offset.
    n = m = 4000
    write_log(log, [(T0 + i * 10**6, "stdout", f"old {i} " + "x" * 40) for i in range(n)])
    offset = log.stat().st_size
    assert offset > 2 * log_reader._BLOCK
    assert list(iter_log(log, offset=offset)) == []
    write_log(log, [(T0 + (n + i) * 10**6, "stdout", f"new {i} " + "y" * 40) for i in range(m)])
    assert log.stat().st_size - offset > 2 * log_reader._BLOCK

    def steps(**kw: Any) -> list[str]:
        return [" ".join(r.text.split()[:2]) for r in iter_log(log, **kw)]

    assert steps(offset=offset) == [f"new {i}" for i in range(m)]
    assert steps(offset=offset, tail=m + 10) == [f"new {i}" for i in range(m)]
    assert steps(offset=offset, tail=2) == [f"new {m - 2}", f"new {m - 1}"]
    assert steps(offset=offset, since=T0 / 1e9) == [f"new {i}" for i in range(m)]
    halfway = (T0 + (n + 2999) * 10**6 + 5 * 10**5) / 1e9  # a float of epoch seconds is only precise to ~100 ns
    assert steps(offset=offset, since=halfway) == [f"new {i}" for i in range(3000, m)]
    assert steps(offset=offset - 3) == [f"new {i}" for i in range(m)]  # inside a record: from the next one
    # Shorter than the offset: truncated or replaced since, so all of it is new.
    log.unlink()
    write_log(log, [(T0, "stdout", "replaced")])
    assert steps(offset=offset) == ["replaced"]


def test_iter_log_skips_a_torn_last_record(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    write_log(log, [(T0, "stdout", "whole")])
    with open(log, "ab") as f:
        f.write(b"2027-01-15T08:00:00.000000000Z stdout F half-writ")
    assert [r.text for r in iter_log(log)] == ["whole"]
    assert [r.text for r in iter_log(log, tail=5)] == ["whole"]


def test_merge_logs_in_time_order(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    write_log(a, [(T0 + 1, "stdout", "a1"), (T0 + 4, "stdout", "a4")])
    write_log(b, [(T0 + 2, "stdout", "b2"), (T0 + 3, "stderr", "b3"), (T0 + 5, "stdout", "b5")])
    merged = list(merge_logs({"worker-0": a, "worker-1": b}))
    assert [(r.key, r.text) for r in merged] == [
        ("worker-0", "a1"),
        ("worker-1", "b2"),
        ("worker-1", "b3"),
        ("worker-0", "a4"),
        ("worker-1", "b5"),
    ]
    assert [r.text for r in merge_logs({"worker-0": a, "worker-1": b}, tail=1)] == ["a4", "b5"]


def test_follow_log_merges_history_and_new_records(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    write_log(a, [(T0 + 1, "stdout", "old a")])
    # b does not exist yet: followed once it appears.
    done = threading.Event()

    def writer() -> None:
        wa, wb = LogWriter(a), LogWriter(b)
        for i in range(5):
            t = T0 + 10 + i * 2
            wb.add(t, "stdout", f"b{i}".encode())
            wa.add(t + 1, "stdout", f"a{i}".encode())
            # In time order: a round of the follower that saw a{i} but not yet b{i} would print them swapped.
            wb.flush()
            wa.flush()
            time.sleep(0.05)
        wa.close()
        wb.close()
        done.set()

    threading.Thread(target=writer).start()
    got = list(follow_log({"worker-0": a, "worker-1": b}, done.is_set, poll_interval=0.02))
    assert [r.text for r in got] == ["old a"] + [x for i in range(5) for x in (f"b{i}", f"a{i}")]
    assert [r.key for r in got][:3] == ["worker-0", "worker-1", "worker-0"]
    assert all(isinstance(r, LogRecord) for r in got)


def test_follow_log_tail_and_grep(tmp_path: Path) -> None:
    a = tmp_path / "a.log"
    write_log(a, [(T0 + i, "stdout", f"old {i}") for i in range(5)])
    stop = threading.Event()
    it = follow_log({"w": a}, stop.is_set, tail=2, grep="new|old", poll_interval=0.02)
    assert [next(it).text, next(it).text] == ["old 3", "old 4"]
    write_log(a, [(T0 + 10, "stdout", "new 1"), (T0 + 11, "stdout", "skipped")])
    stop.set()
    assert [r.text for r in it] == ["new 1"]


def test_live_output_and_log_agree_for_replicas_writing_concurrently(
    tmp_path: Path, sink_io: tuple[OutputSink, io.StringIO, io.StringIO]
) -> None:
    sink, out, _ = sink_io
    code = "import sys\nfor i in range(2000): print(f'{sys.argv[1]} line {i}')"
    specs = [spec(tmp_path, f"w{i}", [PY, "-c", code, f"w{i}"]) for i in range(3)]
    with ProcessGroup(specs, sink=sink) as group:
        group.start()
        pump_until(group, lambda: not group.running())
        group.terminate()
    lines = out.getvalue().splitlines()
    assert len(lines) == 6000
    for i in range(3):
        mine = [line for line in lines if line.startswith(f"[w{i}]")]
        assert mine == [f"[w{i}] w{i} line {n}" for n in range(2000)]  # whole lines, in order
    merged = list(merge_logs({s.key: s.log_path for s in specs}))
    assert len(merged) == 6000
    assert [r.time_ns for r in merged] == sorted(r.time_ns for r in merged)
