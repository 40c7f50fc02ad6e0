"""Replicas forked from a preloading server: they must behave as `python SCRIPT` started afresh would.

Every test compares against what a user relies on from a plain interpreter (argv, __main__, sys.path,
exit codes, tracebacks, atexit, output) and checks that no process is left behind. The preloaded
module is the standard library's `decimal` (not imported by a bare interpreter) where the module does
not matter; the real DDP jobs in tests/local/test_frameworks.py run forked from a server holding torch.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from kubetrain.backends.local._watchdog import TAG_VAR, kill_tagged
from kubetrain.backends.local.preload import common_env, fork_target, is_python
from kubetrain.backends.local.processes import ExitEvent, LaunchSpec, ProcessGroup
from kubetrain.backends.logfiles.reader import iter_log
from kubetrain.status import JobPhase
from tests.local.test_processes import wait_until
from tests.support.helpers import alive, cli, log_lines, no_process_left_behind, wait_phase  # noqa: F401 (an autouse fixture)

PY = sys.executable
PRELOAD = ("decimal",)

PROBE = """\
import sys
preloaded = "decimal" in sys.modules  # before this script imports anything of its own
import json, os
print(json.dumps({
    "preloaded": preloaded,
    "argv": sys.argv,
    "file": __file__,
    "name": __name__,
    "main_is_this": sys.modules["__main__"].__dict__ is globals(),
    "path0": sys.path[0],
    "cwd": os.getcwd(),
    "rank": os.environ.get("RANK"),
    "tagged": TAG in os.environ,
    "leader": os.getpgrp() == os.getpid() == os.getsid(0),
    "stdin": os.readlink("/proc/self/fd/0"),
    "ppid": os.getppid(),
    "builtins": __builtins__ is __import__("builtins") or __builtins__ is __import__("builtins").__dict__,
}))
""".replace("TAG", repr(TAG_VAR))


def specs(
    tmp_path: Path, argv: list[str], n: int = 2, preload: tuple[str, ...] = PRELOAD, **env: str
) -> list[LaunchSpec]:
    return [
        LaunchSpec(
            f"w-{i}",
            argv,
            {**os.environ, "RANK": str(i), **env},
            str(tmp_path),
            tmp_path / "logs" / f"w-{i}.log",
            preload,
        )
        for i in range(n)
    ]


def run_all(group: ProcessGroup, timeout: float = 60) -> dict[str, int]:
    """Start the group and pump it until every replica has exited; key -> return code."""
    group.start()
    return run_all_started(group, timeout)


def run_all_started(group: ProcessGroup, timeout: float = 60) -> dict[str, int]:
    codes: dict[str, int] = {}
    while group.running():
        events: list[ExitEvent] = group.wait_exit(timeout)
        assert events, "timed out"
        codes.update((e.key, e.returncode) for e in events)
    codes.update((e.key, e.returncode) for e in group.wait_exit(0))
    return codes


def lines(path: Path, stream: str | None = None) -> list[str]:
    return [r.text for r in iter_log(path) if stream is None or r.stream == stream]


def probe(tmp_path: Path, preload: tuple[str, ...]) -> list[dict[str, Any]]:
    script = tmp_path / "sub" / "probe.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(PROBE)
    group_specs = specs(tmp_path, [PY, "sub/probe.py", "--flag", "010"], preload=preload)
    with ProcessGroup(group_specs) as group:
        assert run_all(group) == {"w-0": 0, "w-1": 0}
        server = group._forks.server.pid if group._forks.server else None
    out = [json.loads(lines(s.log_path, "stdout")[0]) for s in group_specs]
    if preload:
        assert {o["ppid"] for o in out} == {server}
    return out


def test_a_forked_replica_sees_what_a_fresh_interpreter_would(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    forked = probe(tmp_path / "a", PRELOAD)
    fresh = probe(tmp_path / "b", ())
    assert [o.pop("preloaded") for o in forked] == [True, True]
    assert [o.pop("preloaded") for o in fresh] == [False, False]
    for o in forked + fresh:
        o.pop("ppid")
    assert [{**o, "cwd": "", "file": "", "path0": ""} for o in forked] == [
        {**o, "cwd": "", "file": "", "path0": ""} for o in fresh
    ]
    first = forked[0]
    assert first["argv"] == ["sub/probe.py", "--flag", "010"]
    assert first["cwd"] == str(tmp_path / "a")
    assert first["file"] == str(tmp_path / "a" / "sub" / "probe.py")
    assert first["path0"] == str(tmp_path / "a" / "sub")
    assert fresh[0]["path0"] == str(tmp_path / "b" / "sub")
    assert first["name"] == "__main__" and first["main_is_this"] and first["leader"] and first["tagged"]
    assert first["stdin"] == "/dev/null"
    assert [o["rank"] for o in forked] == ["0", "1"]


def test_python_dash_m_runs_the_module_as_main(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "job.py").write_text(PROBE)
    group_specs = specs(tmp_path, [PY, "-m", "pkg.job", "x"], n=1)
    with ProcessGroup(group_specs) as group:
        assert run_all(group) == {"w-0": 0}
        assert group._forks.server is not None
    out = json.loads(lines(group_specs[0].log_path, "stdout")[0])
    assert out["preloaded"] is True
    assert out["argv"] == [str(tmp_path / "pkg" / "job.py"), "x"]
    assert out["name"] == "__main__" and out["main_is_this"]
    assert out["path0"] == str(tmp_path)


@pytest.mark.parametrize(
    ("body", "code", "stderr_has"),
    [
        ("import sys; sys.exit(3)", 3, None),
        ("import sys; sys.exit(None)", 0, None),
        ("import sys; sys.exit('bad config')", 1, "bad config"),
        ("raise ValueError('boom')", 1, "ValueError: boom"),
        ("import os; os._exit(5)", 5, None),
        ("raise KeyboardInterrupt", -signal.SIGINT, "KeyboardInterrupt"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -signal.SIGKILL, None),
    ],
)
def test_exit_status_is_what_python_gives(tmp_path: Path, body: str, code: int, stderr_has: str | None) -> None:
    (tmp_path / "job.py").write_text(body + "\n")
    for preload in (PRELOAD, ()):
        group_specs = specs(tmp_path, [PY, "job.py"], n=1, preload=preload)
        with ProcessGroup(group_specs) as group:
            assert run_all(group) == {"w-0": code}, preload
        err = "\n".join(lines(group_specs[0].log_path, "stderr"))
        if stderr_has:
            assert stderr_has in err
        group_specs[0].log_path.unlink()


def test_a_traceback_starts_in_the_users_program(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text("def f():\n    raise RuntimeError('in f')\n\nf()\n")
    group_specs = specs(tmp_path, [PY, "job.py"], n=1)
    with ProcessGroup(group_specs) as group:
        assert run_all(group) == {"w-0": 1}
    err = lines(group_specs[0].log_path, "stderr")
    assert err[0] == "Traceback (most recent call last):"
    assert err[1] == f'  File "{tmp_path / "job.py"}", line 4, in <module>'
    assert err[-1] == "RuntimeError: in f"
    assert not any("_preload_server" in line for line in err)


def test_exit_waits_for_threads_runs_atexit_and_flushes_open_files(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(
        textwrap.dedent(
            """
            import atexit, sys, threading, time
            log = open("unclosed.txt", "w")  # never closed: Python's exit flushes it
            log.write("kept\\n")

            class Noisy:
                def __del__(self):
                    print("finalised", flush=True)

            keep = Noisy()
            atexit.register(lambda: print("atexit ran", flush=True))
            threading.Thread(target=lambda: (time.sleep(0.2), print("thread done", flush=True))).start()
            sys.stdout.write("no newline, not flushed")
            """
        )
    )
    group_specs = specs(tmp_path, [PY, "job.py"], n=1)
    with ProcessGroup(group_specs) as group:
        assert run_all(group) == {"w-0": 0}
        assert group._forks.server is not None
    out = "\n".join(lines(group_specs[0].log_path, "stdout"))
    assert out.index("thread done") < out.index("atexit ran") < out.index("finalised")
    assert "no newline, not flushed" in out
    assert (tmp_path / "unclosed.txt").read_text() == "kept\n"


def test_what_the_preload_printed_reaches_every_replica(tmp_path: Path) -> None:
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "noisy.py").write_text("import sys\nprint('noisy says hello', file=sys.stderr)\n")
    (tmp_path / "job.py").write_text("import noisy\nprint('job ran')\n")
    group_specs = specs(tmp_path, [PY, "job.py"], preload=("noisy",), PYTHONPATH=str(tmp_path / "mods"))
    with ProcessGroup(group_specs) as group:
        assert run_all(group) == {"w-0": 0, "w-1": 0}
        assert group._forks.server is not None
    for s in group_specs:
        assert lines(s.log_path, "stderr") == ["noisy says hello"]
        assert lines(s.log_path, "stdout") == ["job ran"]


def test_a_failing_preload_falls_back_to_ordinary_replicas(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(PROBE)
    group_specs = specs(tmp_path, [PY, "job.py"], preload=("no_such_module_kubetrain",))
    with ProcessGroup(group_specs) as group:
        assert run_all(group) == {"w-0": 0, "w-1": 0}
        assert group._forks.server is None
        assert group.preload_note and "no_such_module_kubetrain" in group.preload_note
    out = json.loads(lines(group_specs[0].log_path, "stdout")[0])
    assert out["ppid"] == os.getpid()


def test_restarts_reuse_the_server_and_terminate_spares_it(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text("import os, time\nprint(os.getppid(), flush=True)\ntime.sleep(300)\n")
    group_specs = specs(tmp_path, [PY, "job.py"])
    with ProcessGroup(group_specs) as group:
        for attempt in range(2):
            started = group.start()
            assert group._forks.server is not None
            server = group._forks.server.pid
            # Each replica says who forked it before it is stopped (stopped at once, it may not have yet).
            deadline = time.monotonic() + 60
            while sum(len(lines(s.log_path, "stdout")) for s in group_specs) < 2 * (attempt + 1):
                assert time.monotonic() < deadline, "the replicas never printed their parent"
                assert group.wait_exit(timeout=0.1) == []
            events = group.terminate(grace=5)
            assert sorted((e.key, e.returncode) for e in events) == [("w-0", -15), ("w-1", -15)]
            assert not any(alive(pid) for pid, _ in started.values())
            assert alive(server)
    assert not alive(server)
    parents = {int(line) for s in group_specs for line in lines(s.log_path, "stdout")}
    assert parents == {server}


def test_no_server_when_the_replicas_cannot_share_one(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text("print('ok')\n")
    cases = [
        (specs(tmp_path, [PY, "-u", "job.py"]), "python SCRIPT"),
        (specs(tmp_path, ["sh", "-c", "true"]), "python SCRIPT"),
        (
            [LaunchSpec(f"w-{i}", [PY, "job.py"], {**os.environ, "PYTHONHASHSEED": str(i)}, str(tmp_path),
                        tmp_path / f"w{i}.log", PRELOAD) for i in range(2)],
            "start-up variables",
        ),
    ]
    for group_specs, why in cases:
        with ProcessGroup(group_specs) as group:
            assert set(run_all(group).values()) == {0}
            assert group._forks.server is None
            assert group.preload_note and why in group.preload_note


SUPERVISOR = """
import json, os, sys
from pathlib import Path
from kubetrain.backends.local.processes import LaunchSpec, ProcessGroup

