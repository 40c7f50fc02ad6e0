"""What the pages show, as plain data: one model for the server-rendered HTML and for the JSON that
server-sent events deliver, so a page looks the same on first load and after any number of updates.

Built only from the status model (`kubetrain.status`) and the backends' `describe()`: every backend's
job reads the same here, as it does on the terminal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..status import JobPhase, JobStatus, ReplicaPhase, ReplicaStatus
from ..terminal import sanitize


@dataclass(frozen=True)
class JobRow:
    """One line of the jobs table."""

    backend: str
    id: str
    name: str
    namespace: str | None
    framework: str
    phase: str
    ready: int
    total: int
    restarts: int
    created_at: float | None
    reason: str | None
    started_at: float | None = None
    finished_at: float | None = None

    @property
    def href(self) -> str:
        return job_href(self.backend, self.id)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["href"] = self.href
        return data


def job_href(backend: str, job_id: str) -> str:
    from urllib.parse import quote

    return f"/jobs/{quote(backend, safe='')}/{quote(job_id, safe='')}"


def ready_count(status: JobStatus) -> int:
    """The REPLICAS column's numerator: running while live, succeeded once finished (as `kubetrain list`)."""
    done, _, _ = status.replicas_column().partition("/")
    return int(done)


def job_row(status: JobStatus, framework: str) -> JobRow:
    return JobRow(
        backend=status.backend,
        id=status.job_id,
        name=status.name,
        namespace=status.namespace,
        framework=framework,
        phase=status.phase.value,
        ready=ready_count(status),
        total=len(status.replicas),
        restarts=status.total_restarts(),
        created_at=status.created_at,
        reason=status.reason,
        started_at=status.started_at,
        finished_at=status.finished_at,
    )


ACTIONS = ("cancel", "suspend", "resume", "delete")


def allowed_actions(phase: JobPhase) -> list[str]:
    """The actions that mean something for a job in `phase` (the others are shown disabled)."""
    out = []
    if not phase.is_terminal:
        out.append("cancel")
    if phase in (JobPhase.PENDING, JobPhase.RUNNING):
        out.append("suspend")
    if phase is JobPhase.SUSPENDED:
        out.append("resume")
    out.append("delete")
    return out


@dataclass(frozen=True)
class JobDetail:
    """The job page: phase and conditions, the replica grid, Pending causes with hints, the failure."""

    row: JobRow
    message: str | None
    conditions: list[dict[str, Any]]
    replicas: list[dict[str, Any]]
    pending: list[dict[str, Any]]
    failure: dict[str, Any] | None
    actions: list[str]
    roles: dict[str, int] = field(default_factory=dict)
    """Role → replica count (the log filters' choices)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "row": self.row.to_json(),
            "message": self.message,
            "conditions": self.conditions,
            "replicas": self.replicas,
            "pending": self.pending,
            "failure": self.failure,
            "actions": self.actions,
        }


def replica_reason(replica: ReplicaStatus) -> str | None:
    """A replica's reason, as Kubernetes words a container's end when the backend gave none: "Error" for one
    that failed of itself (beside a rank "Stopped" because another failed, the crashed one said nothing),
    "Completed" for one that succeeded."""
    if replica.reason:
        return replica.reason
    if replica.phase is ReplicaPhase.FAILED and (replica.exit_code or replica.signal is not None):
        return "Error"
    if replica.phase is ReplicaPhase.SUCCEEDED:
        return "Completed"
    return None


def job_detail(status: JobStatus, framework: str, diagnoses: Sequence[Mapping[str, Any]] = ()) -> JobDetail:
    """The job page's data from a status and the backend's Pending causes (`Diagnosis.to_dict()`)."""
    s = status
    failure = None
    if s.first_failure is not None:
        f = s.first_failure
        failure = {
            "replica": f.replica,
            "headline": f.headline(),
            "exit": f.exit_code,
            "signal": f.signal,
            "message": f.message,
            "lastLines": [sanitize(line) for line in f.last_lines],  # a replica's output, as in the log view
            "final": s.phase is JobPhase.FAILED,
        }
    roles: dict[str, int] = {}
    for r in s.replicas:
        roles[r.role] = max(roles.get(r.role, 0), r.index + 1)
    return JobDetail(
        row=job_row(s, framework),
        message=s.message,
        conditions=[
            {"type": c.type, "status": c.status.value, "reason": c.reason, "message": c.message, "time": c.time}
            for c in s.conditions
        ],
        replicas=[
            {
                "role": r.role,
                "index": r.index,
                "phase": r.phase.value,
                "exit": r.describe_exit(),
                "restarts": r.restarts,
                "reason": replica_reason(r),
            }
            for r in s.replicas
        ],
        pending=[
            {
                "cause": str(d.get("cause", "")),
                "message": str(d.get("message", "")),
                "hint": str(d.get("hint", "")),
                "replicas": [str(x) for x in d.get("replicas", [])],
            }
            for d in diagnoses
        ],
        failure=failure,
        actions=allowed_actions(s.phase),
        roles=roles,
    )


def framework_of_spec(spec: Mapping[str, Any] | None) -> str:
    """A TrainJob document's framework ("" when unknown)."""
    inner = (spec or {}).get("spec")
    return str(inner.get("framework") or "") if isinstance(inner, Mapping) else ""


def spec_text(spec: Any) -> str:
    """The job's spec as people read it: indented JSON (no third-party serializer needed)."""
    return json.dumps(spec, indent=2, sort_keys=False, default=str)


__all__ = [
    "ACTIONS",
    "JobDetail",
    "JobRow",
    "allowed_actions",
    "framework_of_spec",
    "job_detail",
    "job_href",
    "job_row",
    "ready_count",
    "replica_reason",
    "spec_text",
]
