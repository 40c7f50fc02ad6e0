"""`kubetrain.run` as a Python program calls it: Ctrl-C cancels the job and then interrupts the caller;
replicas' output is shown on a terminal, redirected with `sink=`, silenced with `quiet=True`."""

from __future__ import annotations

import errno
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kubetrain
from kubetrain.terminal import OutputSink
from tests.support.helpers import TICK, generic, job_file, write

pytestmark = pytest.mark.timeout(120)

CALLER = """\
import sys
import kubetrain

job = kubetrain.load(sys.argv[1])
quiet = sys.argv[2] == "quiet"
for attempt in range(3):  # a sweep: Ctrl-C must stop all of it, not only the running job
    try:
        result = kubetrain.run(job, quiet=quiet)
    except KeyboardInterrupt:
        with kubetrain.open_backend("local") as backend:
            print("INTERRUPTED", backend.list()[0].phase.value, flush=True)
        sys.exit(7)
    print("RETURNED", result.status.phase.value, flush=True)
"""


def tick_job(tmp_path: Path, count: int, pause: float) -> Path:
    write(tmp_path / "tick.py", TICK)
    return job_file(tmp_path, generic(["tick.py", str(count), str(pause)], replicas=1))


def test_ctrl_c_cancels_the_job_then_raises(tmp_path: Path, kubetrain_home: Path) -> None:
    spec = tick_job(tmp_path, 2000, 0.05)
    write(tmp_path / "caller.py", CALLER)
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "caller.py"), str(spec), "quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        deadline = time.monotonic() + 60
        while not any("tick" in p.read_text() for p in kubetrain_home.glob("logs/*/worker-0.log")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 7, (out, err)
    assert "INTERRUPTED Cancelled" in out
    assert "RETURNED" not in out


def run_on_a_pty(tmp_path: Path, script: str, *args: str) -> str:
    """`python script args` with a pseudo-terminal as its stdout and stderr; what it printed."""
    main, secondary = os.openpty()
    write(tmp_path / "script.py", script)
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "script.py"), *args],
        stdin=subprocess.DEVNULL,
        stdout=secondary,
        stderr=secondary,
        cwd=Path(__file__).resolve().parents[1],
    )
    os.close(secondary)
    chunks: list[bytes] = []
    try:
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError as exc:
                if exc.errno == errno.EIO:  # the other side closed
                    break
                raise
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(main)
        proc.wait(timeout=60)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode(errors="replace")


RUN_ONCE = """\
import sys
import kubetrain

result = kubetrain.run(kubetrain.load(sys.argv[1]), quiet=sys.argv[2] == "quiet")
print("PHASE", result.status.phase.value, flush=True)
"""


def test_output_is_shown_on_a_terminal(tmp_path: Path) -> None:
    spec = tick_job(tmp_path, 3, 0)
    shown = run_on_a_pty(tmp_path, RUN_ONCE, str(spec), "loud")
    assert "tick 2 worker-0" in shown and "[worker-0]" in shown
    assert "PHASE Succeeded" in shown


def test_quiet_shows_no_output(tmp_path: Path) -> None:
    spec = tick_job(tmp_path, 3, 0)
    shown = run_on_a_pty(tmp_path, RUN_ONCE, str(spec), "quiet")
    assert "tick" not in shown
    assert "PHASE Succeeded" in shown


def test_no_terminal_no_output(tmp_path: Path) -> None:
    spec = tick_job(tmp_path, 3, 0)
    write(tmp_path / "script.py", RUN_ONCE)
    result = subprocess.run(
        [sys.executable, str(tmp_path / "script.py"), str(spec), "loud"],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert result.returncode == 0, result.stderr
    assert "tick" not in result.stdout and "tick" not in result.stderr
    assert "PHASE Succeeded" in result.stdout


def test_sink_receives_the_output(tmp_path: Path) -> None:
    spec = tick_job(tmp_path, 3, 0)
    out, err = io.StringIO(), io.StringIO()
    result = kubetrain.run(kubetrain.load(str(spec)), sink=OutputSink(out, err, color=False))
    assert result.status is not None and result.status.phase.value == "Succeeded"
    assert [line.split(maxsplit=1)[1] for line in out.getvalue().splitlines()] == [
        "tick 0 worker-0",
        "tick 1 worker-0",
        "tick 2 worker-0",
    ]
    assert "error-line from worker-0" in err.getvalue()


def test_docstring_says_where_output_goes() -> None:
    doc = kubetrain.run.__doc__ or ""
    assert "terminal" in doc and "quiet" in doc and "KeyboardInterrupt" in doc
