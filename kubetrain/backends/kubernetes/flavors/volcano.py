"""Flavor `volcano`: one batch.volcano.sh/v1alpha1 Job, a task per role, gang scheduled (minAvailable).

The `svc` plugin gives replica `i` of task `r` the hostname `<base>-<r>-<i>` in the subdomain `<base>`
(a headless Service of the same name); the `env` plugin sets VK_TASK_INDEX. One task per role, not
per replica (TorchX's layout), so the object does not grow with the replica count; still, a job whose
object would pass etcd's limit is refused with a pointer to jobset.

The job's state is Volcano's `status.state.phase`; suspend and resume are Volcano Commands (what
`vcctl job suspend/resume` sends); a gang that cannot be placed is told by its PodGroup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ....contract.features import FEATURES
from ....status import Condition, ConditionStatus, JobPhase
from ..client.errors import ApiError, KubernetesError
from ..client.resources import Resource
from ..workload import (
    EngineState,
    RoleInfo,
    cond_time,
    conditions_of,
    first_container,
    meta,
    parse_time,
    paused_patch,
    template_role,
)
from .base import Controller, Flavor

if TYPE_CHECKING:
    from ....jobspec import JobSpec
    from ....jobspec.controller import Controller as SpecController
    from ..client.kube import Kube
    from ..diagnosis import Diagnosis
    from ..manifests.context import Ctx, Layout, RoleView
    from ..served import Served
    from ..workload import FoundJob

VOLCANO_JOBS = Resource("batch.volcano.sh", "v1alpha1", "jobs", "Job")
PODGROUPS = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup")
VOLCANO_QUEUES = Resource("scheduling.volcano.sh", "v1beta1", "queues", "Queue", namespaced=False)
COMMANDS = Resource("bus.volcano.sh", "v1alpha1", "commands", "Command")
API_VERSION = VOLCANO_JOBS.api_version
INDEX_ENV = "VK_TASK_INDEX"
SCHEDULER = "volcano"

_PHASES = {
    "Completed": JobPhase.SUCCEEDED,
    "Failed": JobPhase.FAILED,
    "Terminated": JobPhase.FAILED,
    "Terminating": JobPhase.FAILED,
    "Aborted": JobPhase.SUSPENDED,
    "Aborting": JobPhase.SUSPENDED,
    "Pending": JobPhase.PENDING,
}


CONTROLLER = Controller("Volcano's controllers and scheduler", ("volcano-system",),
                        ("volcano-controllers", "volcano-scheduler"))
"""Volcano's install (installer/volcano-development.yaml, the Helm chart): the job controller (which writes the
job's state) and the scheduler (which places its pods, schedulerName volcano), both in volcano-system."""


