"""Flavor `job`: one Indexed batch/v1 Job per role and one headless Service. Kubernetes ≥ 1.27, nothing else.

Replica `i` of role `r` is pod hostname `<base>-<r>-<i>` (the Job controller's `<job>-<index>`), and the
headless Service `<service>` (the pods' subdomain) publishes it as `<base>-<r>-<i>.<service>`. The
first role's Job is the root object; everything else is owned by it (see render). Restarts are per
pod (the Job controller replaces a failed pod), not of the whole group: for gang restarts use jobset.
The root Job decides the job's end; the other roles' Jobs (hosting a launcher's processes) are suspended
once it has ended.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ....contract.features import FEATURES
from ....contract.labels import ELASTIC_ANNOTATION
from ....contract.naming import dns1035_label
from ....status import Condition, JobPhase
from ..client.errors import ApiError, KubernetesError
from ..client.resources import JOBS
from ..workload import (
    JSON,
    EngineState,
    RoleInfo,
    cond_time,
    first_container,
    indexes,
    is_root,
    meta,
    object_conditions,
    paused_patch,
    suspended_phase,
    true_condition,
)
from .base import Controller, Flavor, role_of, root_first

if TYPE_CHECKING:
    from ....jobspec import JobSpec
    from ..client.kube import Kube
    from ..manifests.context import Ctx, Layout, RoleView
    from ..served import Served
    from ..workload import FoundJob

INDEX_ENV = "JOB_COMPLETION_INDEX"

_FAILURE_ACTIONS = {
    "PodFailurePolicy": "not retried: the exit code is permanent (podFailurePolicy)",
    "DeadlineExceeded": "activeDeadlineSeconds reached",
    "MaxFailedIndexesExceeded": "too many failed indexes",
}


class JobFlavor(Flavor):
    # -- render ----------------------------------------------------------------------------------------

    def layout(self, name: str, counts: dict[str, int], spec: JobSpec | None = None) -> Layout:
        from ..manifests.context import Layout, base_name, room_for_base

        base = base_name(name, room_for_base(counts, 0), rfc1035=False)
        service = dns1035_label(base)
        return Layout(base, f"{base}-{{role}}-{{index}}.{service}", service, INDEX_ENV)

    def objects(self, ctx: Ctx) -> list[dict[str, Any]]:
        from ..manifests.policy import check_common, check_indexed_completions, gang_size
        from ..manifests.services import headless_service

        check_common(ctx)
        check_indexed_completions(ctx)
        if gang_size(ctx) is not None:
            path = ("spec", "scheduling", "minAvailable" if ctx.spec.scheduling.min_available else "gang")
            ctx.problems.unsupported(path, "gang scheduling", self.name, ctx.flavors_that(lambda f: f.gang),
                                     hint="jobset gangs the whole job through Kueue (set scheduling.queue)")
        jobs = [_indexed_job(ctx, view) for view in ctx.roles]
        assert ctx.layout.service is not None
        headless = headless_service(ctx, ctx.layout.service)
        return [jobs[0], headless, *jobs[1:]]

    # -- status ----------------------------------------------------------------------------------------

    def order(self, workloads: Sequence[Mapping[str, Any]]) -> list[JSON]:
        return sorted((dict(w) for w in workloads), key=lambda o: not is_root(o))

    def roles(self, workloads: Sequence[Mapping[str, Any]]) -> list[RoleInfo]:
        out: list[RoleInfo] = []
        for job in root_first(workloads):
            spec = job.get("spec") or {}
            n = spec.get("completions") or spec.get("parallelism") or 1
            role = role_of(job) or "job"
            out.append(RoleInfo(role, int(n), container=first_container(spec.get("template") or {})))
        return out

    def engine_state(self, workloads: Sequence[Mapping[str, Any]]) -> EngineState:
        roots = [j for j in workloads if is_root(j)] or list(workloads[:1])
        root = roots[0]
        limit = (root.get("spec") or {}).get("backoffLimit")
        for job in workloads:
            failed = true_condition(job, "Failed") or true_condition(job, "FailureTarget")
            if failed:
                reason = failed.get("reason")
                if reason == "BackoffLimitExceeded":
                    action = f"backoffLimit {limit} reached, gave up" if limit is not None else None
                else:
                    action = _FAILURE_ACTIONS.get(reason or "")
                return EngineState(JobPhase.FAILED, reason, failed.get("message"), cond_time(failed), 0, limit, action)
        done = true_condition(root, "Complete") or true_condition(root, "SuccessCriteriaMet")
        if done:
            return EngineState(JobPhase.SUCCEEDED, None, None, cond_time(done), 0, limit)
        if any((j.get("spec") or {}).get("suspend") for j in workloads):
            state = suspended_phase(root)
            state.backoff_limit = limit
            return state
        return EngineState(JobPhase.RUNNING, backoff_limit=limit)

    def conditions(self, workloads: Sequence[Mapping[str, Any]], created: float | None) -> list[Condition]:
        # A Job per role: say which role's Job a message is about.
        several = len(workloads) > 1
        return [c for obj in workloads
                for c in object_conditions(obj, created, f"{role_of(obj) or meta(obj).get('name')}: " if several
                                           else "")]

    def finished_indexes(self, workloads: Sequence[Mapping[str, Any]]) -> tuple[
            dict[str, set[int]], dict[str, set[int]]]:
        completed: dict[str, set[int]] = {}
        failed: dict[str, set[int]] = {}
        for j in workloads:
            role = role_of(j)
            completed[role] = indexes((j.get("status") or {}).get("completedIndexes"))
            failed[role] = indexes((j.get("status") or {}).get("failedIndexes"))
        return completed, failed

    # -- control ---------------------------------------------------------------------------------------

    def suspend(self, kube: Kube, job: FoundJob, suspend: bool, caps: Served) -> None:
        for obj in job.workloads:
            patch: JSON = {"spec": {"suspend": suspend}}
            if obj is job.root:
                patch.update(paused_patch(suspend))
            kube.merge_patch(JOBS, meta(obj)["name"], job.namespace, patch)

    def scale(self, kube: Kube, job: FoundJob, replicas: int) -> None:
        """An elastic worker Job's completions and parallelism, patched together: the API server (>= 1.27)
        lets an Indexed Job change its completions only so. New indexes get pods whose agents join the
        rendezvous; the highest indexes' pods are removed (SIGTERM, then their grace period)."""
        from ....plan import check_scale

        worker = next((w for w in job.workloads if role_of(w) == "worker"), None)
        bounds = (meta(worker).get("annotations") or {}).get(ELASTIC_ANNOTATION) if worker is not None else None
        if worker is None or not bounds:
            raise KubernetesError(f"job {job.name} is not elastic (no spec.elastic when it was submitted): its "
                                  "Jobs' sizes are fixed; change spec.replicas and run it again")
        low, _, high = bounds.partition(":")
        check_scale(replicas, int(low), int(high))
        kube.merge_patch(JOBS, meta(worker)["name"], job.namespace,
                         {"spec": {"completions": replicas, "parallelism": replicas}})

    def stop_hosts(self, kube: Kube, namespace: str, workloads: Sequence[Mapping[str, Any]]) -> None:
        """Once the root Job has ended, the other roles' Jobs (hosting a launcher's processes, parameter
        servers) would run on: suspend them (their pods go, their record stays)."""
        for job in workloads[1:]:
            if not self.owns(job) or (job.get("spec") or {}).get("suspend"):
                continue
            if not true_condition(job, "Complete", "Failed"):
                with contextlib.suppress(ApiError):
                    kube.merge_patch(JOBS, meta(job)["name"], namespace, {"spec": {"suspend": True}})


