"""``status`` and ``describe``: a job's status explained (why replicas are Pending, what the failed replica
said last), and :class:`Description`, what ``kubetrain status`` and ``kubetrain describe`` print."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...status import JobPhase, JobStatus
from .client.errors import ApiError
from .client.kube import Kube
from .diagnose import Diagnosis
from .logs import LogTarget, read_logs
from .status_map import Pod, PodIndex, RoleInfo, replica_pod
from .workload import JSON, meta

#: Lines of a failed replica's output shown with the failure.
FAILURE_TAIL = 10


@dataclass
class Description:
    """``describe``: the status, why replicas are Pending, the objects and pods behind the job."""

    status: JobStatus
    diagnoses: list[Diagnosis]
    objects: list[dict[str, str]]
    pods: dict[str, dict[str, str | None]]
    spec: dict[str, Any] | None = None
    """The root workload object as submitted (without its status and managedFields)."""

    @classmethod
    def of(cls, status: JobStatus, diagnoses: Sequence[Diagnosis], workloads: Sequence[JSON],
           grouped: PodIndex, spec: dict[str, Any] | None = None) -> Description:
        objects = [{"kind": str(o.get("kind")), "name": meta(o).get("name", ""), "apiVersion": str(o.get("apiVersion"))}
                   for o in workloads]
        pods = {f"{r}-{i}": {"name": meta(p).get("name"), "node": (p.get("spec") or {}).get("nodeName"),
                             "phase": (p.get("status") or {}).get("phase")}
                for (r, i), p in sorted(grouped.current.items())}
        return cls(status, list(diagnoses), objects, pods, spec)

    def status_lines(self, wide: bool = False) -> list[str]:
        """What ``kubetrain status`` prints: the summary, the replicas (`status_text.replica_lines`), a line per
        Pending cause with its hint, and the failure with the failed replica's last lines."""
        from ...status_text import replica_lines

        s = self.status
        lines = [s.summary_line(), *replica_lines(s, wide)]
        lines += [f"  {d.line()}" for d in self.diagnoses]
        if s.first_failure is not None and s.phase is JobPhase.FAILED:
            lines += s.first_failure.explain(s.job_id).splitlines()
        return lines

    def text(self) -> str:
        from ...status_text import format_describe

        lines = [format_describe(self.status)]
        if self.diagnoses:
            lines.append("Pending:")
            lines += [f"  {d.line()}" for d in self.diagnoses]
        lines.append("Objects:")
        lines += [f"  {o['kind']}/{o['name']} ({o['apiVersion']})" for o in self.objects] or ["  <none>"]
        lines.append("Pods:")
        if self.pods:
            width = max(len(k) for k in self.pods) + 2
            for replica, pod in self.pods.items():
                lines.append(f"  {replica.ljust(width)}{pod['name']}  node={pod.get('node') or '<none>'}")
        else:
            lines.append("  <none>")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        data = self.status.to_dict()
        data["diagnosis"] = [d.to_dict() for d in self.diagnoses]
        data["objects"] = list(self.objects)
        data["pods"] = dict(self.pods)
        return data


def pending_reason(status: JobStatus, diagnoses: Sequence[Diagnosis]) -> JobStatus:
    """A live job held by Pending causes: the first cause is its reason, the causes' messages its message."""
    if not diagnoses or status.phase.is_terminal:
        return status
    status.reason = diagnoses[0].cause
    if len(diagnoses) == 1:
        status.message = diagnoses[0].message
    else:
        status.message = "; ".join(f"{d.cause}: {d.message}" for d in diagnoses)
    return status


def main_container(pod: Mapping[str, Any]) -> str | None:
    containers = (pod.get("spec") or {}).get("containers") or []
    return containers[0].get("name") if containers else None


def last_lines(kube: Kube, status: JobStatus, pods: Sequence[Pod], roles: Sequence[RoleInfo]) -> list[str]:
    """The failed replica's last lines (one request): what it said before it died. ``roles``: the job's, which
    place its pods (a JobSet's pod's index counts the Jobs of its replicatedJob before its own)."""
    failure = status.first_failure
    if failure is None or not status.namespace:
        return []
    pod = replica_pod(pods, failure.role, failure.index, roles)
    if pod is None:
        return []
    try:
        records = list(read_logs(kube, status.namespace,
                                 [LogTarget(failure.replica, meta(pod)["name"], main_container(pod))],
                                 tail=FAILURE_TAIL))
    except ApiError:
        return []
    return [r.text for r in records]


__all__ = ["FAILURE_TAIL", "Description", "last_lines", "main_container", "pending_reason"]
