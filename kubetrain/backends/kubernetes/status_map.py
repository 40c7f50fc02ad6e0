"""Workload objects + their pods → the shared :class:`~kubetrain.status.JobStatus`. Pure functions, no I/O.

The job's phase is the engine's word (Job/JobSet/Kubeflow conditions, the Volcano state), never a guess
from pods: a controller that has not decided yet leaves the job Running. The replicas come from the
pods: the newest pod of each (role, index) is the replica; older pods of the same index are earlier
attempts (restarts). Replicas without a pod (not created yet, cleaned up) are still listed, from the
replica counts in the workload's spec, so REPLICAS always says ``n/total``.

What differs per engine (roles, the engine's verdict, conditions) is the flavor's (:mod:`.flavors`),
found from the workload object itself (:func:`~.flavors.flavor_of`).
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...contract.labels import ELASTIC_ANNOTATION, INDEX_KEYS, JOB_LABEL, KUEUE_QUEUE_LABEL, ROLE_LABEL
from ...status import (
    REASON_DEGRADED,
    Condition,
    ConditionStatus,
    FailureSummary,
    JobPhase,
    JobStatus,
    ReplicaPhase,
    ReplicaStatus,
    stopped_by_cancel,
)
from .essentials import KeptPod, Pod, name_and_version, pod_annotations, pod_labels, remembered
from .flavors import Flavor, flavor_of
from .workload import (
    JSON,
    EngineState,
    RoleInfo,
    annotations_of,
    cond_time,
    conditions_of,
    is_root,
    labels,
    meta,
    object_conditions,
    parse_time,
    true_condition,
)

JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOBSET_RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
JOBSET_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"

_TRAILING_INDEX = re.compile(r"-(\d+)$")


def roles_of(flavor: Flavor | None, workloads: Sequence[Mapping[str, Any]]) -> list[RoleInfo]:
    """Roles and their replica counts, in the order the spec lists them ([] for an unknown workload)."""
    return flavor.roles(workloads) if flavor is not None and workloads else []


# --------------------------------------------------------------------------------------------- pods


def pod_index(pod: Mapping[str, Any], role: RoleInfo | None = None) -> int | None:
    """The replica index of a pod, from the labels kubetrain or the engine put on it."""
    lab, ann = pod_labels(pod), pod_annotations(pod)
    for key in INDEX_KEYS:
        raw = lab.get(key, ann.get(key))
        if raw is not None and str(raw).isdigit():
            index = int(raw)
            if key == "batch.kubernetes.io/job-completion-index" and role is not None:
                job_index = lab.get(JOBSET_JOB_INDEX)
                if job_index is not None and job_index.isdigit():
                    index += int(job_index) * role.completions
            return index
    m = _TRAILING_INDEX.search(meta(pod).get("name", ""))
    return int(m.group(1)) if m else None


def _pod_sort_key(pod: Mapping[str, Any]) -> tuple[int, float, int, float, str]:
    lab = pod_labels(pod)
    attempt = int(lab.get(JOBSET_RESTART_ATTEMPT, "0")) if lab.get(JOBSET_RESTART_ATTEMPT, "0").isdigit() else 0
    phase = (pod.get("status") or {}).get("phase")
    live = 0 if phase in ("Succeeded", "Failed") else 1
    created = parse_time(meta(pod).get("creationTimestamp")) or 0.0
    main = main_container_status(pod)
    finished = parse_time(((main or {}).get("state") or {}).get("terminated", {}).get("finishedAt")) or 0.0
    return attempt, created, live, finished, meta(pod).get("name", "")


def main_container_status(pod: Mapping[str, Any], container: str | None = None) -> JSON | None:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    if container is None:
        containers = (pod.get("spec") or {}).get("containers") or []
        container = containers[0].get("name") if containers else None
    for cs in statuses:
        if cs.get("name") == container:
            return dict(cs)
    return dict(statuses[0]) if statuses else None


def pod_scheduling_problem(pod: Mapping[str, Any]) -> JSON | None:
    """The PodScheduled=False condition, if the scheduler could not place the pod."""
    for c in conditions_of(pod):
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return c
    return None


def replica_from_pod(role: str, index: int, pod: Mapping[str, Any], earlier_failures: int = 0,
                     container: str | None = None) -> ReplicaStatus:
    status = pod.get("status") or {}
    raw_phase = status.get("phase") or "Pending"
    try:
        phase = ReplicaPhase(raw_phase)
    except ValueError:
        phase = ReplicaPhase.UNKNOWN
    cs = main_container_status(pod, container) or {}
    state = cs.get("state") or {}
    last = (cs.get("lastState") or {}).get("terminated") or {}
    r = ReplicaStatus(role=role, index=index, phase=phase)
    r.restarts = int(cs.get("restartCount") or 0) + earlier_failures
    r.host = (pod.get("spec") or {}).get("nodeName")
    r.started_at = _shared_time(status.get("startTime"))
    term = state.get("terminated")
    waiting = state.get("waiting")
    if term:
        r.exit_code = term.get("exitCode")
        r.reason = term.get("reason")
        r.message = term.get("message") or status.get("message")
        r.finished_at = parse_time(term.get("finishedAt"))
    if phase is ReplicaPhase.FAILED and not term:
        r.reason = status.get("reason") or "Failed"
        r.message = status.get("message")
        r.finished_at = _latest_time(pod)
    elif phase is ReplicaPhase.PENDING:
        unscheduled = pod_scheduling_problem(pod)
        init_waiting = next((((s.get("state") or {}).get("waiting")) for s in status.get("initContainerStatuses") or []
                             if (s.get("state") or {}).get("waiting")), None)
        if unscheduled:
            r.reason, r.message = unscheduled.get("reason") or "Unschedulable", unscheduled.get("message")
        elif waiting or init_waiting:
            w = waiting or init_waiting or {}
            r.reason, r.message = w.get("reason"), w.get("message")
    elif phase is ReplicaPhase.RUNNING and waiting:
        r.reason = waiting.get("reason")
        detail = f"last exit code {last.get('exitCode')}" if last.get("exitCode") is not None else None
        r.message = waiting.get("message") or detail
    if phase is ReplicaPhase.FAILED and r.exit_code is None and last.get("exitCode") is not None:
        r.exit_code = last.get("exitCode")
    if meta(pod).get("deletionTimestamp") and not phase.is_terminal:
        r.reason = r.reason or "Terminating"
    return r


_TIMES: dict[str, float | None] = {}
"""A pod's start time as text → its float, shared (see `_shared_time`)."""


