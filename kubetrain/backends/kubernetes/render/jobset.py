"""Flavor `jobset`: one JobSet (jobset.x-k8s.io/v1alpha2), a replicatedJob per role (one Indexed Job each).

Replica `i` of role `r` is pod hostname `<base>-<r>-0-<i>` in the JobSet's subdomain (JobSet makes the
headless Service). Any failed Job restarts the whole JobSet (gang restart) up to failurePolicy.maxRestarts.
Where some replicas only host a launcher's processes (MPI, DeepSpeed's launcher), the launcher starts
once they are Ready (dependsOn) and the job succeeds when the launcher does (successPolicy).
"""

from __future__ import annotations

from typing import Any

from ....contract.naming import dns1035_label
from .context import Ctx, Layout, RoleView, base_name, room_for_base
from .pod import PodStyle, pod_template
from .policy import (
    check_common,
    check_indexed_completions,
    gang_size,
    jobset_failure_policy,
    pod_failure_policy,
    suspended,
)

API_VERSION = "jobset.x-k8s.io/v1alpha2"
INDEX_ENV = "JOB_COMPLETION_INDEX"


def layout(name: str, counts: dict[str, int]) -> Layout:
    base = base_name(name, room_for_base(counts, len("-0")), rfc1035=False)
    subdomain = dns1035_label(base)
    return Layout(base, f"{base}-{{role}}-0-{{index}}.{subdomain}", subdomain, INDEX_ENV)


def check(ctx: Ctx) -> None:
    check_common(ctx, suspend=True, deadline=True, exit_code_overrides=True, terminate_after_preemption=True,
                 clean_pod_policies=("Running",))
    check_indexed_completions(ctx)
    gang = gang_size(ctx)
    scheduling = ctx.spec.scheduling
    if gang is not None and gang < ctx.total_replicas:
        ctx.problems.unsupported(("spec", "scheduling", "minAvailable"),
                                 f"a gang of {gang} of the job's {ctx.total_replicas} replicas", ctx.flavor,
                                 ("volcano", "kubeflow"), hint="jobset gangs the whole job (through Kueue)")
    elif gang is not None and not scheduling.queue:
        ctx.problems.add(("spec", "scheduling", "gang" if scheduling.gang else "minAvailable"),
                         "the jobset flavor gangs a job through Kueue, which needs scheduling.queue "
                         "(a LocalQueue); flavors that gang without Kueue: volcano, kubeflow")


def replicated_job(ctx: Ctx, view: RoleView) -> dict[str, Any]:
    job_spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": view.replicas,
        "parallelism": view.replicas,
        "backoffLimit": 0,  # a failure fails the Job; the JobSet's failurePolicy decides what follows
        "podFailurePolicy": pod_failure_policy(ctx),
    }
    if ctx.spec.run_policy.active_deadline_seconds is not None:
        job_spec["activeDeadlineSeconds"] = ctx.spec.run_policy.active_deadline_seconds
    job_spec["template"] = pod_template(ctx, view, PodStyle(index_env=INDEX_ENV))
    return {
        "name": view.role,
        "replicas": 1,
        "template": {"metadata": {"labels": ctx.labels(view.role)}, "spec": job_spec},
    }


def build(ctx: Ctx) -> list[dict[str, Any]]:
    check(ctx)
    hosts = [v for v in ctx.roles if v.argv is None]
    runners = [v for v in ctx.roles if v.argv is not None]
    # Hosting roles first: a replicatedJob may only depend on the ones listed before it.
    ordered = hosts + runners if hosts else ctx.roles
    jobs = [replicated_job(ctx, v) for v in ordered]
    if hosts:
        for job in jobs[len(hosts):]:
            job["dependsOn"] = [{"name": v.role, "status": "Ready"} for v in hosts]
    spec: dict[str, Any] = {
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True, "subdomain": ctx.layout.service},
        "replicatedJobs": jobs,
        "failurePolicy": jobset_failure_policy(ctx),
    }
    if hosts:
        spec["successPolicy"] = {"operator": "All", "targetReplicatedJobs": [v.role for v in runners]}
    if suspended(ctx):
        spec["suspend"] = True
    ttl = ctx.spec.run_policy.ttl_seconds_after_finished
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return [{
        "apiVersion": API_VERSION,
        "kind": "JobSet",
        "metadata": ctx.metadata(ctx.layout.base, queue_label=True),
        "spec": spec,
    }]


__all__ = ["API_VERSION", "INDEX_ENV", "build", "layout"]