def _indexed_job(ctx: Ctx, view: RoleView) -> dict[str, Any]:
    from ..manifests.pod import PodStyle, pod_template
    from ..manifests.policy import (
        elastic_annotation,
        elastic_index_policy,
        pod_failure_policy,
        role_restarts,
        suspended,
    )

    policy = ctx.spec.run_policy
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": view.replicas,
        # Trials: completions runs, at most parallelism at a time, a failed one retried alone (backoffLimit).
        "parallelism": ctx.spec.trials.parallelism if ctx.spec.trials is not None else view.replicas,
        "backoffLimit": role_restarts(ctx, view.role),  # the role's restartPolicy Never: 0
        "podFailurePolicy": pod_failure_policy(ctx, view.role),
    }
    elastic = elastic_index_policy(ctx, view.role)
    if elastic:  # a lost pod is its index's failure alone, retried per index: the job runs on without it
        del spec["backoffLimit"]
        spec.update(elastic)
    if policy.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = policy.active_deadline_seconds
    if policy.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = policy.ttl_seconds_after_finished
    if suspended(ctx):
        spec["suspend"] = True
    style = PodStyle(index_env=INDEX_ENV, subdomain=ctx.layout.service)
    spec["template"] = pod_template(ctx, view, style)
    metadata = ctx.metadata(f"{ctx.layout.base}-{view.role}", view.role, queue_label=True)
    if elastic:
        metadata["annotations"] = {**metadata.get("annotations", {}), **elastic_annotation(ctx)}
    return {"apiVersion": JOBS.api_version, "kind": JOBS.kind, "metadata": metadata, "spec": spec}


FLAVOR = JobFlavor(
    name="job",
    summary="an Indexed batch/v1 Job per role + a headless Service; Kubernetes >= 1.27 only",
    group=JOBS.group,
    version=JOBS.version,
    resources=(JOBS,),
    auto=1,
    index_fields=("metadata.annotations['batch.kubernetes.io/job-completion-index']",
                  "metadata.labels['batch.kubernetes.io/job-completion-index']"),
    features=FEATURES["job"],
    replaced_pods_are_restarts=True,
    controller=Controller("the Job controller (kube-controller-manager)", builtin=True),
)

__all__ = ["FLAVOR", "INDEX_ENV", "JobFlavor"]