tmp = Path(sys.argv[1])
specs = [LaunchSpec(f"w-{i}", [sys.executable, "job.py"], dict(os.environ), str(tmp), tmp / f"w{i}.log", ("decimal",))
         for i in range(2)]
with ProcessGroup(specs) as group:
    started = group.start()
    info = {"replicas": [p for p, _ in started.values()], "server": group._forks.server.pid,
            "watchdog": group._watchdog.pid, "token": group.token}
    (tmp / "info.tmp").write_text(json.dumps(info))
    os.rename(tmp / "info.tmp", tmp / "info.json")
    group.wait_exit(None)
"""

FORKING_JOB = """\
import os, time
child = os.fork()
if child == 0:
    time.sleep(300)
    os._exit(0)
with open(f"child-{os.getpid()}.tmp", "w") as f:
    f.write(str(child))
os.rename(f"child-{os.getpid()}.tmp", f"child-{os.getpid()}")
time.sleep(300)
"""


@pytest.mark.parametrize("kill_watchdog_too", [False, True])
def test_sigkill_of_the_supervisor_takes_server_and_replicas(tmp_path: Path, kill_watchdog_too: bool) -> None:
    (tmp_path / "job.py").write_text(FORKING_JOB)
    sup = subprocess.Popen([PY, "-c", SUPERVISOR, str(tmp_path)])
    info_path = tmp_path / "info.json"
    assert wait_until(lambda: info_path.exists() and len(list(tmp_path.glob("child-*[0-9]"))) == 2, timeout=60)
    info = json.loads(info_path.read_text())
    children = [int(p.read_text()) for p in tmp_path.glob("child-*[0-9]")]
    procs = [info["server"], *info["replicas"]]
    assert all(alive(p) for p in procs + children)
    if kill_watchdog_too:
        os.kill(info["watchdog"], signal.SIGKILL)
    os.kill(sup.pid, signal.SIGKILL)
    sup.wait()
    assert wait_until(lambda: not any(alive(p) for p in procs), timeout=10), [p for p in procs if alive(p)]
    if kill_watchdog_too:
        # PR_SET_PDEATHSIG covers the server and the replica leaders only; what the replicas forked may
        # be left (unless the server saw the supervisor go first) for the sweep `kubetrain cancel` does
        # after a lost supervisor, as with ordinary replicas.
        kill_tagged(info["token"], wait=5)
    assert wait_until(lambda: not any(alive(p) for p in children), timeout=10)


def test_fork_target_and_interpreter_names(tmp_path: Path) -> None:
    import zipfile

    (tmp_path / "train.py").write_text("pass\n")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__main__.py").write_text("pass\n")
    with zipfile.ZipFile(tmp_path / "app.pyz", "w") as z:
        z.writestr("__main__.py", "pass\n")
    cwd = str(tmp_path)
    assert fork_target(["python", "train.py", "-x"], cwd) == ["train.py", "-x"]
    assert fork_target(["python", "-m", "pkg.mod", "a"], cwd) == ["-m", "pkg.mod", "a"]
    not_forkable = (
        ["python"], ["python", "-u", "train.py"], ["python", "-c", "pass"], ["python", "-m"], ["python", ""],
        ["python", "app"], ["python", "app.pyz"], ["python", "missing.py"], ["python", "x.pyc"],
    )
    for argv in not_forkable:
        assert fork_target(argv, cwd) is None, argv
    assert all(is_python(p) for p in ("/usr/bin/python3", "/v/bin/python", "python3.11"))
    assert not any(is_python(p) for p in ("/usr/bin/pythonista", "/bin/sh", "/usr/bin/ipython"))


def test_common_env() -> None:
    a = {"A": "1", "B": "2", TAG_VAR: "x", "PYTHONPATH": "/p"}
    b = {"A": "1", "B": "3", TAG_VAR: "y", "PYTHONPATH": "/p"}
    assert common_env([a, b], skip=TAG_VAR) == {"A": "1", "PYTHONPATH": "/p"}
    assert common_env([a, {**b, "PYTHONPATH": "/q"}], skip=TAG_VAR) is None
    assert common_env([a, {k: v for k, v in b.items() if k != "PYTHONPATH"}], skip=TAG_VAR) is None


# --------------------------------------------------------------------------- through the CLI

TORCH_PROBE = """\
import sys
print("torch preloaded:", "torch" in sys.modules, flush=True)
"""


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], "True"),  # pytorch jobs preload torch by default
        (["--preload", "none"], "False"),
        (["--preload", "decimal"], "False"),
    ],
)
def test_pytorch_jobs_preload_torch_unless_told_otherwise(tmp_path: Path, flags: list[str], expected: str) -> None:
    (tmp_path / "probe.py").write_text(TORCH_PROBE)
    result = cli("run", "-q", *flags, "--framework", "pytorch", "--replicas", "2", "--", "python", "probe.py",
                 cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(f"torch preloaded: {expected}") == 2, result.stdout


def test_other_frameworks_do_not_preload_and_bad_module_names_are_refused(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(TORCH_PROBE)
    result = cli("run", "-q", "--framework", "generic", "--", "python", "probe.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "torch preloaded: False" in result.stdout
    result = cli("run", "--preload", "torch;rm", "--", "python", "probe.py", cwd=tmp_path)
    assert result.returncode == 2
    assert "--preload: 'torch;rm' is not a module name" in result.stderr


def test_a_resumed_job_keeps_its_preload(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text("import sys\nprint('decimal preloaded:', 'decimal' in sys.modules)\n")
    job = tmp_path / "job.yaml"
    job.write_text(
        "apiVersion: kubetrain.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: p}\n"
        "spec: {framework: generic, replicas: 2, runMode: Pause, run: {python: [probe.py]}}\n"
    )
    created = cli("run", "--preload", "decimal", job)
    assert created.returncode == 0, created.stderr
    job_id = created.stdout.strip().splitlines()[-1]
    resumed = cli("resume", job_id)
    assert resumed.returncode == 0, resumed.stderr
    wait_phase(job_id, JobPhase.SUCCEEDED)
    lines_ = [line for lines_of in log_lines(job_id).values() for line in lines_of]
    assert lines_.count("decimal preloaded: True") == 2, lines_


# --------------------------------------------------------------------------- what a training script notices

MP_SPAWN = """\
import multiprocessing as mp
from dataclasses import dataclass

