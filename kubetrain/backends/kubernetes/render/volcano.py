"""Flavor `volcano`: one batch.volcano.sh/v1alpha1 Job, a task per role, gang scheduled (minAvailable).

The `svc` plugin gives replica `i` of task `r` the hostname `<base>-<r>-<i>` in the subdomain `<base>`
(a headless Service of the same name); the `env` plugin sets VK_TASK_INDEX. One task per role, not
per replica (TorchX's layout), so the object does not grow with the replica count; still, a job whose
object would pass etcd's limit is refused with a pointer to jobset.
"""

from __future__ import annotations

from typing import Any

from .context import Ctx, Layout, RoleView, base_name, room_for_base
from .pod import PodStyle, pod_template
from .policy import check_common, gang_size, volcano_policies

API_VERSION = "batch.volcano.sh/v1alpha1"
INDEX_ENV = "VK_TASK_INDEX"
SCHEDULER = "volcano"


def layout(name: str, counts: dict[str, int]) -> Layout:
    # The svc plugin names the Service after the job: the name must start with a letter.
    base = base_name(name, room_for_base(counts, 0), rfc1035=True)
    return Layout(base, f"{base}-{{role}}-{{index}}.{base}", base, INDEX_ENV)


def check(ctx: Ctx) -> None:
    check_common(ctx, suspend=False, deadline=False, exit_code_overrides=True, terminate_after_preemption=True,
                 clean_pod_policies=("Running",))


def task(ctx: Ctx, view: RoleView) -> dict[str, Any]:
    style = PodStyle(index_env=INDEX_ENV, engine_env=("VC_TASK_INDEX",), pod_scheduler=False)
    out: dict[str, Any] = {"name": view.role, "replicas": view.replicas, "template": pod_template(ctx, view, style)}
    if ctx.launcher_style and view.argv is not None:
        # The hosting replicas never finish on their own: the job is done when the launcher is.
        out["policies"] = [{"event": "TaskCompleted", "action": "CompleteJob"}]
    return out


def build(ctx: Ctx) -> list[dict[str, Any]]:
    check(ctx)
    scheduling = ctx.spec.scheduling
    gang = gang_size(ctx)
    if gang is None:
        # Volcano gangs every job; without a gang asked for, the default is the whole job, unless the
        # spec said gang: false.
        gang = 1 if scheduling.gang is False else ctx.total_replicas
    policies, max_retry = volcano_policies(ctx)
    plugins: dict[str, list[str]] = {"svc": [], "env": []}
    if ctx.launcher_style:
        plugins["ssh"] = []  # passwordless ssh between the pods, for mpirun / the deepspeed launcher
    spec: dict[str, Any] = {
        "schedulerName": scheduling.scheduler_name or SCHEDULER,
        "minAvailable": gang,
        "maxRetry": max_retry,
        "plugins": plugins,
        "policies": policies,
        "tasks": [task(ctx, v) for v in ctx.roles],
    }
    if scheduling.queue:
        spec["queue"] = scheduling.queue
    if scheduling.priority_class:
        spec["priorityClassName"] = scheduling.priority_class
    ttl = ctx.spec.run_policy.ttl_seconds_after_finished
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return [{"apiVersion": API_VERSION, "kind": "Job", "metadata": ctx.metadata(ctx.layout.base), "spec": spec}]


__all__ = ["API_VERSION", "INDEX_ENV", "build", "layout"]
