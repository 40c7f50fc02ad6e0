"""Jobs that run with no record in the store: the store was moved aside, replaced or deleted under them.

The supervisor of such a job goes on (it holds the old database file open) and so do its replicas, while the
store the commands now open knows nothing of it: `list` would say "No jobs found" and `cancel` "no job
matches". Each job's folder still holds its supervisor's state file (`supervisor_state`), which names a live
supervisor: from it `list` shows the job (Running, reason `NotInStore`, and why), and `cancel` and `delete`
can stop it by signalling that supervisor, which cancels its job on a SIGTERM that came with no request.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from ...status import REASON_NOT_IN_STORE, JobPhase, JobStatus
from .errors import LocalError
from .store import JobStore
from .supervisor_state import STATE_FILE, SupervisorState, read_state

STOP_WAIT = 60.0
"""Seconds to wait for a signalled supervisor to stop its job and exit."""


@dataclass(frozen=True)
class UnrecordedJob:
    """A job folder whose supervisor is alive though the store has no row for the job."""

    job_id: str
    folder: Path
    state: SupervisorState

    def status(self, store: JobStore) -> JobStatus:
        """The job as `list` and `status` show it: Running, and why the store cannot say more."""
        return JobStatus(
            self.job_id,
            self.job_id,
            phase=JobPhase.RUNNING,
            reason=REASON_NOT_IN_STORE,
            message=(
                f"its supervisor (pid {self.state.pid}) runs, but the store {store.db_path} has no record of "
                f"it: was the store moved aside or replaced? `kubetrain cancel {self.job_id}` stops it"
            ),
            created_at=self.folder.stat().st_mtime if self.folder.exists() else None,
        )


def unrecorded_jobs(store: JobStore, known: set[str] | None = None) -> list[UnrecordedJob]:
    """Every job folder under the store's root whose supervisor is alive and which the store does not hold
    (`known`: the store's job ids, when the caller has them)."""
    root = store.log_dir("_").parent
    try:
        folders = [d for d in root.iterdir() if d.is_dir()]
    except OSError:
        return []
    if known is None:
        known = {j.job_id for j in store.list_jobs(limit=None)}
    found = []
    for folder in folders:
        if folder.name in known:
            continue
        state = read_state(folder / STATE_FILE)
        if state is not None and state.supervising and state.alive():
            found.append(UnrecordedJob(folder.name, folder, state))
    return found


def find_unrecorded(store: JobStore, prefix: str) -> UnrecordedJob | None:
    """The unrecorded job whose id is `prefix` or, alone, starts with it."""
    jobs = unrecorded_jobs(store)
    exact = [j for j in jobs if j.job_id == prefix]
    matching = exact or [j for j in jobs if j.job_id.startswith(prefix)]
    return matching[0] if len(matching) == 1 else None


def stop_unrecorded(job: UnrecordedJob) -> None:
    """SIGTERM its supervisor, which cancels the job (a SIGTERM with no request in its store cancels), and wait
    for it to exit. A supervisor that cannot take a signal (running in a thread of someone's program) is
    refused: that program must end it."""
    if not job.state.signals:
        raise LocalError(
            f"job {job.job_id} is not in the store and its supervisor (pid {job.state.pid}) runs inside another "
            "program, which a signal would end: stop it from that program"
        )
    try:
        pidfd = os.pidfd_open(job.state.pid)
    except ProcessLookupError:
        return
    try:
        if not job.state.alive():  # the pid was reused between the state file's read and the pidfd
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(job.state.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        while (left := deadline - time.monotonic()) > 0:
            if poller.poll(int(min(left, 1.0) * 1000) + 1):
                return
        raise LocalError(f"job {job.job_id}'s supervisor (pid {job.state.pid}) has not stopped within "
                         f"{STOP_WAIT:.0f} s")
    finally:
        os.close(pidfd)


__all__ = ["UnrecordedJob", "find_unrecorded", "stop_unrecorded", "unrecorded_jobs"]
