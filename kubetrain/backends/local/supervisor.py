"""The supervisor of one local job: gang start, restart policy, deadline, cancel/suspend, final status.

It works from the job's stored launch record (`launch.LaunchRecord`) and imports neither the spec layer
nor any framework, so a detached supervisor starts in a few milliseconds of Python. Run detached as
`python -m kubetrain.backends.local.supervisor JOB_ID`, or in-process by `kubetrain run` (attached).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ...contract import env_names
from ...contract.logs import LogSink
from ...contract.pause import pause_point
from ...status import (
    REASON_CANCELLED,
    REASON_DEGRADED,
    REASON_STOPPED,
    Condition,
    ConditionStatus,
    FailureSummary,
    JobPhase,
    JobStatus,
    ReplicaPhase,
    describe_exit,
)
from .job_processes import kill_recorded
from .launch import LaunchRecord, files_root
from .live_output import Messages
from .log_reader import iter_log
from .processes import ExitEvent, LaunchSpec, LogNotice, ProcessGroup
from .procfs import pid_alive, proc_start_time
from .store import JobStore
from .store_connection import JobNotFoundError
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
HEARTBEAT = 1.0
"""Seconds between the supervisor's heartbeats (its state file touched): when it dies, however it dies, the
job's Finished time is its last heartbeat, not the time someone next looked."""
STATE_FILE = "supervisor.json"
"""The supervisor's state file, in the job's log folder: who supervises the job and how to reach it."""
STATE_SIZE = 512
"""Bytes the state file is padded to (JSON allows trailing blanks): on a full disk, a state that cannot be
written as a new file is written over the old one, in blocks it already has (`write_state`)."""
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT)

BY_CTRL_C = "cancelled by Ctrl-C"
"""The message of a job cancelled by Ctrl-C (`kubetrain.run` re-raises KeyboardInterrupt on it)."""
BY_HANGUP = "cancelled: its terminal closed (SIGHUP)"
BY_SIGTERM = "cancelled: the supervisor received SIGTERM"


# -- the state file: who supervises a job, whether signals reach it, and its heartbeat ----------------------


@dataclass(frozen=True)
class SupervisorState:
    """What a job's state file says (`STATE_FILE`): written by the process that created the job (until a
    supervisor takes over), then by its supervisor, whose heartbeat keeps the file's time fresh."""

    pid: int
    start_time: int | None
    supervising: bool
    """False: the process that created the job, which has not started it yet."""
    signals: bool
    """A SIGTERM wakes it to read a request; False: it polls the store (it runs in a thread of a program
    whose signals are the program's: a SIGTERM would end the program)."""
    detached: bool
    """A supervisor process of its own (`run --detach`, `resume`): nobody else's program, so it may be killed."""
    heartbeat: float
    """The file's modification time: the last sign of life."""

    def alive(self) -> bool:
        return pid_alive(self.pid, self.start_time)


def state_path(store: JobStore, job_id: str) -> Path:
    return store.log_dir(job_id) / STATE_FILE


def write_state(path: Path, pid: int, *, supervising: bool, signals: bool, detached: bool) -> bool:
    """Write the state file whole (a new file renamed over the old: a reader never sees half of it). True
    when written. Best effort: a folder gone must not stop a job, which then only lacks what the file tells.

    On a full disk (ENOSPC, EDQUOT) the new file finds no block; the state is then written over the old
    file, whose blocks it reuses (it is padded to `STATE_SIZE`), since a stale state misleads: a creator's
    says "no signals", and a cancel would then wait for a supervisor that waits for a signal.
    """
    data = {
        "pid": pid,
        "startTime": proc_start_time(pid),
        "supervising": supervising,
        "signals": signals,
        "detached": detached,
    }
    text = json.dumps(data).encode().ljust(STATE_SIZE - 1) + b"\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            _write_at(fd, text)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        return True
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # an empty file left on a full disk takes what little room is left
        return exc.errno in _NO_ROOM and _write_over(path, text)


