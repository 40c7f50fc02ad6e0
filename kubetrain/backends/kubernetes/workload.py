"""What every flavor's workload objects share: metadata accessors, conditions, roles, the engine's verdict.

Plain functions and records over the objects as dicts, no I/O: the flavors (:mod:`.flavors`) read their
own workloads with them, and :mod:`.status_map` turns the result into the shared status model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ...contract.labels import KUEUE_QUEUE_LABEL, PAUSED_ANNOTATION, ROLE_LABEL
from ...contract.logs import parse_time
from ...status import Condition, ConditionStatus, JobPhase
from .client.resources import Resource

JSON = dict[str, Any]


def meta(obj: Mapping[str, Any]) -> JSON:
    return dict(obj.get("metadata") or {})


def labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(meta(obj).get("labels") or {})


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(meta(obj).get("annotations") or {})


def api_group(obj: Mapping[str, Any]) -> str:
    """The API group of an object (``""`` for the core group)."""
    return str(obj.get("apiVersion") or "").rpartition("/")[0]


def is_root(obj: Mapping[str, Any]) -> bool:
    """A workload object that no other object owns (for the job flavor: the root Job)."""
    return not meta(obj).get("ownerReferences")


def conditions_of(obj: Mapping[str, Any]) -> list[JSON]:
    return [c for c in (obj.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]


def true_condition(obj: Mapping[str, Any], *types: str) -> JSON | None:
    for c in conditions_of(obj):
        if c.get("type") in types and c.get("status") == "True":
            return c
    return None


def cond_time(c: Mapping[str, Any]) -> float | None:
    return parse_time(c.get("lastTransitionTime") or c.get("lastUpdateTime") or c.get("lastProbeTime"))


def object_conditions(obj: Mapping[str, Any], created: float | None, prefix: str = "") -> list[Condition]:
    """An object's ``status.conditions`` in the status model (``prefix`` before each message)."""
    out: list[Condition] = []
    for c in conditions_of(obj):
        try:
            status = ConditionStatus(c.get("status") or "Unknown")
        except ValueError:
            status = ConditionStatus.UNKNOWN
        t = cond_time(c)
        message = c.get("message")
        out.append(Condition(str(c.get("type")), status, c.get("reason"),
                             (prefix + message) if message and prefix else message,
                             t if t is not None else created or 0.0))
    return out


# --------------------------------------------------------------------------------------------- roles


@dataclass(frozen=True)
class RoleInfo:
    role: str
    replicas: int
    #: Pods per replicated Job (jobset): the stride of ``jobset.sigs.k8s.io/job-index``.
    completions: int = 1
    container: str | None = None
    #: A label (key, value) that marks this role's pods when kubetrain's role label is not on them: a document
    #: submitted as written, whose pods carry only what its controller puts there (``training.kubeflow.org/
    #: replica-type: worker``).
    pod_label: tuple[str, str] | None = None


def template_role(template: Mapping[str, Any], default: str) -> str:
    return labels(template).get(ROLE_LABEL) or default


def first_container(template: Mapping[str, Any]) -> str | None:
    containers = ((template.get("spec") or {}).get("containers")) or []
    return containers[0].get("name") if containers else None


def indexes(text: str | None) -> set[int]:
    """``"0-2,5"`` (a Job's completedIndexes/failedIndexes) → {0, 1, 2, 5}."""
    out: set[int] = set()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


# --------------------------------------------------------------------------------------------- the engine


@dataclass
class EngineState:
    """What the engine says about the job as a whole."""

    phase: JobPhase
    reason: str | None = None
    message: str | None = None
    finished_at: float | None = None
    backoff_count: int = 0
    backoff_limit: int | None = None
    policy_action: str | None = None


def suspended_phase(root: Mapping[str, Any]) -> EngineState:
    """A suspended workload: paused by the user, or held by Kueue until it is admitted."""
    if labels(root).get(KUEUE_QUEUE_LABEL) and annotations_of(root).get(PAUSED_ANNOTATION) != "true":
        queue = labels(root)[KUEUE_QUEUE_LABEL]
        return EngineState(JobPhase.PENDING, "WaitingForAdmission", f"waiting for Kueue to admit it (queue {queue})")
    return EngineState(JobPhase.SUSPENDED, "Suspended", "suspended: kubetrain resume to start it")


class FoundJob(Protocol):
    """A job found on the cluster, as a flavor acts on it (suspend, scale): :class:`.lookup.Located` is one.
    A protocol so that the flavors need not import the lookup, which reads the flavors."""

    @property
    def name(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    @property
    def resource(self) -> Resource: ...

    @property
    def workloads(self) -> list[JSON]:
        """Its workload objects, the root first."""

    @property
    def root(self) -> JSON: ...


def paused_patch(suspend: bool) -> JSON:
    """The merge patch that marks (or unmarks) a root as paused by kubetrain."""
    return {"metadata": {"annotations": {PAUSED_ANNOTATION: "true" if suspend else None}}}


__all__ = [
    "JSON",
    "EngineState",
    "FoundJob",
    "RoleInfo",
    "annotations_of",
    "api_group",
    "cond_time",
    "conditions_of",
    "first_container",
    "indexes",
    "is_root",
    "labels",
    "meta",
    "object_conditions",
    "parse_time",
    "paused_patch",
    "suspended_phase",
    "template_role",
    "true_condition",
]
