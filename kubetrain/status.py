"""The status of a training job, the same model for every backend.

The local backend builds it from its SQLite store and the Kubernetes backend from
Jobs, Pods and their conditions; the CLI only ever sees a :class:`JobStatus`.
The shape follows T9k's ``DeepSpeedJobStatus``: a job phase, the state of every
replica, aggregate counts per role, ``backoffCount`` and conditions.

Only the standard library is imported here: the CLI imports this module on every
invocation, and start-up time is part of the user experience.

Decisions:

- Replica phases mirror Kubernetes pod phases (Pending, Running, Succeeded, Failed,
  Unknown) so the Kubernetes backend maps them one to one, plus one a pod has not:
  ``Cancelled``, a replica kubetrain stopped because its job was cancelled. Counted as
  Failed, a cancel would read as the program's failure in every table and count; a
  suspended replica is ``Pending`` again (reason ``Suspended``), since it starts on
  resume. On Kubernetes a cancel deletes the pods, so ``Cancelled`` is what the cancel
  reports for the replicas it stopped there too. A replica held in Debug
  run mode (up, but not running the user's command) is ``Running`` with reason
  :data:`REASON_DEBUG_HOLD`, as its pod would be; a new phase would only fork every
  count and table for a mode that is rare.
- ``ReplicaStatus.restarts`` counts the times that replica was started again,
  alone or with its group (a container's ``restartCount``: a gang restart restarts
  every replica); ``JobStatus.backoff_count`` counts the restarts held against
  ``backoffLimit`` (DeepSpeedJob's ``backoffCount``: gang restarts, and elastic
  replicas replaced alone). The RESTARTS column is ``backoff_count`` where a
  backend counts it, else the replicas' sum (a Job's pods restarted one by one).
- Conditions are a history, oldest first: the local backend appends one per
  transition, and the current state of a type is its latest entry
  (:meth:`JobStatus.condition`).
- ``to_dict`` uses camelCase keys, as Kubernetes status objects (and
  ``DeepSpeedJobStatus``) do, so ``-o json`` reads the same for every backend.
  Times are epoch seconds (floats): lossless and trivially comparable.
  ``from_dict`` ignores keys it does not know, so a record written by a newer
  kubetrain still loads.
"""

from __future__ import annotations

import dataclasses
import enum
import signal as _signal
import time as _time
from collections.abc import Iterable, Mapping
from typing import Any, Self

#: Reason of a replica that is up in Debug run mode but holds the user's command.
REASON_DEBUG_HOLD = "DebugHold"
#: Reason Kubernetes gives a container killed by the kernel's out-of-memory killer.
REASON_OOM_KILLED = "OOMKilled"
#: Reason of a replica that did not fail itself: the backend stopped it (another replica failed, a
#: cancel, the deadline), as Kubernetes' Job controller deletes the other pods of a failed Job.
REASON_STOPPED = "Stopped"
#: Reason of a replica a cancel stopped (its phase :attr:`ReplicaPhase.CANCELLED`).
REASON_CANCELLED = "Cancelled"
#: Reason of a running elastic job that has lost replicas and runs on with the others; its message says
#: how many run ("1/2 replicas"), and its phase reads "Running (degraded: 1/2 replicas)".
REASON_DEGRADED = "Degraded"
#: Reason of a local job whose supervisor runs while the store has no record of it (the store was moved aside
#: or replaced); its phase reads "Running (not in the store)".
REASON_NOT_IN_STORE = "NotInStore"