def _shared_time(value: Any) -> float | None:
    """`parse_time`, the same float for the same text: the replicas of a big job start in the same few seconds,
    and a float of their own each was 24 bytes a replica held by the statuses a look keeps. Bounded as
    `essentials`' tables are (`essentials.remembered`)."""
    if not isinstance(value, str):
        return None
    time_: float | None = remembered(_TIMES, value, lambda: parse_time(value))
    return time_


def _latest_time(pod: Mapping[str, Any]) -> float | None:
    times = [cond_time(c) for c in conditions_of(pod)]
    known = [t for t in times if t is not None]
    return max(known) if known else None


@dataclass
class PodIndex:
    """Pods grouped by replica: the newest is the replica, the others are earlier attempts (a replica without
    any has no entry in ``earlier``: 10,000 empty lists weigh 1 MB)."""

    current: dict[tuple[str, int], Pod]
    earlier: dict[tuple[str, int], list[Pod]]


def pod_role(pod: Mapping[str, Any], roles: Sequence[RoleInfo]) -> str | None:
    """The role a pod is a replica of: kubetrain's role label, a JobSet's replicatedJob, the label a role's
    controller marks its pods with (a document submitted as written), or the only role there is."""
    lab = pod_labels(pod)
    role = lab.get(ROLE_LABEL) or lab.get(JOBSET_REPLICATED_JOB)
    if role is not None:
        return role
    for info in roles:
        if info.pod_label is not None and lab.get(info.pod_label[0]) == info.pod_label[1]:
            return info.role
    if len(roles) == 1 and roles[0].pod_label is None and not lab.get(JOB_LABEL):
        return roles[0].role
    return None


_Placed = tuple[str, int] | None
"""Where a pod stands: (role, replica index), or None (not the job's). Its order among the replica's pods is worked
out when a replica has several (rarely: a retry, a gang restart), not kept for each of 10,000 pods."""


