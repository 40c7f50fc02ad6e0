"""Workload objects + their pods → the shared :class:`~kubetrain.status.JobStatus`. Pure functions, no I/O.

The job's phase is the engine's word (Job/JobSet/Kubeflow conditions, the Volcano state), never a guess
from pods: a controller that has not decided yet leaves the job Running. The replicas come from the
pods: the newest pod of each (role, index) is the replica; older pods of the same index are earlier
attempts (restarts). Replicas without a pod (not created yet, cleaned up) are still listed, from the
replica counts in the workload's spec, so REPLICAS always says ``n/total``.

Flavor by object: batch/v1 Jobs → ``job`` (one per role, the root is the one without owner
references), JobSet → ``jobset``, batch.volcano.sh Job → ``volcano``, kubeflow.org → ``kubeflow``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...contract.labels import (
    FLAVOR_ANNOTATION,
    INDEX_KEYS,
    JOB_LABEL,
    KUEUE_QUEUE_LABEL,
    PAUSED_ANNOTATION,
    ROLE_LABEL,
)
from ...contract.logs import parse_time
from ...status import (
    Condition,
    ConditionStatus,
    FailureSummary,
    JobPhase,
    JobStatus,
    ReplicaPhase,
    ReplicaStatus,
)

JSON = dict[str, Any]

JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOBSET_RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
JOBSET_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"

_TRAILING_INDEX = re.compile(r"-(\d+)$")


def meta(obj: Mapping[str, Any]) -> JSON:
    return dict(obj.get("metadata") or {})


def labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(meta(obj).get("labels") or {})


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(meta(obj).get("annotations") or {})


def flavor_of(obj: Mapping[str, Any]) -> str:
    """The flavor a workload object belongs to (its annotation, else its kind)."""
    ann = annotations_of(obj).get(FLAVOR_ANNOTATION)
    if ann:
        return ann
    api_version = str(obj.get("apiVersion") or "")
    kind = obj.get("kind")
    if api_version.startswith("jobset.x-k8s.io/"):
        return "jobset"
    if api_version.startswith("batch.volcano.sh/"):
        return "volcano"
    if api_version.startswith("kubeflow.org/"):
        return "kubeflow"
    if api_version == "batch/v1" and kind == "Job":
        return "job"
    return "unknown"


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


def _cond_time(c: Mapping[str, Any]) -> float | None:
    return parse_time(c.get("lastTransitionTime") or c.get("lastUpdateTime") or c.get("lastProbeTime"))


# --------------------------------------------------------------------------------------------- roles


@dataclass(frozen=True)
class RoleInfo:
    role: str
    replicas: int
    #: Pods per replicated Job (jobset): the stride of ``jobset.sigs.k8s.io/job-index``.
    completions: int = 1
    container: str | None = None


def _template_role(template: Mapping[str, Any], default: str) -> str:
    return labels(template).get(ROLE_LABEL) or default


def _first_container(template: Mapping[str, Any]) -> str | None:
    containers = ((template.get("spec") or {}).get("containers")) or []
    return containers[0].get("name") if containers else None


def roles_of(flavor: str, workloads: Sequence[Mapping[str, Any]]) -> list[RoleInfo]:
    """Roles and their replica counts, in the order the spec lists them."""
    out: list[RoleInfo] = []
    if flavor == "job":
        for job in sorted(workloads, key=lambda j: (not is_root(j), meta(j).get("name", ""))):
            spec = job.get("spec") or {}
            n = spec.get("completions") or spec.get("parallelism") or 1
            role = labels(job).get(ROLE_LABEL) or meta(job).get("name", "job")
            out.append(RoleInfo(role, int(n), container=_first_container(spec.get("template") or {})))
    elif flavor == "jobset" and workloads:
        for rj in (workloads[0].get("spec") or {}).get("replicatedJobs") or []:
            jspec = (rj.get("template") or {}).get("spec") or {}
            completions = int(jspec.get("completions") or jspec.get("parallelism") or 1)
            role = _template_role(rj.get("template") or {}, rj.get("name", "job"))
            out.append(RoleInfo(role, int(rj.get("replicas", 1)) * completions, completions,
                                _first_container(jspec.get("template") or {})))
    elif flavor == "volcano" and workloads:
        for task in (workloads[0].get("spec") or {}).get("tasks") or []:
            template = task.get("template") or {}
            out.append(RoleInfo(_template_role(template, task.get("name", "task")), int(task.get("replicas", 1)),
                                container=_first_container(template)))
    elif flavor == "kubeflow" and workloads:
        spec = workloads[0].get("spec") or {}
        for key, value in spec.items():
            if not key.endswith("ReplicaSpecs") or not isinstance(value, dict):
                continue
            for rtype, rspec in value.items():
                template = (rspec or {}).get("template") or {}
                out.append(RoleInfo(_template_role(template, rtype.lower()), int((rspec or {}).get("replicas", 1)),
                                    container=_first_container(template)))
    return out


# --------------------------------------------------------------------------------------------- pods


def pod_index(pod: Mapping[str, Any], role: RoleInfo | None = None) -> int | None:
    """The replica index of a pod, from the labels kubetrain or the engine put on it."""
    lab, ann = labels(pod), annotations_of(pod)
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
    lab = labels(pod)
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
    r.started_at = parse_time(status.get("startTime"))
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


def _latest_time(pod: Mapping[str, Any]) -> float | None:
    times = [_cond_time(c) for c in conditions_of(pod)]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def _indexes(text: str | None) -> set[int]:
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


@dataclass
class PodIndex:
    """Pods grouped by replica: the newest is the replica, the others are earlier attempts."""

    current: dict[tuple[str, int], JSON]
    earlier: dict[tuple[str, int], list[JSON]]


def group_pods(pods: Iterable[Mapping[str, Any]], roles: Sequence[RoleInfo]) -> PodIndex:
    by_role = {r.role: r for r in roles}
    groups: dict[tuple[str, int], list[JSON]] = {}
    for pod in pods:
        role = labels(pod).get(ROLE_LABEL) or labels(pod).get(JOBSET_REPLICATED_JOB)
        if role is None:
            continue
        index = pod_index(pod, by_role.get(role))
        if index is None:
            continue
        groups.setdefault((role, index), []).append(dict(pod))
    current: dict[tuple[str, int], JSON] = {}
    earlier: dict[tuple[str, int], list[JSON]] = {}
    for key, group in groups.items():
        group.sort(key=_pod_sort_key)
        current[key] = group[-1]
        earlier[key] = group[:-1]
    return PodIndex(current, earlier)


# --------------------------------------------------------------------------------------------- the job


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


def _suspended_phase(root: Mapping[str, Any]) -> EngineState:
    """A suspended workload: paused by the user, or held by Kueue until it is admitted."""
    if labels(root).get(KUEUE_QUEUE_LABEL) and annotations_of(root).get(PAUSED_ANNOTATION) != "true":
        queue = labels(root)[KUEUE_QUEUE_LABEL]
        return EngineState(JobPhase.PENDING, "WaitingForAdmission", f"waiting for Kueue to admit it (queue {queue})")
    return EngineState(JobPhase.SUSPENDED, "Suspended", "suspended: kubetrain resume to start it")


def _job_engine(jobs: Sequence[Mapping[str, Any]]) -> EngineState:
    roots = [j for j in jobs if is_root(j)] or list(jobs[:1])
    root = roots[0]
    limit = (root.get("spec") or {}).get("backoffLimit")
    for job in jobs:
        failed = true_condition(job, "Failed") or true_condition(job, "FailureTarget")
        if failed:
            reason = failed.get("reason")
            action = {
                "BackoffLimitExceeded": f"backoffLimit {limit} reached, gave up" if limit is not None else None,
                "PodFailurePolicy": "not retried: the exit code is permanent (podFailurePolicy)",
                "DeadlineExceeded": "activeDeadlineSeconds reached",
                "MaxFailedIndexesExceeded": "too many failed indexes",
            }.get(reason or "")
            return EngineState(JobPhase.FAILED, reason, failed.get("message"), _cond_time(failed), 0, limit, action)
    done = true_condition(root, "Complete") or true_condition(root, "SuccessCriteriaMet")
    if done:
        return EngineState(JobPhase.SUCCEEDED, None, None, _cond_time(done), 0, limit)
    if any((j.get("spec") or {}).get("suspend") for j in jobs):
        state = _suspended_phase(root)
        state.backoff_limit = limit
        return state
    return EngineState(JobPhase.RUNNING, backoff_limit=limit)


def _jobset_engine(js: Mapping[str, Any]) -> EngineState:
    spec, status = js.get("spec") or {}, js.get("status") or {}
    limit = (spec.get("failurePolicy") or {}).get("maxRestarts")
    restarts = int(status.get("restarts") or 0)
    failed = true_condition(js, "Failed")
    if failed:
        action = f"restarted {restarts}/{limit}, gave up" if limit else None
        return EngineState(JobPhase.FAILED, failed.get("reason"), failed.get("message"), _cond_time(failed),
                           restarts, limit, action)
    done = true_condition(js, "Completed")
    if done:
        return EngineState(JobPhase.SUCCEEDED, None, None, _cond_time(done), restarts, limit)
    if spec.get("suspend") or true_condition(js, "Suspended"):
        state = _suspended_phase(js)
        state.backoff_count, state.backoff_limit = restarts, limit
        return state
    return EngineState(JobPhase.RUNNING, backoff_count=restarts, backoff_limit=limit)


_VOLCANO_PHASES = {
    "Completed": JobPhase.SUCCEEDED,
    "Failed": JobPhase.FAILED,
    "Terminated": JobPhase.FAILED,
    "Terminating": JobPhase.FAILED,
    "Aborted": JobPhase.SUSPENDED,
    "Aborting": JobPhase.SUSPENDED,
    "Pending": JobPhase.PENDING,
}


def _volcano_engine(vj: Mapping[str, Any]) -> EngineState:
    spec, status = vj.get("spec") or {}, vj.get("status") or {}
    state = status.get("state") or {}
    phase_name = state.get("phase") or "Pending"
    limit = spec.get("maxRetry")
    retries = int(status.get("retryCount") or 0)
    phase = _VOLCANO_PHASES.get(phase_name, JobPhase.RUNNING)
    finished = parse_time(state.get("lastTransitionTime")) if phase.is_terminal else None
    action = f"retried {retries}/{limit}" if phase is JobPhase.FAILED and limit is not None else None
    reason = state.get("reason") or (phase_name if phase_name not in ("Running", "Pending", "Completed") else None)
    return EngineState(phase, reason, state.get("message"), finished, retries, limit, action)


def _kubeflow_engine(kf: Mapping[str, Any]) -> EngineState:
    run_policy = (kf.get("spec") or {}).get("runPolicy") or {}
    limit = run_policy.get("backoffLimit")
    for ctype, phase in (("Failed", JobPhase.FAILED), ("Succeeded", JobPhase.SUCCEEDED)):
        c = true_condition(kf, ctype)
        if c:
            failed = phase is JobPhase.FAILED
            return EngineState(phase, c.get("reason") if failed else None, c.get("message") if failed else None,
                               _cond_time(c), 0, limit)
    if run_policy.get("suspend") or true_condition(kf, "Suspended"):
        state = _suspended_phase(kf)
        state.backoff_limit = limit
        return state
    if true_condition(kf, "Restarting"):
        c = true_condition(kf, "Restarting") or {}
        return EngineState(JobPhase.RUNNING, "Restarting", c.get("message"), backoff_limit=limit)
    return EngineState(JobPhase.RUNNING, backoff_limit=limit)


def engine_state(flavor: str, workloads: Sequence[Mapping[str, Any]]) -> EngineState:
    if flavor == "job":
        return _job_engine(workloads)
    if flavor == "jobset":
        return _jobset_engine(workloads[0])
    if flavor == "volcano":
        return _volcano_engine(workloads[0])
    if flavor == "kubeflow":
        return _kubeflow_engine(workloads[0])
    return EngineState(JobPhase.RUNNING)


def _conditions(flavor: str, workloads: Sequence[Mapping[str, Any]], created: float | None) -> list[Condition]:
    out: list[Condition] = []
    if created is not None:
        out.append(Condition("Created", ConditionStatus.TRUE, None, None, created))
    for obj in workloads:
        if flavor == "volcano":
            for c in conditions_of(obj):
                t = _cond_time(c)
                out.append(Condition(str(c.get("status") or "Unknown"), ConditionStatus.TRUE, None, None,
                                     t if t is not None else created or 0.0))
            continue
        prefix = ""
        if flavor == "job" and len(workloads) > 1:
            prefix = f"{labels(obj).get(ROLE_LABEL) or meta(obj).get('name')}: "
        for c in conditions_of(obj):
            try:
                status = ConditionStatus(c.get("status") or "Unknown")
            except ValueError:
                status = ConditionStatus.UNKNOWN
            t = _cond_time(c)
            message = c.get("message")
            out.append(Condition(str(c.get("type")), status, c.get("reason"),
                                 (prefix + message) if message and prefix else message,
                                 t if t is not None else created or 0.0))
    out.sort(key=lambda c: c.time)
    return out


def job_status(
    workloads: Sequence[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    *,
    job_id: str | None = None,
    namespace: str | None = None,
    deleted: bool = False,
) -> JobStatus:
    """The status of one job from its workload object(s) and pods.

    ``deleted``: the root is gone (seen deleted by a watch): the job was cancelled.
    """
    if not workloads:
        raise ValueError("a job status needs its workload object")
    flavor = flavor_of(workloads[0])
    ordered = sorted(workloads, key=lambda o: not is_root(o)) if flavor == "job" else list(workloads)
    root = ordered[0]
    rmeta = meta(root)
    job_id = job_id or labels(root).get(JOB_LABEL) or rmeta.get("name", "")
    roles = roles_of(flavor, ordered)
    grouped = group_pods(pods, roles)
    engine = engine_state(flavor, ordered)
    created = parse_time(rmeta.get("creationTimestamp"))

    if deleted or rmeta.get("deletionTimestamp"):
        engine = EngineState(JobPhase.CANCELLED, "Deleted", "the job was deleted", time.time(),
                             engine.backoff_count, engine.backoff_limit)

    completed: dict[str, set[int]] = {}
    failed_idx: dict[str, set[int]] = {}
    if flavor == "job":
        for j in ordered:
            role = labels(j).get(ROLE_LABEL) or meta(j).get("name", "")
            completed[role] = _indexes((j.get("status") or {}).get("completedIndexes"))
            failed_idx[role] = _indexes((j.get("status") or {}).get("failedIndexes"))

    replicas: list[ReplicaStatus] = []
    count_earlier = flavor in ("job", "kubeflow")
    for info in roles:
        for i in range(info.replicas):
            pod = grouped.current.get((info.role, i))
            if pod is not None:
                earlier = grouped.earlier.get((info.role, i), [])
                n_earlier = sum(1 for p in earlier if (p.get("status") or {}).get("phase") == "Failed")
                replicas.append(replica_from_pod(info.role, i, pod, n_earlier if count_earlier else 0,
                                                 info.container))
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
    )
    if phase is JobPhase.FAILED:
        status.first_failure = first_failure(replicas, engine.policy_action)
    return status


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
    "PodIndex",
    "RoleInfo",
    "engine_state",
    "first_failure",
    "flavor_of",
    "group_pods",
    "is_root",
    "job_status",
    "jobs_by_name",
    "main_container_status",
    "parse_time",
    "pod_index",
    "replica_from_pod",
    "roles_of",
]