class JobPhase(enum.StrEnum):
    """Where a job is in its life, the same on every backend: Pending, Running, then Succeeded, Failed or
    Cancelled (terminal), or Suspended (stopped, kept to resume)."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    SUSPENDED = "Suspended"

    @property
    def is_terminal(self) -> bool:
        """True when the job will never run again (a suspended job may resume)."""
        return self in _TERMINAL_JOB_PHASES


_TERMINAL_JOB_PHASES = frozenset({JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.CANCELLED})


class ReplicaPhase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    #: Stopped by kubetrain because the job was cancelled: not a failure of its own.
    CANCELLED = "Cancelled"
    #: The backend lost track of the replica (its supervisor died, its node is unreachable).
    UNKNOWN = "Unknown"

    @property
    def is_terminal(self) -> bool:
        return self in (ReplicaPhase.SUCCEEDED, ReplicaPhase.FAILED, ReplicaPhase.CANCELLED)


class ConditionStatus(enum.StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class ConditionType(enum.StrEnum):
    """Condition types kubetrain writes. Backends may add others; ``Condition.type`` is a str."""

    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    SUSPENDED = "Suspended"
    DEADLINE_EXCEEDED = "DeadlineExceeded"


def signal_name(signum: int) -> str:
    """``SIGKILL`` for 9; ``signal 64`` for numbers this platform has no name for."""
    try:
        return _signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def describe_exit(exit_code: int | None, signal: int | None, reason: str | None = None) -> str:
    """How a process ended, in a few words: "exit code 3", "killed by SIGKILL (9)", "OOMKilled (137)".

    Returns "" when the process has not ended (neither an exit code nor a signal).
    """
    if reason == REASON_OOM_KILLED:
        # Kubernetes reports an OOM kill as exit code 137 (128 + SIGKILL); locally we see the signal.
        code = exit_code if exit_code is not None else (128 + signal if signal is not None else None)
        return REASON_OOM_KILLED if code is None else f"{REASON_OOM_KILLED} ({code})"
    if reason in (REASON_STOPPED, REASON_CANCELLED):
        how = f"{signal_name(signal)}" if signal is not None else f"exit code {exit_code}"
        what = "stopped" if reason == REASON_STOPPED else "stopped by cancel"
        return what if signal is None and exit_code is None else f"{what} ({how})"
    if signal is not None:
        return f"killed by {signal_name(signal)} ({signal})"
    if exit_code is None:
        return ""
    if exit_code > 128 and exit_code - 128 < 65:
        # Shells and container runtimes report death by signal N as 128+N; say which signal
        # it probably was, but keep the code since the process may have exited with it itself.
        return f"exit code {exit_code} ({signal_name(exit_code - 128)}?)"
    return f"exit code {exit_code}"


def stopped_by_cancel(replicas: Iterable[ReplicaStatus], at: float | None) -> None:
    """Mark the replicas a cancel stopped (those that had not ended): phase Cancelled, reason Cancelled.

    For a backend that reports the cancel itself: on Kubernetes the cancel deletes the pods, so no pod
    will ever say how its replica ended, and Running (or Failed, by the SIGTERM) would misreport it.
    ``at``: when the cancel happened, if known.
    """
    for r in replicas:
        if not r.phase.is_terminal:
            r.phase, r.reason, r.message = ReplicaPhase.CANCELLED, REASON_CANCELLED, "stopped by cancel"
            r.finished_at = at


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _plain_dict(obj: Any) -> dict[str, Any]:
    """A dataclass's fields as camelCase keys; enums become their string values."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, enum.Enum):
            value = value.value
        elif isinstance(value, list):
            value = list(value)
        out[_camel(f.name)] = value
    return out


