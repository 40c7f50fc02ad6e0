"""No process outlives its job, not even a daemon that leaves every group and session and clears its
environment (double fork, setsid, `execve` with an empty environment): the `kubetrain` command's supervisor
is the reaper of the job's orphans and sweeps them when the job ends, succeeded or cancelled."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest

from tests.support.helpers import (  # noqa: F401 (no_process_left_behind: an autouse fixture)
    alive,
    cli,
    generic,
    job_file,
    no_process_left_behind,
    wait_for,
    wait_gone,
    write,
)

pytestmark = pytest.mark.timeout(120)

DAEMON = """
import os, sys, time
pidfile, then = sys.argv[1], sys.argv[2]
middle = os.fork()
if middle == 0:
    os.setsid()
    daemon = os.fork()
    if daemon == 0:
        os.execve("/bin/sleep", ["sleep", "1000"], {})  # nothing of the job's environment left
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(daemon))
    os.rename(pidfile + ".tmp", pidfile)
    os._exit(0)
os.waitpid(middle, 0)
print("daemon started", flush=True)
if then == "stay":
    time.sleep(1000)
"""


def _daemon_job(tmp_path: Path, then: str) -> tuple[Path, Path]:
    write(tmp_path / "daemon.py", DAEMON)
    pidfile = tmp_path / "daemon.pid"
    return job_file(tmp_path, generic(["daemon.py", str(pidfile), then], replicas=1)), pidfile


def _kill(pidfile: Path) -> None:
    with contextlib.suppress(FileNotFoundError, ProcessLookupError, ValueError):
        os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_a_daemon_with_an_empty_environment_ends_with_its_succeeded_job(tmp_path: Path) -> None:
    spec, pidfile = _daemon_job(tmp_path, "exit")
    try:
        result = cli("run", spec)
        assert result.returncode == 0, result.stderr
        daemon = int(pidfile.read_text())
        wait_gone([daemon], timeout=30)
    finally:
        _kill(pidfile)


def test_a_daemon_with_an_empty_environment_ends_with_its_cancelled_job(tmp_path: Path) -> None:
    spec, pidfile = _daemon_job(tmp_path, "stay")
    try:
        started = cli("run", "--detach", spec)
        assert started.returncode == 0, started.stderr
        job_id = started.stdout.split()[-1]
        daemon = wait_for("the daemon's pid", lambda: int(pidfile.read_text()) if pidfile.exists() else None, 60)
        assert alive(daemon)
        cancelled = cli("cancel", job_id)
        assert cancelled.returncode == 0, cancelled.stderr
        wait_gone([daemon], timeout=30)
    finally:
        _kill(pidfile)