def _write_at(fd: int, data: bytes, offset: int = 0) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def _write_over(path: Path, text: bytes) -> bool:
    """Write `text` over the file at `path`, in its own blocks (no new one needed), if it is as large. A
    reader may, rarely, see a mix of old and new: it finds no valid JSON and treats it as no file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if os.fstat(fd).st_size < len(text):
            return False  # written by an earlier kubetrain, unpadded
        _write_at(fd, text)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def read_state(path: Path) -> SupervisorState | None:
    """The state file, or None when there is none (a job of an earlier kubetrain) or it cannot be read."""
    try:
        with open(path) as f:
            data = json.load(f)
            heartbeat = os.fstat(f.fileno()).st_mtime
        return SupervisorState(
            pid=int(data["pid"]),
            start_time=None if data.get("startTime") is None else int(data["startTime"]),
            supervising=bool(data.get("supervising", True)),
            signals=bool(data.get("signals", True)),
            detached=bool(data.get("detached", False)),
            heartbeat=heartbeat,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


class _Heartbeat:
    """Writes the state file (`write`), then touches it every `HEARTBEAT` seconds from a thread of its own:
    the file's time says when the supervisor was last alive, whatever its control loop is doing (starting
    replicas, a grace period). A state not written (no room on the disk, or the file removed) is written
    again at each beat until it is: a full disk delays the file, it never stops the beat or the job."""

    def __init__(self, path: Path, write: Callable[[], bool]) -> None:
        self._path = path
        self._write = write
        self._written = write()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="kubetrain-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT):
            if not self._written:
                self._written = self._write()
                continue
            try:
                os.utime(self._path)
            except FileNotFoundError:
                self._written = self._write()
            except OSError:
                pass  # touching needs no room; anything else (a read-only remount) only costs this beat

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


ENVIRONMENT_FILE = "environment.json"
"""The environment of the shell that submitted the job, in its log folder (private to the user, as the store):
what its replicas start from, whoever starts them later (`resume`, from another shell), as a pod's env is fixed
when the job is submitted."""


def save_environment(folder: Path, environ: Mapping[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / ENVIRONMENT_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with open(fd, "w") as f:
        json.dump(dict(environ), f)


def saved_environment(folder: Path) -> dict[str, str] | None:
    """The submitting shell's environment, or None for a job recorded before it was kept (or unreadable)."""
    try:
        data = json.loads((folder / ENVIRONMENT_FILE).read_text())
    except (OSError, ValueError):
        return None
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None
def write_paths(root: Path, paths: Mapping[str, str]) -> None:
    """The files a controller places at absolute paths in a pod, under `root` ($KUBETRAIN_FILES_ROOT): a script
    (`.sh`) executable, as the MPI operator mounts discover_hosts.sh."""
    for absolute, content in paths.items():
        target = root / absolute.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        if absolute.endswith(".sh"):
            target.chmod(0o755)


