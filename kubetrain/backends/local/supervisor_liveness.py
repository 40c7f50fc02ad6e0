"""Whether a local job's supervisor is still there to act on it, and what is done in its place when it is not.

A job's supervisor owns its replicas: it records their ends and carries out cancel and suspend. It can die
(SIGKILL, OOM, a reboot) or be stopped (SIGSTOP, Ctrl-Z), and then nothing it owed the job happens. Whoever
next looks at the job (`supervisor_lost`), or asks something of it (`stop_without_supervisor`,
`end_supervisor`), finds that out from its recorded (pid, start time), its state file and its heartbeat, and
does the job's part itself: the replicas are stopped by their recorded pids (`job_processes`) and the outcome
recorded with the reason, rather than a job left Running forever or a request waiting on a process that
never answers.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Callable

from ...status import REASON_CANCELLED, Condition, ConditionStatus, JobPhase, JobStatus, ReplicaPhase
from .errors import LocalError
from .job_processes import KILL_WAIT, job_processes, kill_job_processes
from .procfs import is_stopped, pid_alive
from .store import JobStore
from .store_requests import RequestKind
from .supervisor_core import DEFAULT_GRACE, REASON_SUSPENDED
from .supervisor_state import SupervisorState, read_state, state_path

SUPERVISOR_EXIT_WAIT = 20.0
"""Seconds `delete` waits for a stopped job's supervisor to exit (closing its process group can take
seconds: it waits up to 5 s for its watchdog) before it deletes the job anyway."""
SUPERVISOR_CLEARED_WAIT = 5.0
"""Seconds it still waits once the supervisor has cleared its record (see `wait_supervisor_exit`)."""
STOPPED_SUPERVISOR_WAIT = 3.0
"""Seconds `cancel`, `suspend` and `delete` give a supervisor that is stopped (`kill -STOP`, Ctrl-Z) to be
continued before they stop the job's processes themselves, by their recorded pids."""


def supervisor_lost(store: JobStore, job_id: str, status: JobStatus) -> bool:
    """A Running job whose supervisor died (SIGKILL, OOM, reboot): its replicas died with it (or are
    killed now); record it as Failed with the reason, rather than Running forever. It ended when the
    supervisor last gave a sign of life (its heartbeat), not now. A Pending job whose creator ended
    before any supervisor took it over is Failed too (NotStarted)."""
    if status.phase not in (JobPhase.RUNNING, JobPhase.PENDING):
        return False
    # The record is read once: a detached supervisor records itself a moment after it starts, and one read
    # that found no record followed by another that found it (not alive by the first) took it for dead.
    recorded = store.supervisor_process(job_id)
    if recorded is not None and pid_alive(*recorded):
        return False
    state = read_state(state_path(store, job_id))
    if status.phase is JobPhase.PENDING and recorded is None:
        # Not started yet: a detached supervisor on its way, or the process that created the job about to
        # start it. Only when that process is gone will nobody start it.
        if state is None or state.alive():
            return False
        reason, message = "NotStarted", (
            "the process that created the job ended before starting it"
            if not state.supervising else "its supervisor process died before it started the job"
        )
    else:
        reason, message = "SupervisorLost", "the supervisor process died; its replicas were stopped"
    kill_job_processes(store, job_id)
    for record in store.replica_records(job_id):
        if record.phase in (ReplicaPhase.RUNNING, ReplicaPhase.PENDING):
            store.update_replica(job_id, record.role, record.index, phase=ReplicaPhase.UNKNOWN)
    # When it died: its last heartbeat, if the state file is that supervisor's (or creator's), or the last
    # thing it recorded, if later (it died before its first heartbeat).
    same = state is not None and (recorded is None or (state.pid, state.start_time) == recorded)
    last_record = max([status.started_at or 0.0, *(r.started_at or 0.0 for r in status.replicas)])
    died = min(max(state.heartbeat, last_record), time.time()) if state is not None and same else time.time()
    return store.set_job_phase(
        job_id,
        JobPhase.FAILED,
        reason=reason,
        message=message,
        condition=Condition("Failed", ConditionStatus.TRUE, reason, message, died),
        expect=(JobPhase.RUNNING, JobPhase.PENDING),
        at=died,
    )