class VolcanoFlavor(Flavor):
    # -- render ----------------------------------------------------------------------------------------

    def layout(self, name: str, counts: dict[str, int], spec: JobSpec | None = None) -> Layout:
        from ..manifests.context import Layout, base_name, room_for_base

        controller = spec.controller if spec is not None else None
        # The svc plugin names the Service after the job: the name must start with a letter.
        base = base_name(name, room_for_base(counts, 0), rfc1035=True)
        # A Volcano Job's own tasks keep their names (the hosts `<job>-<task>-<i>.<job>` its pods use).
        names = ({role: r.name for role, r in controller.roles.items() if r.name != role}
                 if controller is not None and self.runs_controller(controller) else {})
        return Layout(base, f"{base}-{{role}}-{{index}}.{base}", base, INDEX_ENV, names)

    def runs_controller(self, controller: SpecController | None) -> bool:
        return controller is not None and (controller.api_version, controller.kind) == (API_VERSION, "Job")

    def objects(self, ctx: Ctx) -> list[dict[str, Any]]:
        from ..manifests.policy import check_common, gang_size

        check_common(ctx)
        scheduling = ctx.spec.scheduling
        gang = gang_size(ctx)
        if gang is None:
            # Volcano gangs every job; without a gang asked for, the default is the whole job, unless the
            # spec said gang: false.
            gang = 1 if scheduling.gang is False else ctx.total_replicas
        policies, max_retry = job_policies(ctx)
        if ctx.spec.elastic is not None and ctx.spec.elastic.enabled:
            ctx.warn("volcano: a lost worker pod restarts the whole Volcano Job (its PodFailed policy "
                     "RestartJob, within maxRetry), not that pod alone, and `kubetrain scale` is refused: the "
                     "job survives a loss by a gang restart, never degraded; the job and jobset flavors replace "
                     "a lost pod alone and the others run on")
        from ..manifests import mpi_ssh

        plugins: dict[str, list[str]] = {"svc": [], "env": []}
        ssh_plugin = mpi_ssh.volcano_plugin(ctx)
        if ssh_plugin is not None:
            plugins["ssh"] = ssh_plugin  # the keys of workers that run an sshd of their own
        elif ctx.launcher_style and ctx.ssh is None:
            plugins["ssh"] = []  # passwordless ssh between the pods, for the deepspeed launcher's own command
        controller = ctx.spec.controller
        if ctx.native and controller is not None:
            from ....frameworks.controllers.volcano import plugins as given

            # Volcano's own plugins, as the job file asks for them, give what its containers read; kubetrain's
            # env and svc are there too for its own start-up script (the task index, the host names). The ssh
            # plugin is kubetrain's to decide, with the job's sshAuthMountPath (manifests/mpi_ssh.py).
            plugins = {**plugins, **{k: v for k, v in given(controller).items() if k != "ssh"}}
        spec: dict[str, Any] = {
            "schedulerName": scheduling.scheduler_name or SCHEDULER,
            "minAvailable": gang,
            "maxRetry": max_retry,
            "plugins": plugins,
            "policies": policies,
            "tasks": [_task(ctx, v) for v in ctx.roles],
        }
        if scheduling.queue:
            spec["queue"] = scheduling.queue
        if scheduling.priority_class:
            spec["priorityClassName"] = scheduling.priority_class
        ttl = ctx.spec.run_policy.ttl_seconds_after_finished
        if ttl is not None:
            spec["ttlSecondsAfterFinished"] = ttl
        return [{"apiVersion": API_VERSION, "kind": VOLCANO_JOBS.kind, "metadata": ctx.metadata(ctx.layout.base),
                 "spec": spec}]

    # -- control: scale -------------------------------------------------------------------------------

    def scale(self, kube: Kube, job: FoundJob, replicas: int) -> None:
        raise KubernetesError(
            f"job {job.name}: kubetrain does not resize a Volcano Job: its gang (minAvailable) and the PodGroup "
            "are sized for the tasks it was created with, and a lost pod restarts the whole job (RestartJob). "
            "The job and kubeflow flavors scale"
        )

    def ssh_keys(self, ctx: Ctx) -> Literal["plugin", "operator"] | None:
        """Volcano's ssh plugin makes the keys of programs with an sshd of their own (as in Volcano's own MPI
        jobs), at their folder."""
        return "plugin"

    # -- status ----------------------------------------------------------------------------------------

    def roles(self, workloads: Sequence[Mapping[str, Any]]) -> list[RoleInfo]:
        out: list[RoleInfo] = []
        if not workloads:
            return out
        for task in (workloads[0].get("spec") or {}).get("tasks") or []:
            template = task.get("template") or {}
            out.append(RoleInfo(template_role(template, task.get("name", "task")), int(task.get("replicas", 1)),
                                container=first_container(template)))
        return out

    def engine_state(self, workloads: Sequence[Mapping[str, Any]]) -> EngineState:
        vj = workloads[0]
        spec, status = vj.get("spec") or {}, vj.get("status") or {}
        state = status.get("state") or {}
        phase_name = state.get("phase") or "Pending"
        limit = spec.get("maxRetry")
        retries = int(status.get("retryCount") or 0)
        phase = _PHASES.get(phase_name, JobPhase.RUNNING)
        finished = parse_time(state.get("lastTransitionTime")) if phase.is_terminal else None
        action = f"retried {retries}/{limit}" if phase is JobPhase.FAILED and limit is not None else None
        reason = state.get("reason") or (phase_name if phase_name not in ("Running", "Pending", "Completed") else None)
        return EngineState(phase, reason, state.get("message"), finished, retries, limit, action)

    def conditions(self, workloads: Sequence[Mapping[str, Any]], created: float | None) -> list[Condition]:
        # Volcano's conditions are the phases the job went through: {status: <phase>, lastTransitionTime}.
        out: list[Condition] = []
        for obj in workloads:
            for c in conditions_of(obj):
                t = cond_time(c)
                out.append(Condition(str(c.get("status") or "Unknown"), ConditionStatus.TRUE, None, None,
                                     t if t is not None else created or 0.0))
        return out

    # -- control ---------------------------------------------------------------------------------------

    def suspend(self, kube: Kube, job: FoundJob, suspend: bool, caps: Served) -> None:
        """What ``vcctl job suspend/resume`` does: a bus.volcano.sh Command the Volcano controller executes."""
        if not caps.serves(COMMANDS.group, COMMANDS.version):
            raise KubernetesError(
                f"job {job.name} is a Volcano job: suspending and resuming it takes Volcano's Command API "
                f"({COMMANDS.api_version}), which this cluster does not serve; cancel it instead, or use vcctl")
        action = "AbortJob" if suspend else "ResumeJob"
        root = job.root
        ref = {"apiVersion": root["apiVersion"], "kind": root["kind"], "name": meta(root)["name"],
               "uid": meta(root)["uid"]}
        body = {"apiVersion": COMMANDS.api_version, "kind": COMMANDS.kind,
                "metadata": {"generateName": f"{meta(root)['name']}-{action.lower()}-", "namespace": job.namespace,
                             "ownerReferences": [{**ref, "controller": True}]},
                "action": action, "target": ref}
        kube.create(COMMANDS, body, job.namespace)
        kube.merge_patch(VOLCANO_JOBS, meta(root)["name"], job.namespace, paused_patch(suspend))

    def pending_causes(self, kube: Kube, namespace: str, root: Mapping[str, Any]) -> list[Diagnosis]:
        """The job's PodGroup: a gang Volcano cannot place says so in its Unschedulable condition."""
        from ..diagnosis import Diagnosis

        uid = meta(root).get("uid", "")
        try:
            items, _ = kube.list(PODGROUPS, namespace)
        except ApiError as exc:
            if exc.status in (403, 404):
                return []
            raise
        groups = [g for g in items if any(o.get("uid") == uid for o in meta(g).get("ownerReferences") or [])]
        out = []
        for pg in groups:
            status = pg.get("status") or {}
            if status.get("phase") in ("Running", "Completed"):
                continue
            unsched = next((c for c in conditions_of(pg) if c.get("type") == "Unschedulable"
                            and c.get("status") == "True"), None)
            min_member = (pg.get("spec") or {}).get("minMember")
            queue = (pg.get("spec") or {}).get("queue") or "default"
            message = ((unsched or {}).get("message")
                       or f"PodGroup {meta(pg).get('name')} is {status.get('phase') or 'Pending'}")
            out.append(Diagnosis("PodGroup", message,
                                 f"the gang needs {min_member} pods placed at once (minAvailable) and queue {queue} "
                                 f"must have room for all of them: kubectl get queue {queue} -o yaml"))
        return out