def replica_base_env(environ: Mapping[str, str], python: str, keys: list[str]) -> dict[str, str]:
    """The environment every replica starts from: the caller's, plus two things a launcher owes them.

    - The interpreter's folder first on PATH: `python` started by another program (mpirun, a shell script)
      is then the same interpreter as the replica's own, as in an activated virtual environment.
    - OMP_NUM_THREADS: this machine's cores shared among the job's processes (torchrun sets 1 for several
      processes). Without it every process starts a thread per core and they fight over the cores: DDP
      ran at half speed on 2 cores. A value the user set is kept.
    """
    env = dict(environ)
    bindir = os.path.dirname(python)
    path = env.get("PATH", "")
    if bindir and path.split(os.pathsep)[0] != bindir:
        env["PATH"] = bindir + (os.pathsep + path if path else "")
    if "OMP_NUM_THREADS" not in env:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        env["OMP_NUM_THREADS"] = str(max(1, cores // max(1, len(keys))))
    return env


class Supervisor:
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

    def _process_count(self, role: str, index: int) -> int:
        return len(self.record.replica(role, index).processes)

    # -- the loop -------------------------------------------------------------------------------------

    def run(self) -> JobPhase:
        """Run the job to a terminal phase (or Suspended). Returns the phase recorded."""
        store, job_id = self.store, self.job_id
        # Handlers first: `kubetrain cancel` signals the pid recorded next, and must not kill us mid-start.
        # Only the main thread can have them: run from another thread (`kubetrain.run` in a worker thread),
        # the supervisor says so in its state file, and `cancel` then leaves the request for it to poll.
        self._wake_fds = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        handled = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1) if self._signals else ()
        previous = {sig: signal.signal(sig, self._on_signal) for sig in handled}
        heartbeat: _Heartbeat | None = None
        try:
            path = state_path(store, job_id)
            heartbeat = _Heartbeat(
                path,
                lambda: write_state(path, os.getpid(), supervising=True, signals=self._signals, detached=self.detached),
            )
            store.set_supervisor(job_id, os.getpid())
            pause_point("local:supervising")  # a test hook (env_names.PAUSE_AT): handlers in place, nothing launched
            early = self._before_start()
            if early is not None:
                return early
            specs = self._specs()
            self._log_paths = {spec.key: spec.log_path for spec in specs}
            started_at = time.time()
            with ProcessGroup(specs, sink=self.sink, job=job_id, on_log_notice=self._log_notice) as group:
                self._group = group
                pause_point("local:launched")  # a test hook: the replicas' processes started
                return self._attempts(group, started_at)
        finally:
            self._group = None
            if heartbeat is not None:
                heartbeat.stop()
            try:
                # A job deleted under us has no record left to clear.
                with contextlib.suppress(JobNotFoundError):
                    store.set_supervisor(job_id, None)
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
                fds, self._wake_fds = self._wake_fds, None
                for fd in fds or ():
                    os.close(fd)
                if self._messages is not None:
                    self._messages.close()  # the job's outcome is recorded: a blocked terminal only delays us

    def _log_notice(self, notice: LogNotice) -> None:
        """A replica's log is missing lines (a full disk): the first time, one line on the terminal; for
        each log closed with lines missing, a LogTruncated condition, which `describe` shows."""
        if notice.first:
            self.on_event(f"warning: {notice.message}")
            return
        condition = Condition("LogTruncated", ConditionStatus.TRUE, "NoSpace", notice.message, time.time())
        with contextlib.suppress(JobNotFoundError):
            self.store.add_condition(self.job_id, condition)

    def _before_start(self) -> JobPhase | None:
        """A job cancelled or suspended before this supervisor got to run (a cancel right after
        `run --detach`, on a busy machine) must not start its replicas."""
        phase = self.store.get_status(self.job_id).phase
        if phase.is_terminal or phase is JobPhase.SUSPENDED:
            return phase
        request = self._pending_request()
        if request is not None:
            return self._stop_for(None, request)
        return None

    def _attempts(self, group: ProcessGroup, started_at: float) -> JobPhase:
        store, job_id = self.store, self.job_id
        if self.record.parallelism is not None:
            return self._run_trials(group, started_at, self.record.parallelism)
        while True:
            self._start(group)
            if self.record.elastic is not None:
                outcome = self._watch_elastic(group, started_at)
            else:
                outcome = self._watch(group, started_at)
            if outcome is None:
                outcome = self._back_off(group, started_at)
            if outcome is not None:
                return outcome
            store.record_restart(job_id)
            # Each replica was started again, as a pod's restartCount counts: the group's restart is theirs too.
            for replica in self.record.replicas:
                with contextlib.suppress(JobNotFoundError):
                    store.record_replica_restart(job_id, replica.role, replica.index)

    def _back_off(self, group: ProcessGroup, started_at: float) -> JobPhase | None:
        """Wait until the next attempt is due (`_next_attempt`), as the Job controller backs off between
        retries. None: restart now; else the phase a cancel, suspend or the deadline ended the job in."""
        due, self._next_attempt = self._next_attempt, None
        if due is None:
            return None
        # The wait runs on the monotonic clock: a clock step must not stretch or skip it.
        end = time.monotonic() + max(0.0, due - time.time())
        while True:
            request = self._pending_request()
            if request is not None:
                return self._stop_for(None, request)
            now = time.time()
            if self.deadline_s is not None and now >= started_at + self.deadline_s:
                return self._deadline(group)
            left = end - time.monotonic()
            if left <= 0:
                return None
            if self.deadline_s is not None:
                left = min(left, started_at + self.deadline_s - now)
            self._sleep(min(left, REQUEST_POLL))

    def _sleep(self, seconds: float) -> None:
        """Sleep up to `seconds`, less when a signal arrives (the handler writes to the wake pipe)."""
        if self._wake_fds is None:
            time.sleep(seconds)
            return
        read_fd = self._wake_fds[0]
        ready, _, _ = select.select([read_fd], [], [], max(0.0, seconds))
        if ready:
            with contextlib.suppress(OSError):
                os.read(read_fd, 4096)

    def _start(self, group: ProcessGroup) -> None:
        store, job_id = self.store, self.job_id
        self._exits = {}
        # Log files are appended to across gang restarts (and resumes): the failure summary reads only
        # what this attempt adds. Sizes, not times, so a clock step cannot mix attempts; the previous
        # attempt's output is all written by now (terminate() returns only after that).
        self._log_starts = {key: _file_size(path) for key, path in self._log_paths.items()}
        specs = None
        if self.record.elastic is not None:
            # Every gang start is a new rendezvous: the state of the last one (its closed round, its dead
            # participants) must not be met by agents that start afresh.
            self._reset_rendezvous()
            specs = self._specs()
            self._log_paths = {spec.key: spec.log_path for spec in specs}
        started = group.start(specs)
        now = time.time()
        self._report_preload(group, now)
        for key, (pid, _start) in started.items():
            role, index = self._replica_of(key)
            if key.endswith(".0") or "." not in key:
                store.update_replica(
                    job_id,
                    role,
                    index,
                    phase=ReplicaPhase.RUNNING,
                    pid=pid,
                    started_at=now,
                    reason="DebugHold" if self.debug else None,
                )
        reason = "DebugHold" if self.debug else "Started"
        count = f"{len(started)} process" + ("" if len(started) == 1 else "es")
        message = "replicas hold their program: kubetrain attach" if self.debug else count
        store.set_job_phase(
            job_id,
            JobPhase.RUNNING,
            reason=reason,
            message=message,
            condition=Condition("Running", ConditionStatus.TRUE, reason, message, now),
        )
        self._report_status()

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

    def _watch(self, group: ProcessGroup, started_at: float) -> JobPhase | None:
        """Until the attempt ends. None: restart the group; else the final phase."""
        exited_ok: set[str] = set()
        total = len(self.plan_keys())
        deciding = {p.key for r in self.record.replicas if r.role in self.record.success_roles for p in r.processes}
        while True:
            # Before blocking: a request (or signal) that came while the replicas were being started
            # found no process group to wake.
            request = self._pending_request()
            if request is not None:
                return self._stop_for(group, request)
            timeout = None if self._signals else REQUEST_POLL
            if self.deadline_s is not None:
                timeout = min(timeout or MAX_WAIT, max(0.0, started_at + self.deadline_s - time.time()))
            events = group.wait_exit(timeout)
            request = self._pending_request()
            if request is not None:
                # Exits seen with a cancel or suspend are the stop's: the request's sender may have stopped
                # the replicas itself (`cancel` does, when this supervisor was stopped with SIGSTOP).
                for event in events:
                    self._record_exit(event, stopped=True, by=request)
                return self._stop_for(group, request)
            for event in events:
                self._record_exit(event)
            if events:
                self._report_status()
            deadline = self.deadline_s is not None and time.time() >= started_at + self.deadline_s
            if not events and deadline:
                return self._deadline(group)
            failed = [e for e in events if e.returncode != 0]
            exited_ok |= {e.key for e in events if e.returncode == 0}
            if failed:
                return self._failure(group, failed[0])
            if len(exited_ok) >= total:
                self._finish(JobPhase.SUCCEEDED, "Completed", "all replicas exited 0")
                return JobPhase.SUCCEEDED
            if deciding and deciding <= exited_ok:
                return self._completed_by_roles(group)

    # -- elastic jobs: a lost replica is replaced alone, the survivors carry on ------------------------------

    def _watch_elastic(self, group: ProcessGroup, started_at: float) -> JobPhase | None:
        """Until an elastic job ends. Its replicas are torchrun agents of one rendezvous: when one is lost
        the survivors' agents restart their workers and meet again without it (torchrun's own elastic
        behaviour), so the job goes on while at least minReplicas live. The lost replica is started again
        alone, after the back-off and within backoffLimit, as its restartPolicy allows; its agent joins the
        rendezvous and the others make room for it. A scale request starts or stops the difference.
        Returns the final phase (never None: an elastic job has no gang restart)."""
        assert self.record.elastic is not None
        due: dict[str, float] = {}
        """Replica key → when its replacement starts (epoch seconds)."""
        succeeded: set[str] = set()
        while True:
            request = self._pending_request()
            if request is not None:
                return self._stop_for(group, request)
            if self._scale_requested:
                self._scale_requested = False
                self._rescale(group, due)
            now = time.time()
            for key in [k for k, when in due.items() if when <= now]:
                del due[key]
                self._replace(group, key)
            timeout = None if self._signals else REQUEST_POLL
            if due:
                timeout = min(timeout or MAX_WAIT, max(0.0, min(due.values()) - time.time()))
            if self.deadline_s is not None:
                timeout = min(timeout or MAX_WAIT, max(0.0, started_at + self.deadline_s - time.time()))
            if not group.running() and not due:
                if succeeded:
                    self._finish(JobPhase.SUCCEEDED, "Completed", "the elastic job's replicas exited 0")
                    return JobPhase.SUCCEEDED
                return self._elastic_failed(group)
            events = group.wait_exit(timeout)
            request = self._pending_request()
            if request is not None:
                for event in events:
                    self._record_exit(event, stopped=True, by=request)
                return self._stop_for(group, request)
            if not events and self.deadline_s is not None and time.time() >= started_at + self.deadline_s:
                return self._deadline(group)
            for event in events:
                self._record_exit(event)
                if event.returncode == 0:
                    succeeded.add(event.key)
                    # The training is done: a replacement would find the rendezvous closed.
                    due.clear()
                elif not succeeded:
                    outcome = self._lost(group, event, due)
                    if outcome is not None:
                        return outcome
            if events:
                self._report_status()

    # -- trials: independent runs, at most `parallelism` at a time, each retried alone ---------------------

    def _run_trials(self, group: ProcessGroup, started_at: float, parallelism: int) -> JobPhase:
        """A job of trials (`spec.trials`) to its end, as a Kubernetes Indexed Job with completions and
        parallelism runs: each replica is a run of its own; at most `parallelism` of them are started or due to
        start again at a time, lowest index first; a failed one is stopped (its other processes too) and started
        again alone after the back-off, as its restartPolicy allows and while the job's backoffLimit does (every
        retry counts against it); otherwise the job fails and the others are stopped. It succeeds once every
        index has. Runs that succeeded before a suspend are not run again on resume."""
        store, job_id = self.store, self.job_id
        procs = {r.key: [p.key for p in r.processes] for r in self.record.replicas}
        total = len(procs)
        done = {f"{r.role}-{r.index}" for r in store.get_status(job_id).replicas if r.phase is ReplicaPhase.SUCCEEDED}
        waiting = [key for key in procs if key not in done]
        due: dict[str, float] = {}
        """Replica key → when it starts again after a failure (epoch seconds)."""
        live: set[str] = set()
        self._exits = {}
        first = True
        while True:
            request = self._pending_request()
            if request is not None:
                return self._stop_for(group, request)
            now = time.time()
            ready = [key for key, when in due.items() if when <= now]
            for key in ready:
                del due[key]
            while waiting and len(live) + len(due) + len(ready) < parallelism:
                ready.append(waiting.pop(0))
            if ready:
                self._start_trials(group, ready, procs, first=first, done=len(done), total=total)
                first = False
                live |= set(ready)
            if not live and not due:
                message = f"{total}/{total} runs succeeded"
                self._finish(JobPhase.SUCCEEDED, "Completed", message)
                return JobPhase.SUCCEEDED
            timeout = None if self._signals else REQUEST_POLL
            if due:
                timeout = min(timeout or MAX_WAIT, max(0.0, min(due.values()) - time.time()))
            if self.deadline_s is not None:
                timeout = min(timeout or MAX_WAIT, max(0.0, started_at + self.deadline_s - time.time()))
            events = group.wait_exit(timeout)
            request = self._pending_request()
            if request is not None:
                for event in events:
                    self._record_exit(event, stopped=True, by=request)
                return self._stop_for(group, request)
            if not events and self.deadline_s is not None and time.time() >= started_at + self.deadline_s:
                return self._deadline(group)
            for event in events:
                key = self.record.replica_of(event.key).key
                if key not in live:
                    continue  # a sibling of a failed run, stopped with it
                self._record_exit(event)
                exits = self._exits.get(self._replica_of(event.key), {})
                if event.returncode == 0:
                    if len(exits) == len(procs[key]) and all(code == 0 for code in exits.values()):
                        live.discard(key)
                        done.add(key)
                    continue
                live.discard(key)
                siblings = [k for k in procs[key] if k != event.key and k in group.running()]
                if siblings:
                    group.stop(siblings, self.grace)
                outcome = self._trial_failed(group, event, due)
                if outcome is not None:
                    return outcome
            if events:
                self._trials_progress(len(done), total, len(live))

    def _start_trials(self, group: ProcessGroup, keys: list[str], procs: Mapping[str, list[str]], *, first: bool,
                      done: int, total: int) -> None:
        """Start the runs `keys` (replica keys): the group's first start, or beside the running ones."""
        wanted = {k for key in keys for k in procs[key]}
        specs = [spec for spec in self._specs() if spec.key in wanted]
        for spec in specs:
            self._log_paths[spec.key] = spec.log_path
            self._log_starts[spec.key] = _file_size(spec.log_path)
        for key in keys:
            self._exits.pop(self._replica_of(procs[key][0]), None)
        started = group.start(specs) if first else group.add(specs)
        now = time.time()
        if first:
            self._report_preload(group, now)
        for key, (pid, _start) in started.items():
            role, index = self._replica_of(key)
            if key.endswith(".0") or "." not in key:
                self.store.update_replica(self.job_id, role, index, phase=ReplicaPhase.RUNNING, pid=pid,
                                          started_at=now, reason=None, message=None)
        if first:
            message = f"{done}/{total} runs succeeded, {len(keys)} running"
            self.store.set_job_phase(self.job_id, JobPhase.RUNNING, reason="Started", message=message,
                                     condition=Condition("Running", ConditionStatus.TRUE, "Started", message, now))
            self._report_status()

    def _trials_progress(self, done: int, total: int, running: int) -> None:
        self.store.set_job_phase(self.job_id, JobPhase.RUNNING, reason="Started",
                                 message=f"{done}/{total} runs succeeded, {running} running")
        self._report_status()

    def _trial_failed(self, group: ProcessGroup, event: ExitEvent, due: dict[str, float]) -> JobPhase | None:
        """A run failed: due to start again alone after the back-off (None), or the job's end."""
        role, index = self._replica_of(event.key)
        code = event.returncode
        restarts = self.store.get_status(self.job_id).backoff_count
        limit = self.rules.backoff_limit
        retryable = self.rules.retryable_exit(code, role)
        reason = "ReplicaFailed"
        if retryable and restarts < limit:
            delay = self.rules.delay(restarts)
            action = f"started again in {delay:g}s (restart {restarts + 1}/{limit})"
        elif retryable:
            action = f"gave up after {restarts} restart{'s' if restarts != 1 else ''} (backoffLimit {limit})"
            reason = "BackoffLimitExceeded"
        else:
            action = self.rules.why_not(code, role)
        failure = FailureSummary(role=role, index=index, exit_code=code if code >= 0 else None,
                                 signal=-code if code < 0 else None, last_lines=self._last_lines(event.key),
                                 policy_action=action)
        self.store.set_first_failure(self.job_id, failure)
        if not (retryable and restarts < limit):
            self._stop_all(group)
            self._finish(JobPhase.FAILED, reason, failure.headline())
            return JobPhase.FAILED
        key = self.record.replica_of(event.key).key
        due[key] = time.time() + self.rules.delay(restarts)
        self.store.record_restart(self.job_id)
        self.store.record_replica_restart(self.job_id, role, index)
        self.on_event(failure.headline())
        return None

    def _elastic_sizes(self, group: ProcessGroup, due: Mapping[str, float] | None = None) -> tuple[int, int]:
        """(replicas alive or about to start again, replicas the job has now)."""
        alive = len(group.running()) + len(due or ())
        return alive, len(self.record.replicas)

    def _lost(self, group: ProcessGroup, event: ExitEvent, due: dict[str, float]) -> JobPhase | None:
        """A replica of an elastic job failed. Replaced after the back-off when its restartPolicy and the
        job's backoffLimit allow; otherwise the job runs on without it while minReplicas live, and fails
        when fewer do. None: the job goes on."""
        assert self.record.elastic is not None
        role, index = self._replica_of(event.key)
        code = event.returncode
        restarts = self.store.get_status(self.job_id).backoff_count
        limit = self.rules.backoff_limit
        retryable = self.rules.retryable_exit(code, role)
        how = describe_exit(code if code >= 0 else None, -code if code < 0 else None)
        now = time.time()
        if retryable and restarts < limit:
            delay = self.rules.delay(restarts)
            due[event.key] = now + delay
            action = f"replaced in {delay:g}s (restart {restarts + 1}/{limit})"
        elif retryable:
            action = f"not replaced: backoffLimit {limit} reached"
        else:
            action = f"not replaced: {self.rules.why_not(code, role)}"
        alive, total = self._elastic_sizes(group)
        failure = FailureSummary(role=role, index=index, exit_code=code if code >= 0 else None,
                                 signal=-code if code < 0 else None, last_lines=self._last_lines(event.key),
                                 policy_action=action)
        self.store.set_first_failure(self.job_id, failure)
        minimum = self.record.elastic.min_replicas
        message = f"{role}-{index} {how}: {alive}/{total} replicas running (minReplicas {minimum}); {action}"
        self.store.add_condition(self.job_id, Condition("ReplicaLost", ConditionStatus.TRUE, "ReplicaLost",
                                                        message, now))
        self.on_event(message)
        if alive + len(due) < minimum or (alive == 0 and not due):
            return self._elastic_failed(group, failure)
        self._set_degraded(group, due)
        return None

    def _set_degraded(self, group: ProcessGroup, due: Mapping[str, float]) -> None:
        """The job's reason says how many of its replicas run: `Degraded` with "1/2 replicas", or back to
        `Started` once all of them do."""
        running, total = len(group.running()), len(self.record.replicas)
        if running < total:
            self.store.set_job_phase(self.job_id, JobPhase.RUNNING, reason=REASON_DEGRADED,
                                     message=f"{running}/{total} replicas")
        else:
            self.store.set_job_phase(self.job_id, JobPhase.RUNNING, reason="Started",
                                     message=f"{running}/{total} replicas")
        self._report_status()

    def _replace(self, group: ProcessGroup, key: str) -> None:
        """Start a lost replica again, alone: its agent joins the running rendezvous."""
        role, index = self._replica_of(key)
        spec = next((s for s in self._specs() if s.key == key), None)
        if spec is None:  # scaled away meanwhile
            return
        self._exits.pop((role, index), None)
        self._log_starts[key] = _file_size(spec.log_path)
        self._log_paths[key] = spec.log_path
        restarts = self.store.record_restart(self.job_id)
        self.store.record_replica_restart(self.job_id, role, index)
        started = group.add([spec])
        now = time.time()
        if key in started:
            self.store.update_replica(self.job_id, role, index, phase=ReplicaPhase.RUNNING, pid=started[key][0],
                                      started_at=now, reason=None, message=None)
        running, total = len(group.running()), len(self.record.replicas)
        message = f"{key} started again (restart {restarts}/{self.rules.backoff_limit}): {running}/{total} replicas"
        self.store.add_condition(self.job_id, Condition("ReplicaRejoined", ConditionStatus.TRUE, "ReplicaRejoined",
                                                        message, now))
        self.on_event(message)
        self._set_degraded(group, {})

    def _rescale(self, group: ProcessGroup, due: dict[str, float]) -> None:
        """Take the stored launch record's new replica count: start the replicas it adds (their agents join
        the rendezvous, whose members then restart their workers with them) and stop the ones it drops,
        gracefully (SIGTERM: a signalled torchrun agent leaves the rendezvous open for the others)."""
        plan_json = self.store.get_plan_json(self.job_id)
        if plan_json is None:
            return
        old = {r.key: r for r in self.record.replicas}
        self.record = LaunchRecord.from_json(plan_json)
        new = {r.key: r for r in self.record.replicas}
        gone = [key for key in old if key not in new]
        added = [key for key in new if key not in old]
        if not gone and not added:
            return
        for key in gone:
            due.pop(key, None)
        if gone:
            group.stop(gone, self.grace)
            self.store.remove_replicas(self.job_id, [(old[k].role, old[k].index) for k in gone])
        specs = [s for s in self._specs() if s.key in added]
        for spec in specs:
            self._log_paths[spec.key] = spec.log_path
            self._log_starts[spec.key] = _file_size(spec.log_path)
        started = group.add(specs) if specs else {}
        now = time.time()
        for key, (pid, _start) in started.items():
            replica = new[key]
            self.store.update_replica(self.job_id, replica.role, replica.index, phase=ReplicaPhase.RUNNING, pid=pid,
                                      started_at=now)
        message = f"replicas {len(old)} → {len(new)}" + (f": stopped {', '.join(gone)}" if gone else "") + (
            f": started {', '.join(added)}" if added else "")
        self.store.add_condition(self.job_id, Condition("Scaled", ConditionStatus.TRUE, "Scaled", message, now))
        self.on_event(message)
        self._set_degraded(group, due)

    def _elastic_failed(self, group: ProcessGroup, failure: FailureSummary | None = None) -> JobPhase:
        """Fewer than minReplicas live and none is coming back: the job fails, the rest are stopped."""
        assert self.record.elastic is not None
        self._stop_all(group)
        minimum = self.record.elastic.min_replicas
        headline = failure.headline() if failure is not None else "every replica failed"
        limited = failure is not None and "backoffLimit" in (failure.policy_action or "")
        reason = "BackoffLimitExceeded" if limited else "ReplicaFailed"
        self._finish(JobPhase.FAILED, reason, f"{headline}; fewer than minReplicas ({minimum}) left")
        return JobPhase.FAILED

    def _reset_rendezvous(self) -> None:
        path = self.record.rendezvous_path
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def plan_keys(self) -> list[str]:
        return [p.key for p in self.record.processes]

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

    def _failure(self, group: ProcessGroup, first: ExitEvent) -> JobPhase | None:
        store, job_id = self.store, self.job_id
        role, index = self._replica_of(first.key)
        status = store.get_status(job_id)
        restarts = status.backoff_count
        limit = self.rules.backoff_limit
        retryable = self.rules.retryable_exit(first.returncode, role)
        retry = retryable and restarts < limit
        reason = "ReplicaFailed"
        if retry:
            action = f"restarted {restarts + 1}/{limit}"
        elif retryable:
            action = f"gave up after {restarts} restart{'s' if restarts != 1 else ''} (backoffLimit {limit})"
            reason = "BackoffLimitExceeded"
        else:
            action = self.rules.why_not(first.returncode, role)
        failure = FailureSummary(
            role=role,
            index=index,
            exit_code=first.returncode if first.returncode >= 0 else None,
            signal=-first.returncode if first.returncode < 0 else None,
            last_lines=self._last_lines(first.key),
            policy_action=action,
        )
        store.set_first_failure(job_id, failure)
        self._stop_all(group)
        if retry:
            # A gang restart counts once, in backoffCount (recorded by the caller once the back-off is over);
            # per-replica restart counts are for a replica restarted alone, which this supervisor never does.
            now = time.time()
            delay = self.rules.delay(restarts)
            self._next_attempt = now + delay
            message = f"{failure.headline()}; back-off: next attempt in {delay:g}s, at {_rfc3339(now + delay)}"
            self.on_event(message)
            store.set_job_phase(
                job_id,
                JobPhase.RUNNING,
                reason=REASON_BACKOFF,
                message=message,
                condition=Condition("Restarting", ConditionStatus.TRUE, REASON_BACKOFF, message, now),
            )
            self._report_status()
            return None
        self._finish(JobPhase.FAILED, reason, failure.headline())
        return JobPhase.FAILED

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

    def _completed_by_roles(self, group: ProcessGroup) -> JobPhase:
        """runPolicy.successRoles have all exited 0: the job is complete, the other replicas are stopped (a
        server that never ends on its own), each shown as stopped by the completion, not as failed."""
        roles = ", ".join(self.record.success_roles)
        for event in group.terminate(self.grace):
            role, index = self._replica_of(event.key)
            if event.returncode == 0:
                self._record_exit(event)
                continue
            self.store.update_replica(
                self.job_id, role, index, phase=ReplicaPhase.CANCELLED, exit_code=None, signal=None,
                finished_at=event.time, reason="JobCompleted",
                message=f"stopped when the job completed (runPolicy.successRoles: {roles})",
            )
        self._finish(JobPhase.SUCCEEDED, "Completed", f"every replica of {roles} exited 0 (runPolicy.successRoles)")
        return JobPhase.SUCCEEDED

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
            with contextlib.suppress(JobNotFoundError):
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


def _rfc3339(t: float) -> str:
    """Epoch seconds as an RFC 3339 UTC time to the millisecond: 2024-05-01T12:00:03.250Z."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _job_exists(store: JobStore, job_id: str) -> bool:
    try:
        store.get_status(job_id)
    except JobNotFoundError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    """Entry point of a detached supervisor."""
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print("usage: python -m kubetrain.backends.local.supervisor JOB_ID", file=sys.stderr)
        return 2
    job_id = args[0]
    with JobStore() as store:
        try:
            phase = Supervisor(store, job_id, detached=True).run()
        except JobNotFoundError:
            if _job_exists(store, job_id):
                raise
            # Deleted under us (`kubetrain delete` gave up waiting for us, or before we started): leaving
            # the process group stopped any replica, and there is nothing left to record.
            return 1
    return 0 if phase in (JobPhase.SUCCEEDED, JobPhase.SUSPENDED) else 1


if __name__ == "__main__":
    sys.exit(main())
