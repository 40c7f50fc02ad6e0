"""Signals at a running job: the terminal of an attached run closing (SIGHUP), Ctrl-C twice, and a supervisor
stopped with SIGSTOP while `cancel` or `delete` asks it to stop. Each ends with no live process of the job
(checked by pid), the job's true outcome recorded, and the replicas' lines in their logs."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from kubetrain.backends.local.supervisor import Supervisor
from kubetrain.status import JobPhase, ReplicaPhase
from tests.support.helpers import (  # noqa: F401 (no_process_left_behind: an autouse fixture)
    alive,
    attached_sleepers,
    cli,
    create_job,
    generic,
    local_backend,
    log_lines,
    make_job,
    no_process_left_behind,
    no_traceback,
    running_sleepers,
    signal_supervisor,
    status_of,
    wait_for,
    wait_gone,
    write,
)

pytestmark = pytest.mark.timeout(120)


def test_sighup_to_an_attached_run_records_cancelled_not_a_lost_supervisor(tmp_path: Path) -> None:
    """Closing the terminal of `kubetrain run` (SIGHUP): nobody is left to watch the job, which is cancelled,
    with the reason; it did not fail, and its supervisor was not lost."""
    with attached_sleepers(tmp_path) as (run, job_id, found):
        run.send_signal(signal.SIGHUP)
        run.communicate(timeout=60)
    wait_gone(found.values())
    status = status_of(job_id)
    assert (status.phase, status.reason) == (JobPhase.CANCELLED, "Cancelled")
    assert status.message is not None and "terminal closed" in status.message
    lines = log_lines(job_id)
    assert all(f"{key} up" in lines[key[:-2]] for key in found), lines


TERM_NOTED = """\
import os, pathlib, signal, sys, time
# Says it got SIGTERM (in its log) and goes on: only a SIGKILL stops it.
signal.signal(signal.SIGTERM, lambda *_: print("SIGTERM ignored", flush=True))
print("up", flush=True)  # before the file the test waits for: a SIGTERM cannot come before it
pathlib.Path(sys.argv[1], str(os.getpid())).write_text("up")
while True:
    time.sleep(0.05)
"""


def test_a_second_ctrl_c_kills_the_replicas_and_the_job_ends_cancelled(tmp_path: Path) -> None:
    """The first Ctrl-C stops the replicas gracefully (SIGTERM, then a grace period: here 10 minutes, which
    the replica ignoring SIGTERM would use up); the second kills them at once, and the job is Cancelled."""
    write(tmp_path / "stubborn.py", TERM_NOTED)
    (tmp_path / "up").mkdir()
    with local_backend() as backend:
        job_id = create_job(backend, make_job(generic(["stubborn.py", str(tmp_path / "up")], replicas=2)), tmp_path)

        def press_ctrl_c_twice() -> None:
            pids = wait_for("the replicas", lambda: (lambda p: p if len(p) == 2 else None)(os.listdir(tmp_path / "up")))
            os.kill(os.getpid(), signal.SIGINT)
            wait_for(
                "the graceful stop", lambda: all("SIGTERM ignored" in lines for lines in log_lines(job_id).values())
            )
            os.kill(os.getpid(), signal.SIGINT)
            found.extend(int(p) for p in pids)

        found: list[int] = []
        presser = threading.Thread(target=press_ctrl_c_twice)
        presser.start()
        try:
            phase = Supervisor(backend.store, job_id, grace=600.0).run()
        finally:
            presser.join()
        assert phase is JobPhase.CANCELLED
        status = backend.status(job_id)
    assert (status.phase, status.message) == (JobPhase.CANCELLED, "cancelled by Ctrl-C")
    assert not any(alive(pid) for pid in found)
    assert [(r.reason, r.signal) for r in status.replicas] == [("Cancelled", signal.SIGKILL)] * 2
    assert all(r.describe_exit() == "stopped by cancel (SIGKILL)" for r in status.replicas)
    assert all(lines[:2] == ["up", "SIGTERM ignored"] for lines in log_lines(job_id).values())


def _stopped_supervisor(tmp_path: Path, name: str) -> tuple[str, int, dict[str, int]]:
    """A detached job of two sleeping replicas whose supervisor is then stopped with SIGSTOP."""
    job_id, _, found = running_sleepers(tmp_path, name)
    return job_id, signal_supervisor(job_id, signal.SIGSTOP), found


def test_cancel_with_a_stopped_supervisor_stops_the_replicas_itself(tmp_path: Path) -> None:
    job_id, supervisor, found = _stopped_supervisor(tmp_path, "stopped")
    cancelled = cli("cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    no_traceback(cancelled)
    # No process of the job is left: the replicas, and the detached supervisor (its watchdog with it).
    wait_gone([*found.values(), supervisor])
    status = status_of(job_id)
    assert status.phase is JobPhase.CANCELLED
    assert status.message is not None and f"supervisor (pid {supervisor}), which is stopped" in status.message
    assert all(str(pid) in status.message for pid in found.values())
    assert all(r.phase is ReplicaPhase.CANCELLED and r.reason == "Cancelled" for r in status.replicas)
    lines = log_lines(job_id)
    assert all(f"{key} up" in lines[key[:-2]] for key in found), lines


def test_delete_with_a_stopped_supervisor_leaves_no_process_behind(tmp_path: Path) -> None:
    job_id, supervisor, found = _stopped_supervisor(tmp_path, "stopdel")
    deleted = cli("delete", job_id)
    assert deleted.returncode == 0, deleted.stderr
    no_traceback(deleted)
    assert not any(alive(pid) for pid in [*found.values(), supervisor])
    assert cli("list", "-o", "name").stdout.strip() == ""


def test_delete_refuses_while_an_attached_supervisor_is_stopped(tmp_path: Path) -> None:
    """An attached `kubetrain run` stopped with Ctrl-Z is someone's program: delete stops the replicas, keeps
    the job and says which pid is alive; continued, the run ends the job Cancelled."""
    with attached_sleepers(tmp_path) as (run, job_id, found):
        run.send_signal(signal.SIGSTOP)
        deleted = cli("delete", job_id)
        assert deleted.returncode == 1
        no_traceback(deleted)
        assert f"supervisor, pid {run.pid}" in deleted.stderr and "stopped" in deleted.stderr
        assert not any(alive(pid) for pid in found.values())
        assert status_of(job_id).phase is JobPhase.CANCELLED
        run.send_signal(signal.SIGCONT)
        _out, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert cli("delete", job_id).returncode == 0
