"""A local job of trials (`spec.trials`): independent runs, at most `parallelism` at a time, each retried alone.

As a Kubernetes Indexed Job with completions and parallelism runs them: each replica is a run of its own,
so a failed one is started again alone (its siblings in the gang are not its business), and the job
succeeds once every index has.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from ...status import Condition, ConditionStatus, FailureSummary, JobPhase, ReplicaPhase
from .processes import ExitEvent, ProcessGroup
from .supervisor_core import MAX_WAIT, REQUEST_POLL, SupervisorCore, file_size


class TrialSupervision(SupervisorCore):
    """The watch of a job of trials (`LaunchRecord.parallelism`)."""

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
            self._log_starts[spec.key] = file_size(spec.log_path)
        for key in keys:
            self._exits.pop(self._replica_of(procs[key][0]), None)
        started = group.start(specs) if first else group.add(specs)
        now = time.time()
        if first:
            self._report_preload(group, now)
        # One transaction: a reader sees the first runs Running with their job, never under a job still Pending.
        with self.store.transaction():
            self._record_running(started, now, reason=None, message=None)
            if first:
                message = f"{done}/{total} runs succeeded, {len(keys)} running"
                self.store.set_job_phase(self.job_id, JobPhase.RUNNING, reason="Started", message=message,
                                         condition=Condition("Running", ConditionStatus.TRUE, "Started", message,
                                                             now))
        if first:
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