def _task(ctx: Ctx, view: RoleView) -> dict[str, Any]:
    from ..manifests.pod import PodStyle, pod_template

    style = PodStyle(index_env=INDEX_ENV, engine_env=("VC_TASK_INDEX",), pod_scheduler=False)
    task = ctx.layout.role_names.get(view.role, view.role)
    out: dict[str, Any] = {"name": task, "replicas": view.replicas, "template": pod_template(ctx, view, style)}
    # A role with a restartPolicy of its own: its task's policies, which Volcano reads before the job's.
    policies = task_policies(ctx, view.role)
    if (ctx.launcher_style and not view.hosting) or view.role in (ctx.spec.run_policy.success_roles or ()):
        # The hosting replicas never finish on their own: the job is done when the launcher is (or the roles
        # runPolicy.successRoles names).
        policies.append({"event": "TaskCompleted", "action": "CompleteJob"})
    if policies:
        out["policies"] = policies
    return out


FLAVOR = VolcanoFlavor(
    name="volcano",
    summary="one Volcano Job, a task per role; gang scheduled, queue, policies",
    group=VOLCANO_JOBS.group,
    version=VOLCANO_JOBS.version,
    resources=(VOLCANO_JOBS,),
    install="Volcano (https://volcano.sh)",
    features=FEATURES["volcano"],
    oversize_hint="the jobset flavor's objects do not grow with the replica count",
    gpu_share_resources=("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores"),
    controller=CONTROLLER,
)


def _failure_policies(ctx: Ctx, policy: str) -> list[dict[str, Any]]:
    """Volcano policies for a pod failure under `policy`. Volcano takes the first policy that matches an
    event, so exit-code rules come before the PodFailed restart."""
    from ..manifests.policy import permanent_codes, restarts_allowed

    restarts = restarts_allowed(ctx) if policy != "Never" else 0
    out: list[dict[str, Any]] = []
    if policy == "ExitCode" and restarts:
        out += [{"exitCode": code, "action": "TerminateJob"} for code in permanent_codes(ctx)]
    out.append({"event": "PodFailed", "action": "RestartJob" if restarts else "TerminateJob"})
    return out


def job_policies(ctx: Ctx) -> tuple[list[dict[str, Any]], int]:
    """(job policies, maxRetry), for the job's restartPolicy; see `task_policies` for roles with
    their own."""
    from ..manifests.policy import restarts_allowed

    restarts = restarts_allowed(ctx)
    policies = _failure_policies(ctx, ctx.spec.job_restart_policy())
    evicted = "TerminateJob" if ctx.spec.scheduling.terminate_after_preemption else "RestartJob"
    policies.append({"event": "PodEvicted", "action": evicted})
    # Volcano's webhook turns maxRetry 0 into 3; a preemption restart still needs room to happen.
    return policies, max(restarts, 1)


def task_policies(ctx: Ctx, role: str) -> list[dict[str, Any]]:
    """A task's own failure policies when its role's restartPolicy is not the job's ([] otherwise). Volcano
    reads a task's policies before the job's, so they win for its pods."""
    from ..manifests.policy import role_policy

    policy = role_policy(ctx, role)
    if policy == ctx.spec.job_restart_policy():
        return []
    return _failure_policies(ctx, policy)


__all__ = ["API_VERSION", "COMMANDS", "FLAVOR", "INDEX_ENV", "PODGROUPS", "VOLCANO_JOBS", "VOLCANO_QUEUES",
           "VolcanoFlavor"]
