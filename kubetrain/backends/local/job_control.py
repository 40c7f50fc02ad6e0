"""A stored local job changed from another command: stopped, suspended or scaled by asking its supervisor,
made ready to resume, deleted, and its status read with a lost supervisor stood in for.

Apart from `backend`, which answers the `Backend` calls by resolving the id (or finding a job that runs with
no record, `unrecorded`) and handing the job here: what is done to a job once it is found is this module's.
A request is a row in the store (`store_requests`) plus a signal that wakes the supervisor; the caller waits
for the outcome, up to `STOP_WAIT`, and stands in for a supervisor that is stopped (`supervisor_liveness`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ...status import Condition, ConditionStatus, JobPhase, JobStatus
from ..base import StillStopping
from .errors import LocalError
from .job_processes import kill_job_processes
from .launch import LaunchRecord
from .prepare import base_dir_of, prepare_launch
from .procfs import is_stopped
from .store import JobStore
from .store_requests import RequestKind
from .supervisor_liveness import (
    end_supervisor,
    open_supervisor,
    stop_without_supervisor,
    supervisor_lost,
    wait_for,
    wait_supervisor_exit,
)
from .supervisor_state import read_state, state_path, write_state

if TYPE_CHECKING:
    from ...jobspec import TrainJob
    from .gpus import GpuInventory

STOP_WAIT = 60.0
"""Seconds `cancel` and `suspend` wait for the supervisor to report the job stopped (it needs the grace
period, 5 s, plus the time replicas take to die)."""


def current_status(store: JobStore, job_id: str) -> JobStatus:
    """The job's status as stored, after a supervisor found lost has been stood in for."""
    status = store.get_status(job_id)
    if not status.phase.is_terminal and supervisor_lost(store, job_id, status):
        status = store.get_status(job_id)
    return status


def stored_record(store: JobStore, job_id: str) -> LaunchRecord | None:
    text = store.get_plan_json(job_id)
    return None if text is None else LaunchRecord.from_json(text)


def stopped(status: JobStatus) -> JobStatus:
    """`status` once a stop was asked for: `StillStopping` when the job neither ended nor is suspended."""
    if not status.phase.is_terminal and status.phase is not JobPhase.SUSPENDED:
        raise StillStopping(
            f"job {status.job_id} is still {status.phase.value.lower()}: its supervisor has not stopped it "
            "yet (a replica stuck in the kernel?); the request stands, check with: "
            f"kubetrain status {status.job_id}"
        )
    return status


def request_stop(store: JobStore, job_id: str, kind: RequestKind) -> JobStatus:
    """Ask the job's supervisor to cancel or suspend it and wait, up to `STOP_WAIT`, for the outcome; a job
    not started yet is ended (cancel) or waited for, a stopped supervisor stood in for."""
    status = current_status(store, job_id)
    if status.phase.is_terminal:
        raise LocalError(f"job {job_id} has already ended ({status.phase.value})")
    if status.phase is JobPhase.SUSPENDED:
        if kind is RequestKind.SUSPEND:
            return status
        store.record_phase(job_id, JobPhase.CANCELLED, "Cancelled", "cancelled while suspended")
        return current_status(store, job_id)
    store.add_request(job_id, kind)
    record = store.supervisor_process(job_id)
    pid = store.live_supervisor_pid(job_id)
    if pid is None or record is None:  # created, not started yet (or gone): the request waits in the store
        if status.phase is JobPhase.PENDING and kind is RequestKind.CANCEL:
            store.record_phase(job_id, JobPhase.CANCELLED, "Cancelled", "cancelled before it started")
        elif status.phase is JobPhase.PENDING:
            # `run --detach` returns once the job is recorded; its supervisor may not have started yet.
            # It reads the request when it does: wait for that as for a running job.
            return wait_for(lambda: current_status(store, job_id), until=_stopped_or_ended, timeout=STOP_WAIT)
        return current_status(store, job_id)
    state = read_state(state_path(store, job_id))
    # A supervisor running in a thread of someone's program polls for requests: a SIGTERM would end
    # the program. Any other one is woken at once.
    if state is None or state.pid != pid or state.signals:
        with contextlib.suppress(ProcessLookupError):  # it ended just now: the wait below sees how
            os.kill(pid, signal.SIGTERM)
    status = wait_for(lambda: current_status(store, job_id), until=_stopped_or_ended, timeout=STOP_WAIT,
                      stopped=record)
    if _stopped_or_ended(status) or not is_stopped(*record):
        return status
    stop_without_supervisor(store, job_id, kind, record, state)
    return current_status(store, job_id)


def replan(store: JobStore, job_id: str, job: TrainJob, gpus: Callable[[], GpuInventory] | None) -> LaunchRecord:
    """A new launch record of a stored job (resumed, or scaled): new ports, the same folders and preloaded
    modules, and this machine's verdict again (its GPUs may have changed; a refusal changes nothing)."""
    old = stored_record(store, job_id)
    cwd = old.cwd if old is not None else None
    base_dir = Path(cwd) if cwd is not None else base_dir_of(job)
    folders = None
    if old is not None and cwd is not None:
        # The same folders as before, each role's as recorded (a record stored before roles had their own
        # holds one for all): the job file's folder is not stored, so they cannot be worked out again.
        def folders(roles: Sequence[str]) -> dict[str, str]:
            return {role: old.cwd_of(role) or cwd for role in roles}

    return prepare_launch(
        job,
        job_id,
        store.log_dir(job_id) / "files",
        base_dir=base_dir,
        cwd=cwd,
        preload=old.preload if old is not None else (),
        gpus=gpus,
        folders=folders,
        check_programs=True,
    ).record


