"""Flavor `job`: one Indexed batch/v1 Job per role and one headless Service. Kubernetes ≥ 1.27, nothing else.

Replica `i` of role `r` is pod hostname `<base>-<r>-<i>` (the Job controller's `<job>-<index>`), and the
headless Service `<service>` (the pods' subdomain) publishes it as `<base>-<r>-<i>.<service>`. The
first role's Job is the root object; everything else is owned by it (see __init__). Restarts are per
pod (the Job controller replaces a failed pod), not of the whole group: for gang restarts use jobset.
"""

from __future__ import annotations

from typing import Any

from ....contract.naming import dns1035_label
from .context import Ctx, Layout, RoleView, base_name, room_for_base
from .pod import PodStyle, pod_template
from .policy import check_common, check_indexed_completions, gang_size, pod_failure_policy, restarts_allowed, suspended
from .services import headless_service

INDEX_ENV = "JOB_COMPLETION_INDEX"


def layout(name: str, counts: dict[str, int]) -> Layout:
    base = base_name(name, room_for_base(counts, 0), rfc1035=False)
    service = dns1035_label(base)
    return Layout(base, f"{base}-{{role}}-{{index}}.{service}", service, INDEX_ENV)


def check(ctx: Ctx) -> None:
    check_common(ctx, suspend=True, deadline=True, exit_code_overrides=True, terminate_after_preemption=True,
                 clean_pod_policies=("Running",))
    check_indexed_completions(ctx)
    if gang_size(ctx) is not None:
        path = ("spec", "scheduling", "minAvailable" if ctx.spec.scheduling.min_available else "gang")
        ctx.problems.unsupported(path, "gang scheduling", ctx.flavor, ("jobset", "volcano", "kubeflow"),
                                 hint="jobset gangs the whole job through Kueue (set scheduling.queue)")


def job_name(ctx: Ctx, role: str) -> str:
    return f"{ctx.layout.base}-{role}"


def indexed_job(ctx: Ctx, view: RoleView) -> dict[str, Any]:
    policy = ctx.spec.run_policy
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": view.replicas,
        "parallelism": view.replicas,
        "backoffLimit": restarts_allowed(ctx),
        "podFailurePolicy": pod_failure_policy(ctx),
    }
    if policy.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = policy.active_deadline_seconds
    if policy.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = policy.ttl_seconds_after_finished
    if suspended(ctx):
        spec["suspend"] = True
    style = PodStyle(index_env=INDEX_ENV, subdomain=ctx.layout.service)
    spec["template"] = pod_template(ctx, view, style)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": ctx.metadata(job_name(ctx, view.role), view.role, queue_label=True),
        "spec": spec,
    }


def build(ctx: Ctx) -> list[dict[str, Any]]:
    check(ctx)
    jobs = [indexed_job(ctx, view) for view in ctx.roles]
    assert ctx.layout.service is not None
    headless = headless_service(ctx, ctx.layout.service)
    return [jobs[0], headless, *jobs[1:]]


__all__ = ["INDEX_ENV", "build", "layout"]
