"""`kubetrain logs -f` and `kubetrain metrics --watch` when the job they follow is deleted: both end alike,
exit 1 and say what deleted it (`kubetrain delete`, or the job's runPolicy.ttlSecondsAfterFinished), where
they said only "no job" (and a TTL sweep was not named at all).

Real processes: the followers are real `kubetrain` commands, stopped (SIGSTOP, waited for in /proc) while the
job is deleted and continued after, so that what they find on their next look is the deletion, never a
phase in between: no clock decides the outcome."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.backends.local.procfs import is_stopped
from tests.support.helpers import cli, make_job, no_process_left_behind, spawn_cli, wait_for  # noqa: F401

REPLICA = """
import sys
import kubetrain.metrics as m
m.log(step=0, loss=1.0)
print("ready", flush=True)
open(sys.argv[1]).read()
"""


def gated(tmp: Path, **spec: Any) -> tuple[str, Path]:
    """A running one-replica job that has printed a line and a metric and waits on a FIFO gate."""
    script, gate = tmp / "replica.py", tmp / "gate"
    script.write_text(REPLICA)
    os.mkfifo(gate)
    run = {"exec": [sys.executable, str(script), str(gate)]}
    job = make_job({"framework": "generic", "replicas": 1, "run": run, **spec})
    with LocalBackend() as backend:
        return backend.run(job, detach=True).job_id, gate


def following(*args: str) -> subprocess.Popen[str]:
    """A follower, once it has printed its first line (the job's line, or the metrics table's head)."""
    proc = spawn_cli(*args)
    assert proc.stdout is not None
    assert proc.stdout.readline(), proc.stderr.read() if proc.stderr else ""
    return proc


def pause(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGSTOP)
    wait_for(f"{proc.args} stopped", lambda: is_stopped(proc.pid))


def ended(proc: subprocess.Popen[str]) -> tuple[int, str]:
    os.kill(proc.pid, signal.SIGCONT)
    _out, err = proc.communicate(timeout=120)
    return proc.returncode, err


@contextlib.contextmanager
def followers(job_id: str) -> Iterator[list[subprocess.Popen[str]]]:
    """`logs -f` and `metrics --watch` of the job, stopped; killed at the end if a test failed first."""
    procs = [following("logs", "-f", job_id), following("metrics", job_id, "--watch")]
    try:
        for proc in procs:
            pause(proc)
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=30)


def test_a_delete_ends_both_followers_alike_saying_so(tmp_path: Path) -> None:
    job_id, _gate = gated(tmp_path)
    with followers(job_id) as procs:
        deleted = cli("delete", job_id)
        assert deleted.returncode == 0, deleted.stderr
        for proc in procs:
            code, err = ended(proc)
            assert code == 1, (proc.args, err)
            assert f"job {job_id} was deleted while it was followed (kubetrain delete" in err, (proc.args, err)
            assert "Traceback" not in err


def test_a_ttl_sweep_ends_the_followers_naming_the_ttl(tmp_path: Path) -> None:
    job_id, gate = gated(tmp_path, runPolicy={"ttlSecondsAfterFinished": 0})
    with followers(job_id) as procs:
        os.close(os.open(gate, os.O_WRONLY))  # the replica ends: the job succeeds, and is then swept
        wait_for("the job swept by its TTL", lambda: job_id not in cli("list").stdout)
        for proc in procs:
            code, err = ended(proc)
            assert code == 1, (proc.args, err)
            assert f"job {job_id} was deleted while it was followed" in err, (proc.args, err)
            assert "runPolicy.ttlSecondsAfterFinished (0 s)" in err, (proc.args, err)