def scale(store: JobStore, job_id: str, replicas: int, gpus: Callable[[], GpuInventory] | None) -> JobStatus:
    """See `LocalBackend.scale`: the new count recorded, and the supervisor asked to start or stop the
    difference (a suspended job starts the new count when resumed)."""
    from ...jobspec import from_dict
    from ...plan import scaled

    status = current_status(store, job_id)
    job = from_dict(json.loads(store.get_spec_json(job_id)))
    job = scaled(job, replicas)  # the bounds first: a wrong count is wrong whatever the job's state
    if status.phase.is_terminal:
        raise LocalError(f"job {job_id} has already ended ({status.phase.value}): there is nothing to scale")
    record = replan(store, job_id, job, gpus)
    old = stored_record(store, job_id)
    if old is not None and len(old.replicas) == len(record.replicas):
        return status
    store.set_spec_json(job_id, json.dumps(job.to_dict()))
    store.set_plan_json(job_id, record.to_json())
    store.add_replicas(job_id, [(r.role, r.index) for r in record.replicas])
    if status.phase is JobPhase.SUSPENDED:
        # Nothing runs: resume starts the new count.
        if old is not None:
            kept = {r.key for r in record.replicas}
            store.remove_replicas(job_id, [(r.role, r.index) for r in old.replicas if r.key not in kept])
        return current_status(store, job_id)
    store.add_request(job_id, RequestKind.SCALE)
    pid = store.live_supervisor_pid(job_id)
    state = read_state(state_path(store, job_id))
    # SIGUSR1 wakes a supervisor that has its handlers (one that polls reads the request by itself).
    if pid is not None and state is not None and state.pid == pid and state.signals and state.supervising:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGUSR1)
    return current_status(store, job_id)


def prepare_resume(store: JobStore, job_id: str, gpus: Callable[[], GpuInventory] | None) -> None:
    """A Suspended job made ready to start again: a fresh launch record, phase Pending."""
    status = current_status(store, job_id)
    if status.phase is not JobPhase.SUSPENDED:
        raise LocalError(f"job {job_id} is {status.phase.value}, not Suspended")
    from ...jobspec import from_dict

    job = from_dict(json.loads(store.get_spec_json(job_id)))
    job = job.model_copy(update={"spec": job.spec.model_copy(update={"run_mode": "Immediate"})})
    fresh = replan(store, job_id, job, gpus)
    store.set_plan_json(job_id, fresh.to_json())
    # This process takes the job over from the supervisor that suspended it before the job is Pending
    # again: until the new supervisor records itself, a look at the job must see someone alive starting
    # it, not the old supervisor's end (which would record the resumed job Failed).
    write_state(state_path(store, job_id), os.getpid(), supervising=False, signals=False, detached=False)
    store.set_job_phase(
        job_id,
        JobPhase.PENDING,
        reason="Resumed",
        message="resumed by request",
        condition=Condition("Suspended", ConditionStatus.FALSE, "Resumed", "resumed by request", time.time()),
    )


def delete(store: JobStore, job_id: str) -> None:
    """See `LocalBackend.delete`: cancelled if it runs, its supervisor waited for (or ended), its processes
    gone, then the job and its logs forgotten; `LocalError` naming the pids that survive, the job kept."""
    # Found before the cancel: on its way out the supervisor clears its record, not its process.
    supervisor = open_supervisor(store, job_id)
    record = store.supervisor_process(job_id)
    try:
        status = current_status(store, job_id)
        if not status.phase.is_terminal and status.phase is not JobPhase.SUSPENDED:
            with contextlib.suppress(LocalError):  # it ended meanwhile: nothing to cancel
                request_stop(store, job_id, RequestKind.CANCEL)
        if supervisor is None:  # a detached supervisor may have recorded itself only now
            supervisor = open_supervisor(store, job_id)
            record = store.supervisor_process(job_id)
        if supervisor is not None and record is not None:
            pid, pidfd = supervisor
            if not wait_supervisor_exit(store, job_id, pid, pidfd, start_time=record[1]):
                end_supervisor(store, job_id, pid, pidfd, record[1])
    finally:
        if supervisor is not None:
            os.close(supervisor[1])
    survivors = kill_job_processes(store, job_id)
    if survivors:
        raise LocalError(
            f"job {job_id} not deleted: its processes {', '.join(map(str, survivors))} are still alive after "
            "SIGKILL (stuck in the kernel?); try again once they are gone"
        )
    store.delete_job(job_id)


def _stopped_or_ended(status: JobStatus) -> bool:
    """What a stop request waits for: the job ended, or suspended (kept, to be resumed)."""
    return status.phase.is_terminal or status.phase is JobPhase.SUSPENDED


__all__ = [
    "STOP_WAIT",
    "current_status",
    "delete",
    "prepare_resume",
    "replan",
    "request_stop",
    "scale",
    "stopped",
    "stored_record",
]
