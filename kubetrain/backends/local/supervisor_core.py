"""What every way a local supervisor runs a job's replicas shares: their launch specs, recording their exits,
stopping them, finishing the job, and the requests and signals that reach the supervisor.

A job runs its replicas as a gang (`supervisor.Supervisor`), as an elastic set (`supervisor_elastic`), or as
independent trials (`supervisor_trials`); each of those watches its process group its own way, and all of
them record through this base, so a replica's end, a cancel or a suspend, and the job's final status read
the same whichever way ran it. Requests come through the store (`store_requests`), woken by a signal where
the supervisor has signal handlers (the main thread), polled for where it has not.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...contract import env_names
from ...contract.errors import JobNotFound
from ...contract.logs import LogSink
from ...status import (
    REASON_CANCELLED,
    REASON_STOPPED,
    Condition,
    ConditionStatus,
    JobPhase,
    JobStatus,
    ReplicaPhase,
)
from ..logfiles.reader import iter_log
from .job_processes import kill_recorded
from .launch import LaunchRecord, files_root
from .live_output import Messages
from .processes import ExitEvent, LaunchSpec, ProcessGroup
from .replica_env import replica_base_env, saved_environment
from .store import JobStore
from .store_requests import RequestKind

DEFAULT_GRACE = 5.0
"""Seconds between SIGTERM and SIGKILL when stopping replicas (Kubernetes' default is 30)."""
FAILURE_LINES = 10

HOLD_ARGV = ("sleep", "infinity")
"""What a replica runs in runMode Debug instead of the program: `kubetrain attach` runs it by hand."""

REASON_BACKOFF = "BackOff"
"""The job's reason while it waits out the back-off before restarting its replicas (as a pod's)."""
REASON_SUSPENDED = "Suspended"
"""A replica's reason when a suspend stopped it: Pending again, until the job is resumed. (A cancel's is
`status.REASON_CANCELLED`, with phase Cancelled: "stopped by cancel (SIGTERM)".)"""
REQUEST_POLL = 0.5
"""How often the store is read for a request that came without a signal: while backing off, and always
when the supervisor runs in a thread other than the main one (it has no signal handlers there)."""
MAX_WAIT = 3600.0
"""The longest single wait: a deadline of days or years is reached in waits of this length, since
`select` refuses timeouts beyond its platform's limit (OverflowError)."""
BY_CTRL_C = "cancelled by Ctrl-C"
"""The message of a job cancelled by Ctrl-C (`kubetrain.run` re-raises KeyboardInterrupt on it)."""
BY_HANGUP = "cancelled: its terminal closed (SIGHUP)"
BY_SIGTERM = "cancelled: the supervisor received SIGTERM"


class SupervisorCore:
    """The supervisor's state and what its ways of running a job share (see the module doc)."""

    def __init__(
        self,
        store: JobStore,
        job_id: str,
        *,
        sink: LogSink | None = None,
        grace: float = DEFAULT_GRACE,
        on_event: Callable[[str], None] | None = None,
        detached: bool = False,
        on_status: Callable[[JobStatus], None] | None = None,
    ) -> None:
        """`detached`: this process exists only to supervise the job (`python -m ...supervisor`).
        `on_status`: an attached run's receiver of the job's status after each change made here."""
        self.store = store
        self.job_id = job_id
        self.sink = sink
        self.grace = grace
        self._messages = Messages(on_event, job=job_id) if on_event is not None else None
        # Called from the control loop: queued, never written here (a terminal nobody reads would hold the loop).
        self.on_event: Callable[[str], None] = self._messages or (lambda text: None)
        self.on_status = on_status
        self.detached = detached
        plan_json = store.get_plan_json(job_id)
        if plan_json is None:
            raise RuntimeError(f"job {job_id} has no launch record")
        self.record = LaunchRecord.from_json(plan_json)
        self.rules = self.record.restart
        self.deadline_s = self.record.active_deadline_seconds
        self.debug = self.record.run_mode == "Debug"
        self._interrupts = 0
        self._terminated = False
        self._hangup = False
        self._signals = threading.current_thread() is threading.main_thread()
        """Signal handlers can be had only in the main thread; elsewhere requests are polled for."""
        self._cancel_message = "cancelled by request"
        self._group: ProcessGroup | None = None
        self._exits: dict[tuple[str, int], dict[str, int]] = {}
        """This attempt's exits per replica: process key → return code."""
        self._preload_state: tuple[ConditionStatus, str, str] | None = None
        self._log_paths: dict[str, Path] = {}
        self._log_starts: dict[str, int] = {}
        """Process key → size of its log file when this attempt started: where the attempt's output begins."""
        self._next_attempt: float | None = None
        """When the replicas start again after a failure (epoch seconds); None: no restart is due."""
        self._wake_fds: tuple[int, int] | None = None
        """A pipe the signal handler writes to, waking a back-off wait (which has no processes to wait for)."""
        self._scale_requested = False
        """A SCALE request was read: the stored launch record has another replica count (elastic jobs)."""

    # -- launch specs ---------------------------------------------------------------------------------

    def _specs(self) -> list[LaunchSpec]:
        python = os.environ.get(env_names.PYTHON) or sys.executable
        record = self.record
        # The submitting shell's environment, not this supervisor's: a job resumed from another shell starts
        # its replicas as it was submitted. kubetrain's own state folder stays this supervisor's.
        environ = saved_environment(self.store.log_dir(self.job_id)) or dict(os.environ)
        if env_names.HOME in os.environ:
            environ[env_names.HOME] = os.environ[env_names.HOME]
        base_env = replica_base_env(environ, python, self.plan_keys())
        if record.files:
            files_dir = Path(record.files_dir)
            files_dir.mkdir(parents=True, exist_ok=True)
            for name, content in record.files.items():
                (files_dir / name).write_text(content)
        if record.paths:
            write_paths(Path(files_root(record.files_dir)), record.paths)
        specs = []
        for replica in record.replicas:
            log = self.store.log_path(self.job_id, replica.role, replica.index)
            many = len(replica.processes) > 1
            for proc in replica.processes:
                argv = list(proc.argv)
                if argv and argv[0] == "python":
                    # Like torchrun: the replicas use the interpreter kubetrain runs on (its venv),
                    # not whichever `python` comes first on PATH.
                    argv[0] = python
                if self.debug:
                    argv = list(HOLD_ARGV)
                path = log.with_name(f"{proc.key}.log") if many else log
                env = {**base_env, **proc.env}
                specs.append(LaunchSpec(proc.key, argv, env, record.cwd_of(replica.role), path, record.preload))
        return specs

    def _replica_of(self, key: str) -> tuple[str, int]:
        replica = self.record.replica_of(key)
        return replica.role, replica.index

    def _record_running(self, started: Mapping[str, tuple[int, int]], now: float, **fields: Any) -> None:
        """The replicas whose processes just ``started`` (key → pid, start time) recorded Running with their pid, a
        replica of several processes by its first (``.0``); ``fields``: more of `update_replica`'s."""
        for key, (pid, _start) in started.items():
            if key.endswith(".0") or "." not in key:
                role, index = self._replica_of(key)
                self.store.update_replica(self.job_id, role, index, phase=ReplicaPhase.RUNNING, pid=pid,
                                          started_at=now, **fields)

    def _process_count(self, role: str, index: int) -> int:
        return len(self.record.replica(role, index).processes)

    def plan_keys(self) -> list[str]:
        return [p.key for p in self.record.processes]

    def _report_preload(self, group: ProcessGroup, now: float) -> None:
        """A condition saying whether the replicas were forked from a preloading server, and if not why;
        recorded when it changes (so once, unless a restart changed it)."""
        if not self.record.preload:
            return
        if group.preloaded:
            state = (ConditionStatus.TRUE, "Forked", f"replicas forked after importing {', '.join(group.preloaded)}")
        else:
            state = (ConditionStatus.FALSE, "NotPreloaded", group.preload_note or "replicas started the ordinary way")
        if state != self._preload_state:
            self._preload_state = state
            self.store.add_condition(self.job_id, Condition("Preloaded", *state, now))

    def _record_exit(self, event: ExitEvent, *, stopped: bool = False, by: RequestKind | None = None) -> None:
        """Record a replica's exit; ``stopped``: it ended because this supervisor stopped the group, ``by``
        a cancel or suspend (it then shows as stopped by it, not as a failure of its own)."""
        role, index = self._replica_of(event.key)
        code = event.returncode
        # A replica of several processes: its first failure is its outcome (a sibling stopped afterwards
        # does not replace it), and it succeeded only once every process exited 0.
        exits = self._exits.setdefault((role, index), {})
        failed_before = any(c != 0 for c in exits.values())
        exits[event.key] = code
        if failed_before or (code == 0 and len(exits) < self._process_count(role, index)):
            return
        if stopped and code != 0 and by is not None:
            self._record_stopped_by(role, index, code, event.time, by)
            return
        self.store.update_replica(
            self.job_id,
            role,
            index,
            phase=ReplicaPhase.SUCCEEDED if code == 0 else ReplicaPhase.FAILED,
            exit_code=code if code >= 0 else None,
            signal=-code if code < 0 else None,
            finished_at=event.time,
            reason=REASON_STOPPED if stopped and code != 0 else None,
        )

    def _record_stopped_by(self, role: str, index: int, code: int, at: float, by: RequestKind) -> None:
        """A replica a cancel or suspend stopped. Suspended: Pending again (it starts on resume), its exit
        cleared. Cancelled: phase Cancelled, not Failed (the program did not fail), and how it was stopped."""
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        with contextlib.suppress(ValueError):
            how = signal.Signals(-code).name if code < 0 else how
        if by is RequestKind.SUSPEND:
            self.store.update_replica(
                self.job_id, role, index, phase=ReplicaPhase.PENDING, exit_code=None, signal=None, finished_at=at,
                reason=REASON_SUSPENDED, message=f"stopped by suspend ({how}); starts again on resume",
            )
            return
        self.store.update_replica(
            self.job_id, role, index, phase=ReplicaPhase.CANCELLED, exit_code=code if code >= 0 else None,
            signal=-code if code < 0 else None, finished_at=at, reason=REASON_CANCELLED,
            message=f"stopped by cancel ({how})",
        )

    def _last_lines(self, key: str) -> list[str]:
        """The replica's last lines of this attempt (not of an earlier one, in the same file)."""
        path = self._log_paths[key]
        return [rec.text for rec in iter_log(path, tail=FAILURE_LINES, offset=self._log_starts.get(key, 0))]

    def _stop_all(self, group: ProcessGroup, by: RequestKind | None = None) -> None:
        for event in group.terminate(self.grace):
            self._record_exit(event, stopped=True, by=by)

    def _deadline(self, group: ProcessGroup) -> JobPhase:
        self._stop_all(group)
        message = f"activeDeadlineSeconds {self.deadline_s} exceeded"
        self.store.add_condition(
            self.job_id, Condition("DeadlineExceeded", ConditionStatus.TRUE, "DeadlineExceeded", message, time.time())
        )
        self._finish(JobPhase.FAILED, "DeadlineExceeded", message)
        return JobPhase.FAILED

    def _stop_for(self, group: ProcessGroup | None, request: RequestKind) -> JobPhase:
        if group is not None:
            self._stop_all(group, by=request)
        if request is RequestKind.SUSPEND:
            self._finish(JobPhase.SUSPENDED, "Suspended", "suspended by request")
            return JobPhase.SUSPENDED
        self._finish(JobPhase.CANCELLED, "Cancelled", self._cancel_message)
        return JobPhase.CANCELLED

    def _finish(self, phase: JobPhase, reason: str, message: str) -> None:
        self.store.set_job_phase(
            self.job_id,
            phase,
            reason=reason,
            message=message,
            condition=Condition(phase.value, ConditionStatus.TRUE, reason, message, time.time()),
        )
        self._report_status()

    def _report_status(self) -> None:
        """The job's status, as recorded, to an attached run's `on_status` (the live status line, a program's
        callback): this loop makes every change, so it knows each one without anyone polling the store."""
        if self.on_status is not None:
            with contextlib.suppress(JobNotFound):
                self.on_status(self.store.get_status(self.job_id))

    # -- requests and signals ---------------------------------------------------------------------------

    def _pending_request(self) -> RequestKind | None:
        if self._interrupts:
            self._cancel_message = BY_CTRL_C
            return RequestKind.CANCEL
        if self._hangup:
            self._cancel_message = BY_HANGUP
            return RequestKind.CANCEL
        for request in self.store.pending_requests(self.job_id):
            self.store.mark_request_handled(request.id)
            if request.kind in (RequestKind.CANCEL, RequestKind.SUSPEND):
                return request.kind
            if request.kind is RequestKind.SCALE:
                self._scale_requested = True
        if self._terminated:
            self._cancel_message = BY_SIGTERM
            return RequestKind.CANCEL
        return None

    def _on_signal(self, signum: int, frame: object) -> None:
        # SIGTERM from `kubetrain cancel`/`suspend` comes with its request in the store, read first; a
        # SIGTERM without one (`timeout`, `kill`, a CI runner or service manager stopping us) cancels.
        # SIGINT (Ctrl-C on an attached run) cancels; a second Ctrl-C forces: the replicas are SIGKILLed
        # here and now, so they stop even if the control loop is busy. SIGHUP (the terminal of an attached
        # run closed) cancels too: nobody is left to watch the job, which is not a failure of it.
        if signum == signal.SIGINT:
            self._interrupts += 1
            if self._interrupts > 1:
                self.grace = 0.0
                if self._group is not None:
                    self._group.hurry()  # a stop already under way skips the rest of its grace
                    for pid, start in self._group.pids().values():
                        kill_recorded(pid, start, signal.SIGKILL)
        elif signum == signal.SIGHUP:
            self._hangup = True
        elif signum == signal.SIGUSR1:
            pass  # only a wake-up: a request (a scale) is waiting in the store
        else:
            self._terminated = True
        if self._group is not None:
            self._group.wake()
        if self._wake_fds is not None:
            with contextlib.suppress(OSError):  # full (already woken) or closed meanwhile
                os.write(self._wake_fds[1], b"\0")


def write_paths(root: Path, paths: Mapping[str, str]) -> None:
    """The files a controller places at absolute paths in a pod, under `root` ($KUBETRAIN_FILES_ROOT): a script
    (`.sh`) executable, as the MPI operator mounts discover_hosts.sh."""
    for absolute, content in paths.items():
        target = root / absolute.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        if absolute.endswith(".sh"):
            target.chmod(0o755)


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