def stop_without_supervisor(
    store: JobStore, job_id: str, kind: RequestKind, supervisor: tuple[int, int | None], state: SupervisorState | None
) -> None:
    """Carry out `kind` for a supervisor that is stopped (`kill -STOP`, Ctrl-Z) and so cannot: stop the
    job's processes by their recorded pids, then record the outcome, saying what was done.

    A detached supervisor is SIGKILLed too: it is nobody's program, and its watchdog then sweeps what
    the pids missed. An attached one (someone's `kubetrain run`) is left stopped; continued, it finds
    the request still pending and its replicas gone, and ends as asked.
    """
    pid = supervisor[0]
    pids = sorted(job_processes(store, job_id))
    survivors = kill_job_processes(store, job_id, grace=DEFAULT_GRACE)
    detached = state is not None and state.pid == pid and state.detached
    if detached:
        with contextlib.suppress(OSError):
            pidfd = os.pidfd_open(pid)
            try:
                if pid_alive(*supervisor):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            finally:
                os.close(pidfd)
    shown = ", ".join(map(str, pids)) or "none running"
    what = "cancelled" if kind is RequestKind.CANCEL else "suspended"
    message = (
        f"{what} without its supervisor (pid {pid}), which is stopped (SIGSTOP or Ctrl-Z): kubetrain stopped "
        f"the job's processes (pids {shown}) itself" + ("; the supervisor was killed" if detached else "")
    )
    if survivors:
        message += f"; still alive (stuck in the kernel?): {', '.join(map(str, survivors))}"
    stopped_by = REASON_CANCELLED if kind is RequestKind.CANCEL else REASON_SUSPENDED
    for record in store.replica_records(job_id):
        if record.phase is ReplicaPhase.RUNNING:
            if kind is RequestKind.SUSPEND:
                store.update_replica(job_id, record.role, record.index, phase=ReplicaPhase.PENDING,
                                     reason=stopped_by, message="stopped by suspend; starts again on resume")
            else:
                store.update_replica(job_id, record.role, record.index, phase=ReplicaPhase.CANCELLED,
                                     reason=stopped_by, message="stopped by cancel", signal=signal.SIGTERM)
    phase = JobPhase.CANCELLED if kind is RequestKind.CANCEL else JobPhase.SUSPENDED
    store.record_phase(job_id, phase, "Cancelled" if kind is RequestKind.CANCEL else "Suspended", message)


def open_supervisor(store: JobStore, job_id: str) -> tuple[int, int] | None:
    """(pid, pidfd) of the job's live supervisor; None if there is none, or it is this very process
    (a library caller deleting a job it runs attached: waiting for ourselves would never end)."""
    record = store.supervisor_process(job_id)
    if record is None or record[0] == os.getpid():
        return None
    pid, start = record
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # gone already
        return None
    # Checked with the pidfd open: while it is, the pid cannot pass to another process.
    if not pid_alive(pid, start):
        os.close(pidfd)
        return None
    return pid, pidfd


def wait_supervisor_exit(store: JobStore, job_id: str, pid: int, pidfd: int, *, start_time: int | None = None) -> bool:
    """Until the supervisor exits (its pidfd turns readable), bounded; True if it did.

    Once it has cleared its record it is done with the job: a detached supervisor exits right
    after, an attached `kubetrain run` prints its summary and exits, but a program that ran the job
    through the library may go on for long, so the wait is then cut short. So it is for a supervisor
    stopped (SIGSTOP, Ctrl-Z) for `STOPPED_SUPERVISOR_WAIT` seconds: it would never exit.
    """
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    deadline = time.monotonic() + SUPERVISOR_EXIT_WAIT
    stopped_since: float | None = None
    while (left := deadline - time.monotonic()) > 0:
        if poller.poll(int(min(left, 0.2) * 1000) + 1):
            return True
        record = store.supervisor_process(job_id)
        if record is None or record[0] != pid:
            deadline = min(deadline, time.monotonic() + SUPERVISOR_CLEARED_WAIT)
        if not is_stopped(pid, start_time):
            stopped_since = None
        elif stopped_since is None:
            stopped_since = time.monotonic()
        elif time.monotonic() - stopped_since >= STOPPED_SUPERVISOR_WAIT:
            return False
    return False


def end_supervisor(store: JobStore, job_id: str, pid: int, pidfd: int, start_time: int | None) -> None:
    """A supervisor that did not exit when asked, and still supervises `job_id`: killed (SIGKILL, its
    watchdog then sweeps its replicas) when detached, else `LocalError` naming it."""
    if store.supervisor_process(job_id) != (pid, start_time) or not pid_alive(pid, start_time):
        return  # done with the job (a program that ran it through the library goes on)
    state = read_state(state_path(store, job_id))
    if state is not None and state.pid == pid and state.detached:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        poller.poll(int(KILL_WAIT * 1000))
        return
    how = "stopped (SIGSTOP or Ctrl-Z)" if is_stopped(pid, start_time) else "still running"
    raise LocalError(
        f"job {job_id} not deleted: its supervisor, pid {pid} (an attached `kubetrain run`, or a program "
        f"running the job), is {how}; continue it (kill -CONT {pid}) or end it, then delete again"
    )


def wait_for(
    status_of: Callable[[], JobStatus],
    until: Callable[[JobStatus], bool],
    timeout: float = 60.0,
    stopped: tuple[int, int | None] | None = None,
) -> JobStatus:
    """Poll the job's status (`status_of`) until `until(status)`, at most `timeout` seconds; the last status.
    `stopped`: the supervisor (pid, start time): the wait ends early once it has been stopped (SIGSTOP, Ctrl-Z) for
    `STOPPED_SUPERVISOR_WAIT` seconds, since it does nothing until continued."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    stopped_since: float | None = None
    while True:
        status = status_of()
        now = time.monotonic()
        if until(status) or now > deadline:
            return status
        if stopped is not None:
            if not is_stopped(*stopped):
                stopped_since = None
            elif stopped_since is None:
                stopped_since = now
            elif now - stopped_since >= STOPPED_SUPERVISOR_WAIT:
                return status
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