def _known_fields(cls: type[Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``data`` that name a field of ``cls`` (camelCase or snake_case), keyed by field."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        for key in (_camel(f.name), f.name):
            if key in data:
                out[f.name] = data[key]
                break
    return out


@dataclasses.dataclass(slots=True)
class ReplicaStatus:
    """One replica: one process locally, one pod on Kubernetes. (Slots: a follower of 10,000 replicas holds
    10,000 of these; without a ``__dict__`` each is a third smaller.)"""

    role: str
    index: int
    phase: ReplicaPhase = ReplicaPhase.PENDING
    exit_code: int | None = None
    signal: int | None = None
    restarts: int = 0
    pid: int | None = None
    host: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    reason: str | None = None
    message: str | None = None

    @property
    def name(self) -> str:
        """``worker-1``: how the replica is named in tables, log files and messages."""
        return f"{self.role}-{self.index}"

    def describe_exit(self) -> str:
        """How it ended: "exit code 3", "killed by SIGKILL (9)", "OOMKilled (137)"; "" while running."""
        return describe_exit(self.exit_code, self.signal, self.reason)

    def to_dict(self) -> dict[str, Any]:
        return _plain_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        kwargs = _known_fields(cls, data)
        kwargs["phase"] = ReplicaPhase(kwargs.get("phase", ReplicaPhase.PENDING))
        return cls(**kwargs)


@dataclasses.dataclass
class Condition:
    type: str
    status: ConditionStatus = ConditionStatus.TRUE
    #: CamelCase, machine-readable: "BackoffLimitExceeded", "UserRequested".
    reason: str | None = None
    message: str | None = None
    #: Epoch seconds of the transition.
    time: float = dataclasses.field(default_factory=_time.time)

    def to_dict(self) -> dict[str, Any]:
        return _plain_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        kwargs = _known_fields(cls, data)
        kwargs["status"] = ConditionStatus(kwargs.get("status", ConditionStatus.TRUE))
        return cls(**kwargs)


@dataclasses.dataclass
class RoleCounts:
    """How many replicas of one role are in each phase (DeepSpeedJob's ``aggregate``)."""

    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    unknown: int = 0

    @property
    def total(self) -> int:
        return self.pending + self.running + self.succeeded + self.failed + self.cancelled + self.unknown

    def add(self, phase: ReplicaPhase) -> None:
        attr = phase.value.lower()
        setattr(self, attr, getattr(self, attr) + 1)

    def to_dict(self) -> dict[str, Any]:
        return _plain_dict(self)


@dataclasses.dataclass
class FailureSummary:
    """Why a job failed, in one glance: the first failing replica and what the policy did about it."""

    role: str
    index: int
    exit_code: int | None = None
    signal: int | None = None
    #: The last lines the replica wrote (stdout and stderr interleaved as they were logged).
    last_lines: list[str] = dataclasses.field(default_factory=list)
    #: e.g. "restarted 2/3, gave up", "not retried: exit code 1 is permanent under restartPolicy ExitCode".
    policy_action: str | None = None
    #: Backend reason for the termination, e.g. "OOMKilled", "Error".
    reason: str | None = None
    message: str | None = None

    @property
    def replica(self) -> str:
        return f"{self.role}-{self.index}"

    def headline(self) -> str:
        """One line: "worker-1 exited with code 3 (restarted 2/3, gave up)"."""
        if self.reason == REASON_OOM_KILLED:
            what = f"was {describe_exit(self.exit_code, self.signal, self.reason)}"
        elif self.signal is not None:
            what = f"was killed by {signal_name(self.signal)} ({self.signal})"
        elif self.exit_code is not None:
            what = f"exited with code {self.exit_code}"
        else:
            what = "failed"
            if self.reason:
                what += f" ({self.reason})"
        text = f"{self.replica} {what}"
        if self.policy_action:
            text += f" ({self.policy_action})"
        return text

    def explain(self, job: str | None = None) -> str:
        """The multi-line text the CLI prints when a job fails.

        ``job`` (the job id) names the job in the first line when given.
        """
        head = f"Job {job} failed: " if job else "Failed: "
        lines = [head + self.headline()]
        if self.message:
            lines.append(f"  {self.message}")
        if self.last_lines:
            lines.append(f"  last output of {self.replica}:")
            lines.extend(f"    | {line}" for line in self.last_lines)
        else:
            lines.append(f"  {self.replica} wrote no output")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return _plain_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        kwargs = _known_fields(cls, data)
        kwargs["last_lines"] = [str(line) for line in kwargs.get("last_lines") or []]
        return cls(**kwargs)


@dataclasses.dataclass
class JobStatus:
    job_id: str
    name: str
    backend: str = "local"
    namespace: str | None = None
    phase: JobPhase = JobPhase.PENDING
    replicas: list[ReplicaStatus] = dataclasses.field(default_factory=list)
    #: Restarts of the whole replica group (DeepSpeedJob's ``backoffCount``).
    backoff_count: int = 0
    backoff_limit: int | None = None
    conditions: list[Condition] = dataclasses.field(default_factory=list)
    reason: str | None = None
    message: str | None = None
    created_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    first_failure: FailureSummary | None = None
    placed_by_scheduler: bool = False
    """A scheduler places the replicas (Kubernetes): a Pending replica with no host yet is being scheduled.
    False where a replica starts in place (local processes). Not in `to_dict`: how the backend works, not
    the job's state."""

    def counts(self) -> dict[str, RoleCounts]:
        """Replicas per phase for each role, roles in the order they first appear."""
        out: dict[str, RoleCounts] = {}
        for r in self.replicas:
            out.setdefault(r.role, RoleCounts()).add(r.phase)
        return out

    def replica(self, role: str, index: int) -> ReplicaStatus | None:
        for r in self.replicas:
            if r.role == role and r.index == index:
                return r
        return None

    def condition(self, condition_type: str) -> Condition | None:
        """The latest condition of that type: its current state."""
        for c in reversed(self.conditions):
            if c.type == condition_type:
                return c
        return None

    def total_restarts(self) -> int:
        """The RESTARTS column: the restarts held against backoffLimit where the backend counts them (each
        replica's own count includes them), else the sum of the replicas' restarts."""
        return self.backoff_count or sum(r.restarts for r in self.replicas)

    @property
    def degraded(self) -> bool:
        """A running elastic job that runs with fewer replicas than it has (`REASON_DEGRADED`)."""
        return self.phase is JobPhase.RUNNING and self.reason == REASON_DEGRADED

    def phase_text(self) -> str:
        """The phase as people read it: "Running (degraded: 1/2 replicas)" for a degraded elastic job."""
        if self.degraded:
            return f"{self.phase} (degraded: {self.message or 'replicas lost'})"
        if self.reason == REASON_NOT_IN_STORE:
            return f"{self.phase} (not in the store)"
        return str(self.phase)

    def replicas_column(self) -> str:
        """The REPLICAS column, "2/2": running/total while live, succeeded/total once finished."""
        total = len(self.replicas)
        if self.phase.is_terminal:
            done = sum(1 for r in self.replicas if r.phase is ReplicaPhase.SUCCEEDED)
        else:
            done = sum(1 for r in self.replicas if r.phase is ReplicaPhase.RUNNING)
        return f"{done}/{total}"

    def summary_line(self) -> str:
        """One line for progress output: "demo-x7k2 Failed (BackoffLimitExceeded): worker-1 exited ..."."""
        text = f"{self.job_id} {self.phase_text()}"
        if self.reason and not self.degraded:
            text += f" ({self.reason})"
        if self.first_failure is not None and self.phase is JobPhase.FAILED:
            detail = self.first_failure.headline()
        elif self.message:
            detail = self.message
        else:
            word = "succeeded" if self.phase.is_terminal else "running"
            detail = f"{self.replicas_column()} replicas {word}"
            if self.total_restarts():
                detail += f", {self.total_restarts()} restarts"
        return f"{text}: {detail}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (camelCase keys). ``counts`` is included for readers; from_dict recomputes it."""
        out = _plain_dict(self)
        del out["placedByScheduler"]
        out["replicas"] = [r.to_dict() for r in self.replicas]
        out["conditions"] = [c.to_dict() for c in self.conditions]
        out["firstFailure"] = self.first_failure.to_dict() if self.first_failure else None
        out["counts"] = {role: c.to_dict() for role, c in self.counts().items()}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        kwargs = _known_fields(cls, data)
        kwargs["phase"] = JobPhase(kwargs.get("phase", JobPhase.PENDING))
        kwargs["replicas"] = [ReplicaStatus.from_dict(r) for r in kwargs.get("replicas") or []]
        kwargs["conditions"] = [Condition.from_dict(c) for c in kwargs.get("conditions") or []]
        failure = kwargs.get("first_failure")
        kwargs["first_failure"] = FailureSummary.from_dict(failure) if failure else None
        return cls(**kwargs)