def _place(pod: Mapping[str, Any], roles: Sequence[RoleInfo], by_role: Mapping[str, RoleInfo]) -> _Placed:
    role = pod_role(pod, roles)
    if role is None:
        return None
    info = by_role.get(role)
    # A role of one replica: its pod is replica 0, whatever its (generated) name says.
    index = 0 if info is not None and info.replicas == 1 else pod_index(pod, info)
    if index is None:
        return None
    return role, index


class PodCache:
    """What was worked out per pod at the last look at a job, kept for the next: a follower of 10,000 replicas
    looks again at every change, and one change is one pod. A pod's (name, resourceVersion) names its content
    (the API server gives every change a new version), so what is worked out from it holds until its version
    moves: a look finds the pods that changed (one dict lookup per pod) and regroups only their replicas.
    Pods without a version (built by hand) make the look a fresh one. Not thread-safe: one per reader of a
    watch (its :class:`~.follow.JobState`, which serialises its looks).

    What it hands out is shared with later looks (a :class:`PodIndex`'s dicts are new at each look, the pods
    and replica statuses in them are not): read them, never change them."""

    def __init__(self) -> None:
        self._reset(None)

    def _reset(self, roles: list[RoleInfo] | None) -> None:
        self._roles = roles
        #: pod name → (its resourceVersion, where it stands, the pod), and once its replica's status was worked out
        #: from it, (..., earlier failures, container, the status): one tuple a pod, not two (at 10,000 replicas
        #: a second tuple and its dict were 1.3 MB)
        self._placed: dict[str, tuple[Any, ...]] = {}
        #: replica → the name of its pod, or names of its pods (a tuple) when it has several: almost always one,
        #: and 10,000 sets weigh 2 MB, 10,000 tuples of one 0.5 MB
        self._members: dict[tuple[str, int], str | tuple[str, ...]] = {}
        self._index = PodIndex({}, {})

    def group(self, pods: Iterable[Mapping[str, Any]], roles: Sequence[RoleInfo]) -> PodIndex:
        """The pods (one a name: a watch's snapshot) by replica."""
        if self._roles != list(roles):  # a scale, a role's count: where pods stand may differ
            self._reset(list(roles))
        pods = pods if isinstance(pods, list) else list(pods)  # a watch's snapshot is a list already
        if any(not all(name_and_version(p)) for p in pods):
            self._reset(list(roles))
            return group_pods(pods, roles)
        by_role = {r.role: r for r in roles}
        # The table is changed in place, not made again key by key at each look: a dict of 10,000 grown from
        # empty allocates and frees each of its smaller tables on the way (C heap the process keeps), and so would
        # a copy of it at each look.
        placed = self._placed
        touched: list[tuple[str, int]] = []  # a key may come twice: regrouping it again changes nothing
        for pod in pods:
            name, version = name_and_version(pod)
            known = placed.get(name)
            if known is not None and known[0] == version:
                continue
            # A new version whose labels and annotations are the last one's (the watch shares what did not change:
            # a pod starting, running, ending) stands where it stood: its place is kept, not worked out again (a
            # new (role, index) and index a changed pod, 0.8 MB while 10,000 pods start).
            where = known[1] if known is not None and _same_place(known[2], pod) else _place(pod, roles, by_role)
            # The pod itself, not a copy: what is handed out is read, never changed (see above).
            placed[name] = (version, where, pod)
            if known is not None and known[1] is not None:
                touched.append(known[1])
                self._leave(known[1], name)
            if where is not None:
                touched.append(where)
                held = self._names(where)
                self._members[where] = (*held, name) if held else name
        # Every pod of this look is in the table now: one more there is a pod gone since the last look (rarely).
        if len(placed) > len(pods):
            here = {name_and_version(p)[0] for p in pods}
            for name in [n for n in placed if n not in here]:
                where = placed.pop(name)[1]
                if where is not None:
                    touched.append(where)
                    self._leave(where, name)
        if touched:
            current, earlier = dict(self._index.current), dict(self._index.earlier)
            for key in touched:
                members = [placed[n] for n in self._names(key)]
                if len(members) > 1:
                    members.sort(key=lambda p: _pod_sort_key(p[2]))
                if members:
                    current[key] = members[-1][2]
                    if len(members) > 1:
                        earlier[key] = [p[2] for p in members[:-1]]
                    else:
                        earlier.pop(key, None)
                else:
                    current.pop(key, None)
                    earlier.pop(key, None)
                    self._members.pop(key, None)
            self._index = PodIndex(current, earlier)
        return self._index

    def _names(self, key: tuple[str, int]) -> tuple[str, ...]:
        held = self._members.get(key, ())
        return (held,) if isinstance(held, str) else held

    def _leave(self, key: tuple[str, int], name: str) -> None:
        left = tuple(n for n in self._names(key) if n != name)
        self._members[key] = left[0] if len(left) == 1 else left

    def replica(self, role: str, index: int, pod: Mapping[str, Any], earlier_failures: int,
                container: str | None) -> ReplicaStatus:
        """:func:`replica_from_pod`, the last look's when the replica's pod has not changed (kept with the pod's
        place: a pod's version names its content)."""
        name, version = name_and_version(pod)
        placed = self._placed.get(str(name or ""))
        if placed is None or not version or placed[0] != version or placed[1] != (role, index):
            return replica_from_pod(role, index, pod, earlier_failures, container)  # not a pod this look placed
        if len(placed) == 6 and placed[3] == earlier_failures and placed[4] == container:
            return placed[5]
        # The index kept is the pod's place's, not a new int (10,000 of them: 0.3 MB).
        replica = replica_from_pod(role, placed[1][1], pod, earlier_failures, container)
        self._placed[name] = (*placed[:3], earlier_failures, container, replica)
        return replica


