"""The supervisor of one local job: gang start, restart policy, deadline, cancel/suspend, final status.

It works from the job's stored launch record (`launch.LaunchRecord`) and imports neither the spec layer
nor any framework, so a detached supervisor starts in a few milliseconds of Python. Run detached as
`python -m kubetrain.backends.local.supervisor JOB_ID`, or in-process by `kubetrain run` (attached).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from datetime import UTC, datetime

from ...contract.errors import JobNotFound
from ...contract.ownership import process_is_kubetrains
from ...contract.pause import pause_point
from ...status import Condition, ConditionStatus, FailureSummary, JobPhase, ReplicaPhase
from . import orphans
from .processes import ExitEvent, ProcessGroup
from .replica_logs import LogNotice
from .store import JobStore
from .supervisor_core import MAX_WAIT, REASON_BACKOFF, REQUEST_POLL, file_size
from .supervisor_elastic import ElasticSupervision
from .supervisor_state import Heartbeat, state_path, write_state
from .supervisor_trials import TrialSupervision


class Supervisor(ElasticSupervision, TrialSupervision):
    """Runs one job to its end: a gang restarted whole after a failure, unless the job is elastic
    (`supervisor_elastic`) or a job of trials (`supervisor_trials`)."""

    def run(self) -> JobPhase:
        """Run the job to a terminal phase (or Suspended). Returns the phase recorded."""
        store, job_id = self.store, self.job_id
        # Handlers first: `kubetrain cancel` signals the pid recorded next, and must not kill us mid-start.
        # Only the main thread can have them: run from another thread (`kubetrain.run` in a worker thread),
        # the supervisor says so in its state file, and `cancel` then leaves the request for it to poll.
        self._wake_fds = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        handled = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1) if self._signals else ()
        previous = {sig: signal.signal(sig, self._on_signal) for sig in handled}
        heartbeat: Heartbeat | None = None
        adopting = False
        before: frozenset[int] = frozenset()
        try:
            path = state_path(store, job_id)
            heartbeat = Heartbeat(
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
            # In a process of kubetrain's own, the job's orphans are reparented to us and swept at its end,
            # even those that cleared their environment and left every group and session (`orphans`).
            adopting = (self.detached or process_is_kubetrains()) and orphans.become_subreaper()
            before = frozenset(orphans.children()) if adopting else frozenset()  # never the job's to sweep
            started_at = time.time()
            with ProcessGroup(specs, sink=self.sink, job=job_id, on_log_notice=self._log_notice) as group:
                self._group = group
                pause_point("local:launched")  # a test hook: the replicas' processes started
                return self._attempts(group, started_at)
        finally:
            self._group = None
            if adopting:  # the group is closed: every child left but those we had before is an orphan of the job
                orphans.sweep(spare=before)
            if heartbeat is not None:
                heartbeat.stop()
            try:
                # A job deleted under us has no record left to clear.
                with contextlib.suppress(JobNotFound):
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
        with contextlib.suppress(JobNotFound):
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
                with contextlib.suppress(JobNotFound):
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
        self._log_starts = {key: file_size(path) for key, path in self._log_paths.items()}
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
        reason = "DebugHold" if self.debug else "Started"
        count = f"{len(started)} process" + ("" if len(started) == 1 else "es")
        message = "replicas hold their program: kubetrain attach" if self.debug else count
        # One transaction: a reader sees the replicas Running with their job, never under a job still Pending.
        with store.transaction():
            self._record_running(started, now, reason="DebugHold" if self.debug else None)
            store.set_job_phase(
                job_id,
                JobPhase.RUNNING,
                reason=reason,
                message=message,
                condition=Condition("Running", ConditionStatus.TRUE, reason, message, now),
            )
        self._report_status()

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


def _rfc3339(t: float) -> str:
    """Epoch seconds as an RFC 3339 UTC time to the millisecond: 2024-05-01T12:00:03.250Z."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _job_exists(store: JobStore, job_id: str) -> bool:
    try:
        store.get_status(job_id)
    except JobNotFound:
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
        except JobNotFound:
            if _job_exists(store, job_id):
                raise
            # Deleted under us (`kubetrain delete` gave up waiting for us, or before we started): leaving
            # the process group stopped any replica, and there is nothing left to record.
            return 1
    return 0 if phase in (JobPhase.SUCCEEDED, JobPhase.SUSPENDED) else 1


if __name__ == "__main__":
    sys.exit(main())
