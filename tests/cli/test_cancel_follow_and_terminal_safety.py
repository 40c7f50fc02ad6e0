"""Smaller promises of the command line: cancel is idempotent, `logs -f` waits out a suspension, negative
counts are refused, replicas cannot drive the terminal, counts read as English."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.helpers import TICK, cli, generic, job_file, no_traceback, spawn_cli, write

pytestmark = pytest.mark.timeout(120)


def detached(tmp_path: Path, count: int, pause: float, replicas: int = 1) -> str:
    write(tmp_path / "tick.py", TICK)
    spec = job_file(tmp_path, generic(["tick.py", str(count), str(pause)], replicas=replicas))
    result = cli("run", "--detach", spec)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()[-1]


def test_cancel_of_an_ended_job_says_so_and_succeeds(tmp_path: Path) -> None:
    job_id = detached(tmp_path, 1000, 0.05)
    first = cli("cancel", job_id)
    assert first.returncode == 0, first.stderr
    again = cli("cancel", job_id)
    no_traceback(again)
    assert again.returncode == 0, again.stderr
    assert f"job {job_id} has already ended (cancelled)" in again.stdout


def test_cancel_of_a_succeeded_job(tmp_path: Path) -> None:
    write(tmp_path / "tick.py", TICK)
    spec = job_file(tmp_path, generic(["tick.py", "1", "0"], replicas=1))
    assert cli("run", spec).returncode == 0
    job_id = cli("list", "-o", "name").stdout.split()[0]
    result = cli("cancel", job_id)
    assert result.returncode == 0, result.stderr
    assert "has already ended (succeeded)" in result.stdout


def test_logs_follow_waits_while_suspended(tmp_path: Path) -> None:
    job_id = detached(tmp_path, 60, 0.05)
    suspended = cli("suspend", job_id)
    assert suspended.returncode == 0, suspended.stderr
    follower = spawn_cli("logs", "-f", job_id)
    try:
        time.sleep(2)
        assert follower.poll() is None, "logs -f returned while the job was only suspended"
        assert cli("resume", job_id).returncode == 0
        out, err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert follower.returncode == 0, err
    assert "suspended" in err
    assert "tick 59 worker-0" in out  # the output of the run after the resume, to its end


@pytest.mark.parametrize(
    "args", [("logs", "--tail", "-1", "JOB"), ("list", "--limit", "-1"), ("logs", "--tail=-3", "JOB")]
)
def test_negative_counts_are_usage_errors(tmp_path: Path, args: tuple[str, ...]) -> None:
    job_id = detached(tmp_path, 1, 0)
    result = cli(*[job_id if a == "JOB" else a for a in args])
    no_traceback(result)
    assert result.returncode == 2, result.stderr
    assert "negative" in result.stderr


NASTY = r"""
print("\x1b]0;pwned\x07\x1b]52;c;cHduZWQ=\x07hello \x1b[31mred\x1b[0m bell\x07 \x1b[2Jend", flush=True)
"""


def test_escape_sequences_do_not_reach_the_terminal(tmp_path: Path) -> None:
    write(tmp_path / "nasty.py", NASTY)
    spec = job_file(tmp_path, generic(["nasty.py"], replicas=1))
    run = cli("run", spec)
    assert run.returncode == 0, run.stderr
    assert "\x1b" not in run.stdout and "\x07" not in run.stdout
    assert "hello red bell\\x07 end" in run.stdout
    job_id = cli("list", "-o", "name").stdout.split()[0]
    for extra in ((), ("--no-prefix",)):
        logs = cli("logs", job_id, *extra)
        assert logs.returncode == 0, logs.stderr
        assert "\x1b" not in logs.stdout and "\x07" not in logs.stdout
        assert "hello red bell\\x07 end" in logs.stdout
    raw = cli("logs", job_id, "--raw")
    assert "\x1b[31mred\x1b[0m bell\x07" in raw.stdout
    raw_run = cli("run", "--raw", spec)
    assert "\x1b]0;pwned\x07" in raw_run.stdout


def test_one_replica_is_singular(tmp_path: Path) -> None:
    write(tmp_path / "tick.py", TICK)
    one = cli("validate", job_file(tmp_path, generic(["tick.py", "1", "0"], replicas=1)))
    assert one.returncode == 0, one.stderr
    assert "1 replica:" in one.stderr and "1 replicas" not in one.stderr
    two = cli("validate", job_file(tmp_path, generic(["tick.py", "1", "0"], replicas=2), file="two.yaml"))
    assert "2 replicas:" in two.stderr