def _same_place(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether two versions of a pod (same name) stand at the same replica for certain: what `_place` reads of
    them (labels, annotations) is the same object."""
    if isinstance(before, KeptPod) and isinstance(after, KeptPod):
        return (before.labels is after.labels and before.own_keys == after.own_keys and before.own == after.own
                and before.annotations is after.annotations)
    a, b = meta_of(before), meta_of(after)
    return a.get("labels") is b.get("labels") and a.get("annotations") is b.get("annotations")


def meta_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's metadata, read only (:func:`meta` copies it, which 10,000 pods a look cannot afford)."""
    return obj.get("metadata") or {}


def group_pods(pods: Iterable[Mapping[str, Any]], roles: Sequence[RoleInfo], cache: PodCache | None = None) -> PodIndex:
    """Pods by replica (``cache``: reuse what the last look at these pods worked out)."""
    if cache is not None:
        return cache.group(pods, roles)
    by_role = {r.role: r for r in roles}
    groups: dict[tuple[str, int], list[Pod]] = {}
    for pod in pods:
        where = _place(pod, roles, by_role)
        if where is None:
            continue
        # A kept pod is read only, as it is (its copy would make its metadata: 10,000 dicts at once).
        groups.setdefault((where[0], where[1]), []).append(pod if isinstance(pod, KeptPod) else dict(pod))
    current: dict[tuple[str, int], Pod] = {}
    earlier: dict[tuple[str, int], list[Pod]] = {}
    for key, group in groups.items():
        if len(group) > 1:  # a sort of one still works out its key: two time parses a pod, a fifth of a status
            group.sort(key=_pod_sort_key)
            earlier[key] = group[:-1]
        current[key] = group[-1]
    return PodIndex(current, earlier)


def replica_pod(pods: Iterable[Mapping[str, Any]], role: str, index: int,
                roles: Sequence[RoleInfo] = ()) -> Mapping[str, Any] | None:
    """The pod that is one replica now (the newest of its pods, as :func:`group_pods` would have it), found
    without grouping every pod: a failure among 10,000 replicas reads one pod's log."""
    by_role = {r.role: r for r in roles}
    mine = [p for p in pods if _place(p, roles, by_role) == (role, index)]
    return sorted(mine, key=_pod_sort_key)[-1] if mine else None


# --------------------------------------------------------------------------------------------- the job


def engine_state(flavor: Flavor | None, workloads: Sequence[Mapping[str, Any]]) -> EngineState:
    """What the engine says of the job (Running, undecided, for a workload no flavor knows)."""
    return flavor.engine_state(workloads) if flavor is not None else EngineState(JobPhase.RUNNING)


def _conditions(flavor: Flavor | None, workloads: Sequence[Mapping[str, Any]], created: float | None) -> list[
        Condition]:
    out: list[Condition] = []
    if created is not None:
        out.append(Condition("Created", ConditionStatus.TRUE, None, None, created))
    if flavor is not None:
        out += flavor.conditions(workloads, created)
    else:
        out += [c for obj in workloads for c in object_conditions(obj, created)]
    out.sort(key=lambda c: c.time)
    return out


def job_status(
    workloads: Sequence[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    *,
    job_id: str | None = None,
    namespace: str | None = None,
    deleted: bool = False,
    flavor: Flavor | None = None,
    grouped: PodIndex | None = None,
    cache: PodCache | None = None,
) -> JobStatus:
    """The status of one job from its workload object(s) and pods.

    ``deleted``: the root is gone (seen deleted by a watch): the job was cancelled. ``flavor``: the job's, when
    the caller knows it (a job located, submitted or watched); else read from its first workload object.
    ``grouped``: the pods already grouped by replica (:func:`group_pods` of these pods and the job's roles), which
    saves grouping them again; ``cache``: what an earlier look at these pods worked out (:class:`PodCache`).
    """
    if not workloads:
        raise ValueError("a job status needs its workload object")
    flavor = flavor if flavor is not None else flavor_of(workloads[0])
    ordered = flavor.order(workloads) if flavor is not None else [dict(w) for w in workloads]
    root = ordered[0]
    rmeta = meta(root)
    job_id = job_id or labels(root).get(JOB_LABEL) or rmeta.get("name", "")
    roles = roles_of(flavor, ordered)
    if grouped is None:
        grouped = group_pods(pods, roles, cache)
    engine = engine_state(flavor, ordered)
    created = parse_time(rmeta.get("creationTimestamp"))

    if deleted or rmeta.get("deletionTimestamp"):
        engine = EngineState(JobPhase.CANCELLED, "Deleted", "the job was deleted", time.time(),
                             engine.backoff_count, engine.backoff_limit)

    completed, failed_idx = flavor.finished_indexes(ordered) if flavor is not None else ({}, {})

    replicas: list[ReplicaStatus] = []
    count_earlier = flavor is not None and flavor.replaced_pods_are_restarts
    for info in roles:
        for i in range(info.replicas):
            pod = grouped.current.get((info.role, i))
            if pod is not None:
                earlier = grouped.earlier.get((info.role, i), [])
                n_earlier = sum(1 for p in earlier if (p.get("status") or {}).get("phase") == "Failed")
                failures = n_earlier if count_earlier else 0
                replicas.append(cache.replica(info.role, i, pod, failures, info.container) if cache is not None
                                else replica_from_pod(info.role, i, pod, failures, info.container))
                continue
            r = ReplicaStatus(role=info.role, index=i)
            if i in completed.get(info.role, set()) or engine.phase is JobPhase.SUCCEEDED:
                r.phase = ReplicaPhase.SUCCEEDED
            elif i in failed_idx.get(info.role, set()):
                r.phase = ReplicaPhase.FAILED
            elif engine.phase is JobPhase.SUSPENDED:
                r.reason = "Suspended"
            elif engine.phase.is_terminal:
                r.reason, r.message = "NotStarted", "the job ended before this replica started"
            else:
                r.reason, r.message = "NoPod", "waiting for the controller to create its pod"
            replicas.append(r)

    phase = engine.phase
    if phase in (JobPhase.PENDING, JobPhase.RUNNING):
        # Not decided yet: Running once a replica has started (an engine's own "Pending" may lag its pods).
        started = any(r.phase is not ReplicaPhase.PENDING for r in replicas)
        phase = JobPhase.RUNNING if started else JobPhase.PENDING
    elif phase is JobPhase.CANCELLED:
        # Being deleted by a cancel: its pods are stopped with it, not failing (as the local backend says).
        # (copies: the replicas may be a PodCache's, shared with the next look)
        replicas = [copy.copy(r) for r in replicas]
        stopped_by_cancel(replicas, engine.finished_at)
    status = JobStatus(
        job_id=job_id,
        name=job_id,
        backend="kubernetes",
        namespace=namespace or rmeta.get("namespace"),
        phase=phase,
        replicas=replicas,
        backoff_count=engine.backoff_count,
        backoff_limit=engine.backoff_limit,
        conditions=_conditions(flavor, ordered, created),
        reason=engine.reason,
        message=engine.message,
        created_at=created,
        started_at=min((r.started_at for r in replicas if r.started_at is not None), default=None),
        finished_at=engine.finished_at if phase.is_terminal else None,
        placed_by_scheduler=True,
    )
    if phase is JobPhase.FAILED:
        status.first_failure = first_failure(replicas, engine.policy_action)
    elif phase is JobPhase.RUNNING and is_elastic(ordered):
        _degraded(status)
    return status


def is_elastic(workloads: Sequence[Mapping[str, Any]]) -> bool:
    """An elastic job's workload: its bounds annotation (`ELASTIC_ANNOTATION`, on a Job or a JobSet's
    replicatedJob template), or a Kubeflow job's elasticPolicy."""
    for w in workloads:
        spec = w.get("spec") or {}
        templates = [(rj.get("template") or {}).get("metadata") or {} for rj in spec.get("replicatedJobs") or []]
        if spec.get("elasticPolicy") or any(ELASTIC_ANNOTATION in (m.get("annotations") or {})
                                            for m in [meta(w), *templates]):
            return True
    return False


def _degraded(status: JobStatus) -> None:
    """A running elastic job that lost workers says so, as the local backend does: `Running (degraded: 1/2
    replicas)` while a worker that failed is not running again (its replacement pending, or none coming: its
    index out of retries). A worker still starting, never failed (the job's start, a scale up), is no loss."""
    workers = [r for r in status.replicas if r.role == "worker"]
    lost = [r for r in workers if r.phase not in (ReplicaPhase.RUNNING, ReplicaPhase.SUCCEEDED)
            and (r.restarts > 0 or r.phase is ReplicaPhase.FAILED)]
    if lost:
        running = sum(1 for r in workers if r.phase is ReplicaPhase.RUNNING)
        status.reason, status.message = REASON_DEGRADED, f"{running}/{len(workers)} replicas"


def first_failure(replicas: Sequence[ReplicaStatus], policy_action: str | None) -> FailureSummary | None:
    """The replica that failed first (a failed pod, or a restarted one whose last run failed)."""
    failed = [r for r in replicas if r.phase is ReplicaPhase.FAILED]
    if not failed:
        return None
    r = min(failed, key=lambda x: (x.finished_at if x.finished_at is not None else float("inf"), x.role, x.index))
    return FailureSummary(role=r.role, index=r.index, exit_code=r.exit_code, signal=None,
                          policy_action=policy_action, reason=r.reason, message=r.message)


def jobs_by_name(workloads: Iterable[Mapping[str, Any]]) -> dict[str, list[JSON]]:
    """Workload objects grouped by the job they belong to (``kubetrain.dev/job``), skipping the Jobs a
    JobSet or another controller made."""
    out: dict[str, list[JSON]] = {}
    for obj in workloads:
        lab = labels(obj)
        job = lab.get(JOB_LABEL)
        if job is None:
            continue
        owners = meta(obj).get("ownerReferences") or []
        if any(o.get("kind") != obj.get("kind") or o.get("apiVersion") != obj.get("apiVersion") for o in owners):
            continue  # e.g. a JobSet's child Jobs: they belong to the JobSet, listed on its own
        out.setdefault(job, []).append(dict(obj))
    return out


__all__ = [
    "KUEUE_QUEUE_LABEL",
    "EngineState",
    "Pod",
    "PodCache",
    "PodIndex",
    "RoleInfo",
    "annotations_of",
    "conditions_of",
    "engine_state",
    "first_failure",
    "flavor_of",
    "group_pods",
    "is_root",
    "job_status",
    "jobs_by_name",
    "labels",
    "main_container_status",
    "meta",
    "parse_time",
    "pod_index",
    "pod_role",
    "pod_scheduling_problem",
    "replica_from_pod",
    "replica_pod",
    "roles_of",
    "true_condition",
]