@dataclass
class Point:
    x: int

def make(x):
    return Point(x)

if __name__ == "__main__":
    with mp.get_context("spawn").Pool(1) as pool:
        print(pool.map_async(make, [3, 4]).get(timeout=60))
"""


def test_spawned_multiprocessing_children_find_the_scripts_classes(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(MP_SPAWN)
    group_specs = specs(tmp_path, [PY, "job.py"], n=1, preload=("multiprocessing", "decimal"))
    with ProcessGroup(group_specs) as group:
        assert run_all(group, timeout=120) == {"w-0": 0}, lines(group_specs[0].log_path)
        assert group._forks.server is not None
    assert lines(group_specs[0].log_path, "stdout") == ["[Point(x=3), Point(x=4)]"]


def test_every_replica_gets_its_own_random_state(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(
        "import json, multiprocessing, random, torch\n"
        "print(json.dumps([torch.initial_seed(), random.random(), multiprocessing.current_process().authkey.hex()]))\n"
    )
    group_specs = specs(tmp_path, [PY, "job.py"], preload=("torch", "multiprocessing"))
    with ProcessGroup(group_specs) as group:
        assert run_all(group, timeout=120) == {"w-0": 0, "w-1": 0}
        assert group._forks.server is not None
    a, b = (json.loads(lines(s.log_path, "stdout")[0]) for s in group_specs)
    assert all(x != y for x, y in zip(a, b, strict=True)), (a, b)


def test_files_held_by_the_scripts_modules_are_flushed_and_daemon_threads_see_no_cleared_module(
    tmp_path: Path,
) -> None:
    (tmp_path / "metrics.py").write_text('out = open("metrics.txt", "w")\nout.write("loss 0.1\\n")\n')
    (tmp_path / "job.py").write_text(
        textwrap.dedent(
            """
            import atexit, math, threading, time
            import metrics

            def spin():
                while True:  # busy: it runs while the program ends, as a daemon thread may
                    math.sqrt(2.0)

            threading.Thread(target=spin, daemon=True).start()
            big = open("big.txt", "w", buffering=1 << 22)  # its flush at exit takes a while: the thread runs on
            big.write("x" * (1 << 21))
            time.sleep(0.05)

            def broken():
                raise ValueError("handler broke")

            atexit.register(broken)
            """
        )
    )
    group_specs = specs(tmp_path, [PY, "job.py"], n=1)
    with ProcessGroup(group_specs) as group:
        assert run_all(group) == {"w-0": 0}  # an atexit handler's error is reported, not an exit status
        assert group._forks.server is not None
    err = "\n".join(lines(group_specs[0].log_path, "stderr"))
    assert "ValueError: handler broke" in err
    assert "Exception in thread" not in err
    assert (tmp_path / "metrics.txt").read_text() == "loss 0.1\n"
    assert (tmp_path / "big.txt").stat().st_size == 1 << 21


def test_ps_shows_the_replicas_command_and_its_escaped_children_die_with_it(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(
        textwrap.dedent(
            """
            import os, sys, time
            child = os.fork()
            if child == 0:
                os.setsid()  # leaves the replica's group: only the tag sweep at its exit finds it
                time.sleep(300)
                os._exit(0)
            with open("child.tmp", "w") as f:
                f.write(str(child))
            os.rename("child.tmp", "child")
            while not os.path.exists("go"):
                time.sleep(0.01)
            """
        )
    )
    group_specs = specs(tmp_path, [PY, "job.py", "--steps", "20"], n=1)
    with ProcessGroup(group_specs) as group:
        pid = group.start()["w-0"][0]
        assert group._forks.server is not None
        assert wait_until(lambda: (tmp_path / "child").exists(), timeout=30)
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        assert cmdline == [PY.encode(), b"job.py", b"--steps", b"20"]
        child = int((tmp_path / "child").read_text())
        assert alive(child)
        (tmp_path / "go").touch()
        events = group.wait_exit(60)
        assert [(e.key, e.returncode) for e in events] == [("w-0", 0)]
        assert wait_until(lambda: not alive(child), timeout=10)
        assert group._forks.server is not None and alive(group._forks.server.pid)  # the sweep spared the server


def test_a_wake_while_preloading_starts_the_replicas_without_waiting(tmp_path: Path) -> None:
    import threading

    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "slow.py").write_text("import time\ntime.sleep(120)\n")
    (tmp_path / "job.py").write_text(PROBE.replace('"decimal"', '"slow"'))
    group_specs = specs(tmp_path, [PY, "job.py"], n=1, preload=("slow",), PYTHONPATH=str(tmp_path / "mods"))
    with ProcessGroup(group_specs) as group:
        threading.Timer(0.5, group.wake).start()
        started = group.start()  # a Ctrl-C during a long import must not wait for it
        assert list(started) == ["w-0"]
        assert group._forks.server is None
        assert group.wait_exit(60) == []  # the wake is still there for the caller
        assert run_all_started(group) == {"w-0": 0}
    assert json.loads(lines(group_specs[0].log_path, "stdout")[0])["preloaded"] is False


def test_a_dead_server_takes_its_replicas_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text("import time\nprint('up', flush=True)\ntime.sleep(300)\n")
    group_specs = specs(tmp_path, [PY, "job.py"])
    with ProcessGroup(group_specs) as group:
        started = group.start()
        assert group._forks.server is not None
        os.kill(group._forks.server.pid, signal.SIGKILL)
        codes = run_all_started(group)
        assert codes == {"w-0": -signal.SIGKILL, "w-1": -signal.SIGKILL}
        assert not any(alive(pid) for pid, _ in started.values())
        assert group.preload_note and "killed by signal 9" in group.preload_note
        # The next start goes the ordinary way rather than trusting a server that died.
        group.start()
        assert group._forks.server is None
        group.terminate(grace=5)
    for s in group_specs:
        assert any("exit status is lost" in line for line in lines(s.log_path, "stderr")), s.key


def test_replicas_with_different_omp_settings_do_not_share_a_server(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text("print('ok')\n")
    group_specs = [
        LaunchSpec(f"w-{i}", [PY, "job.py"], {**os.environ, "OMP_NUM_THREADS": str(i + 1)}, str(tmp_path),
                   tmp_path / f"w{i}.log", PRELOAD)
        for i in range(2)
    ]
    with ProcessGroup(group_specs) as group:
        assert set(run_all(group).values()) == {0}
        assert group._forks.server is None and group.preload_note and "OMP_" in group.preload_note


def test_describe_says_whether_the_replicas_were_forked_and_why_not(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(TORCH_PROBE)
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "broken.py").write_text("raise ImportError('broken on purpose')\n")
    env = {"PYTHONPATH": str(tmp_path / "mods")}
    for flags in (["--framework", "pytorch"], ["--preload", "broken"]):
        result = cli("run", "-q", *flags, "--", "python", "probe.py", cwd=tmp_path, env=env)
        assert result.returncode == 0, result.stderr
    newest_first = cli("list", "-o", "name").stdout.split()
    failed, forked = (cli("describe", job_id).stdout for job_id in newest_first)
    assert re.search(r"Preloaded +True +Forked .*replicas forked after importing torch", forked), forked
    assert re.search(r"Preloaded +False +NotPreloaded .*broken on purpose", failed), failed
