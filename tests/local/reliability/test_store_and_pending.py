"""Jobs that must not stay Pending, and the store broken under a running job: a job nobody will start
becomes Failed with the reason; what can fail is checked before the job exists; `kubetrain.run` works from a
thread; a jobs.db garbled while a job runs ends with no process of the job alive and its lines in its log."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import kubetrain
from kubetrain.backends.base import RunResult
from kubetrain.backends.local import job_control, job_start
from kubetrain.backends.local.backend import LocalBackend
from kubetrain.status import JobPhase
from tests.support.helpers import (  # noqa: F401 (no_process_left_behind: an autouse fixture)
    PIDFILE_SLEEP,
    TICK,
    alive,
    cli,
    create_job,
    generic,
    job_file,
    local_backend,
    log_lines,
    make_job,
    no_process_left_behind,
    no_traceback,
    running_sleepers,
    supervisor_pid,
    wait_gone,
    wait_pids,
    write,
)

pytestmark = pytest.mark.timeout(120)

CREATE_THEN_EXIT = """\
import sys
from pathlib import Path
from kubetrain.backends.local.job_start import create_job
from kubetrain.backends.local.store import JobStore
from kubetrain.jobspec import from_dict
# Records a job, as `kubetrain run` does first, and ends before starting it (a crash, a kill).
doc = {"apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": {"name": "orphan"},
       "spec": {"framework": "generic", "replicas": 2, "run": {"python": ["x.py"]}}}
with JobStore() as store:
    job_id, _ = create_job(store, from_dict(doc), Path(sys.argv[1]))
