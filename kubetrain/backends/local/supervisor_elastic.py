"""An elastic local job: a lost replica is replaced alone, the survivors carry on, and its size may change.

Its replicas are torchrun agents of one rendezvous: when one is lost the survivors' agents restart their
workers and meet again without it (torchrun's own elastic behaviour), so the job goes on while at least
minReplicas live, as a Kubernetes elastic job does. A gang restart would throw that away, so this watch never
restarts the group: it starts the lost replica again after the back-off, within backoffLimit, and starts or
stops the difference when the job is scaled.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping

from ...status import REASON_DEGRADED, Condition, ConditionStatus, FailureSummary, JobPhase, ReplicaPhase, describe_exit
from .launch import LaunchRecord
from .processes import ExitEvent, ProcessGroup
from .supervisor_core import MAX_WAIT, REQUEST_POLL, SupervisorCore, file_size


class ElasticSupervision(SupervisorCore):
    """The watch of an elastic job (`LaunchRecord.elastic`)."""

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
        self._log_starts[key] = file_size(spec.log_path)
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
            self._log_starts[spec.key] = file_size(spec.log_path)
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