print(job_id)
"""


def test_a_pending_job_whose_creator_died_becomes_failed_when_next_looked_at(tmp_path: Path) -> None:
    script = write(tmp_path / "create.py", CREATE_THEN_EXIT)
    created = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, check=True)
    job_id = created.stdout.split()[-1]
    shown = cli("status", job_id)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"{job_id} Failed"), shown.stdout
    with local_backend() as backend:
        status = backend.status(job_id)
    assert (status.phase, status.reason) == (JobPhase.FAILED, "NotStarted")
    assert status.message == "the process that created the job ended before starting it"


def test_a_log_folder_that_cannot_be_made_is_refused_before_the_job_exists(
    tmp_path: Path, kubetrain_home: Path
) -> None:
    write(tmp_path / "tick.py", TICK)
    path = job_file(tmp_path, generic(["tick.py", "1", "0"], replicas=1))
    assert cli("list").returncode == 0  # the store exists
    (kubetrain_home / "logs").rmdir() if (kubetrain_home / "logs").is_dir() else None
    (kubetrain_home / "logs").write_text("not a folder")
    result = cli("run", path)
    assert result.returncode == 1
    no_traceback(result)
    assert f"error: {kubetrain_home / 'logs'}: cannot create the log folder" in result.stderr
    assert cli("list", "-o", "name").stdout.strip() == ""


def test_kubetrain_run_from_a_thread_runs_a_two_replica_job(tmp_path: Path) -> None:
    """No signal handlers outside the main thread: the supervisor polls for requests there instead."""
    write(tmp_path / "tick.py", TICK)
    job = make_job(generic(["tick.py", "3", "0"], replicas=2), "threaded")
    results: list[RunResult] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(kubetrain.run(job, base_dir=str(tmp_path), quiet=True))
        except BaseException as exc:  # shown by the assert below
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout=100)
    assert not errors, errors
    (result,) = results
    assert result.status is not None and result.status.phase is JobPhase.SUCCEEDED
    lines = log_lines(result.job_id)
    assert lines["worker-0"][:3] == ["tick 0 worker-0", "tick 1 worker-0", "tick 2 worker-0"]
    assert lines["worker-1"][:3] == ["tick 0 worker-1", "tick 1 worker-1", "tick 2 worker-1"]


def test_cancel_reaches_a_job_run_from_a_thread_without_signalling_the_program(tmp_path: Path) -> None:
    """A SIGTERM to this process would end the test run: cancel leaves the request for the supervisor's
    thread to poll."""
    write(tmp_path / "sleep.py", PIDFILE_SLEEP)
    pids = tmp_path / "pids"
    job = make_job(generic(["sleep.py", str(pids)], replicas=2), "threadcancel")
    results: list[RunResult] = []
    worker = threading.Thread(target=lambda: results.append(kubetrain.run(job, base_dir=str(tmp_path), quiet=True)))
    worker.start()
    found = wait_pids(pids, 2)
    job_id = cli("list", "-o", "name").stdout.split()[0]
    cancelled = cli("cancel", job_id)
    worker.join(timeout=100)
    assert cancelled.returncode == 0, cancelled.stderr
    (result,) = results
    assert result.status is not None and result.status.phase is JobPhase.CANCELLED
    assert not any(alive(pid) for pid in found.values())


def test_a_garbled_store_under_a_running_job_leaves_no_process_and_keeps_the_logs(
    tmp_path: Path, kubetrain_home: Path
) -> None:
    job_id, _, found = running_sleepers(tmp_path, "garbled")
    supervisor = supervisor_pid(job_id)
    assert supervisor is not None
    log_dir = kubetrain_home / "logs" / job_id
    with open(kubetrain_home / "jobs.db", "r+b") as db:  # the header and the first pages: garbage
        db.write(b"\x13" * 8192)
    listed = cli("list")
    no_traceback(listed)
    # The store is moved aside, and said; the job is out of sight, its supervisor is not: deleting or
    # cancelling it is not possible by id any more, so the supervisor is stopped as any process would be.
    assert listed.returncode == 0 and "their logs stay in" in listed.stderr, listed.stderr
    subprocess.run(["kill", "-TERM", str(supervisor)], check=True)
    wait_gone([*found.values(), supervisor])
    lines = {p.name: p.read_text(errors="replace") for p in log_dir.glob("worker-*.log")}
    assert all(f"{key} up" in lines[f"{key[:-2]}.log"] for key in found), lines


def test_a_resumed_job_is_pending_not_lost_before_its_new_supervisor_records_itself(tmp_path: Path) -> None:
    """Between `resume` making the job Pending and the new supervisor recording itself, the supervisor on
    record is the one that suspended the job, long gone: a look at the job then must not call it lost."""
    job_id, supervisor, _ = running_sleepers(tmp_path, "resumeme")
    with local_backend() as backend:
        assert backend.suspend(job_id).phase is JobPhase.SUSPENDED
        while alive(supervisor):  # the supervisor that suspended it finishes and exits (bounded by the timeout)
            time.sleep(0.05)
        # What resume does before it starts the new supervisor.
        job_control.prepare_resume(backend.store, job_id, backend.gpus)
        status = backend.status(job_id)
    assert (status.phase, status.reason) == (JobPhase.PENDING, "Resumed"), status.summary_line()


def test_suspend_right_after_a_detached_run_waits_for_its_supervisor_to_start(tmp_path: Path) -> None:
    """`run --detach` returns once the job is recorded; `suspend` at once finds it Pending with no supervisor
    yet. The request stands in the store and the supervisor reads it when it starts: suspend waits for that
    and reports Suspended, as it does for a running job, rather than failing with "still pending"."""
    write(tmp_path / "tick.py", TICK)
    job = make_job(generic(["tick.py", "1000", "0.05"], replicas=1), "earlysuspend")
    with local_backend() as backend:
        job_id = create_job(backend, job, tmp_path)
        outcome: list[object] = []
        asking = threading.Thread(target=lambda: outcome.append(_suspend_or_error(backend, job_id)))
        asking.start()
        while not backend.store.pending_requests(job_id):  # the request is in before any supervisor is
            time.sleep(0.02)
        job_start.start_detached(backend.store, job_id)
        asking.join(timeout=90)
        try:
            assert outcome and getattr(outcome[0], "phase", None) is JobPhase.SUSPENDED, outcome
        finally:
            cli("cancel", job_id)


def _suspend_or_error(backend: LocalBackend, job_id: str) -> object:
    try:
        return backend.suspend(job_id)
    except Exception as error:  # the test shows what suspend said
        return error
