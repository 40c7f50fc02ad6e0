"""Flavor `jobset`: one JobSet (jobset.x-k8s.io/v1alpha2), a replicatedJob per role (one Indexed Job each).

Replica `i` of role `r` is pod hostname `<base>-<r>-0-<i>` in the JobSet's subdomain (JobSet makes the
headless Service). Any failed Job restarts the whole JobSet (gang restart) up to failurePolicy.maxRestarts.
Where some replicas only host a launcher's processes (MPI, DeepSpeed's launcher), the launcher starts
once they are Ready (dependsOn) and the job succeeds when the launcher does (successPolicy).
Gang scheduling is Kueue's (scheduling.queue): the whole job is admitted at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ....contract.features import FEATURES
from ....contract.naming import dns1035_label
from ....status import JobPhase
from ..client.errors import KubernetesError
from ..client.resources import Resource
from ..workload import (
    EngineState,
    RoleInfo,
    cond_time,
    first_container,
    meta,
    paused_patch,
    suspended_phase,
    template_role,
    true_condition,
)
from .base import Controller, Flavor

if TYPE_CHECKING:
    from ....jobspec import JobSpec
    from ....jobspec.controller import Controller as SpecController
    from ..client.kube import Kube
    from ..manifests.context import Ctx, Layout, RoleView
    from ..served import Served
    from ..workload import FoundJob

JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
API_VERSION = JOBSETS.api_version
INDEX_ENV = "JOB_COMPLETION_INDEX"


CONTROLLER = Controller("the JobSet controller", ("jobset-system",), ("jobset-controller-manager",))
"""jobset's install (config/default, the Helm chart): the jobset-controller-manager Deployment in jobset-system."""


class JobSetFlavor(Flavor):
    # -- render ----------------------------------------------------------------------------------------

    def layout(self, name: str, counts: dict[str, int], spec: JobSpec | None = None) -> Layout:
        from ..manifests.context import Layout, base_name, room_for_base

        controller = spec.controller if spec is not None else None
        base = base_name(name, room_for_base(counts, len("-0")), rfc1035=False)
        # A JobSet's own subdomain is kept, so the names its pods reach each other by stay resolvable.
        own = controller.subdomain if self.runs_controller(controller) and controller is not None else None
        subdomain = own or dns1035_label(base)
        return Layout(base, f"{base}-{{role}}-0-{{index}}.{subdomain}", subdomain, INDEX_ENV)

    def runs_controller(self, controller: SpecController | None) -> bool:
        # A replicated Job of several Jobs is rendered as one Job of their pods: the Job controller would give
        # each pod its place in that one Job, so kubetrain gives the contract's indexes itself.
        return controller is not None and (controller.api_version, controller.kind) == (API_VERSION, "JobSet") and all(
            not r.jobs or r.jobs == 1 for r in controller.roles.values())

    def objects(self, ctx: Ctx) -> list[dict[str, Any]]:
        from ..manifests.policy import check_common, check_indexed_completions, suspended

        check_common(ctx)
        check_indexed_completions(ctx)
        _check_gang(ctx)
        hosts = [v for v in ctx.roles if v.hosting]
        runners = [v for v in ctx.roles if not v.hosting]
        # Hosting roles first: a replicatedJob may only depend on the ones listed before it.
        ordered = hosts + runners if hosts else ctx.roles
        jobs = [_replicated_job(ctx, v) for v in ordered]
        if hosts:
            for job in jobs[len(hosts):]:
                job["dependsOn"] = [{"name": v.role, "status": "Ready"} for v in hosts]
        spec: dict[str, Any] = {
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True,
                        "subdomain": ctx.layout.service},
            "replicatedJobs": jobs,
            "failurePolicy": failure_policy(ctx),
        }
        success = ctx.spec.run_policy.success_roles
        if success:
            spec["successPolicy"] = {"operator": "All", "targetReplicatedJobs": list(success)}
        elif hosts:
            spec["successPolicy"] = {"operator": "All", "targetReplicatedJobs": [v.role for v in runners]}
        if suspended(ctx):
            spec["suspend"] = True
        ttl = ctx.spec.run_policy.ttl_seconds_after_finished
        if ttl is not None:
            spec["ttlSecondsAfterFinished"] = ttl
        return [{
            "apiVersion": API_VERSION,
            "kind": JOBSETS.kind,
            "metadata": ctx.metadata(ctx.layout.base, queue_label=True),
            "spec": spec,
        }]

    # -- control: scale -------------------------------------------------------------------------------

    def scale(self, kube: Kube, job: FoundJob, replicas: int) -> None:
        raise KubernetesError(
            f"job {job.name}: a JobSet's replicatedJobs cannot change once created (the JobSet webhook refuses "
            "it), so a jobset job keeps its number of workers; it still survives a lost worker pod, which its "
            "worker Job recreates alone. The job and kubeflow flavors scale"
        )

    # -- status ----------------------------------------------------------------------------------------

    def roles(self, workloads: Sequence[Mapping[str, Any]]) -> list[RoleInfo]:
        out: list[RoleInfo] = []
        if not workloads:
            return out
        for rj in (workloads[0].get("spec") or {}).get("replicatedJobs") or []:
            jspec = (rj.get("template") or {}).get("spec") or {}
            completions = int(jspec.get("completions") or jspec.get("parallelism") or 1)
            role = template_role(rj.get("template") or {}, rj.get("name", "job"))
            out.append(RoleInfo(role, int(rj.get("replicas", 1)) * completions, completions,
                                first_container(jspec.get("template") or {})))
        return out

    def engine_state(self, workloads: Sequence[Mapping[str, Any]]) -> EngineState:
        js = workloads[0]
        spec, status = js.get("spec") or {}, js.get("status") or {}
        limit = (spec.get("failurePolicy") or {}).get("maxRestarts")
        restarts = int(status.get("restarts") or 0)
        failed = true_condition(js, "Failed")
        if failed:
            action = f"restarted {restarts}/{limit}, gave up" if limit else None
            return EngineState(JobPhase.FAILED, failed.get("reason"), failed.get("message"), cond_time(failed),
                               restarts, limit, action)
        done = true_condition(js, "Completed")
        if done:
            return EngineState(JobPhase.SUCCEEDED, None, None, cond_time(done), restarts, limit)
        if spec.get("suspend") or true_condition(js, "Suspended"):
            state = suspended_phase(js)
            state.backoff_count, state.backoff_limit = restarts, limit
            return state
        return EngineState(JobPhase.RUNNING, backoff_count=restarts, backoff_limit=limit)

    # -- control ---------------------------------------------------------------------------------------

    def suspend(self, kube: Kube, job: FoundJob, suspend: bool, caps: Served) -> None:
        kube.merge_patch(JOBSETS, meta(job.root)["name"], job.namespace,
                         {**paused_patch(suspend), "spec": {"suspend": suspend}})


def _check_gang(ctx: Ctx) -> None:
    from ..manifests.policy import gang_size

    gang = gang_size(ctx)
    scheduling = ctx.spec.scheduling
    if gang is not None and gang < ctx.total_replicas:
        ctx.problems.unsupported(("spec", "scheduling", "minAvailable"),
                                 f"a gang of {gang} of the job's {ctx.total_replicas} replicas", ctx.flavor.name,
                                 ctx.flavors_that(lambda f: f.partial_gang),
                                 hint="jobset gangs the whole job (through Kueue)")
    elif gang is not None and not scheduling.queue:
        without = ", ".join(ctx.flavors_that(lambda f: f.gang and not f.gang_needs_kueue))
        ctx.problems.add(("spec", "scheduling", "gang" if scheduling.gang else "minAvailable"),
                         "the jobset flavor gangs a job through Kueue, which needs scheduling.queue "
                         f"(a LocalQueue); flavors that gang without Kueue: {without}")


def _replicated_job(ctx: Ctx, view: RoleView) -> dict[str, Any]:
    from ..manifests.pod import PodStyle, pod_template
    from ..manifests.policy import elastic_index_policy, pod_failure_policy

    job_spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": view.replicas,
        "parallelism": view.replicas,
        "backoffLimit": 0,  # a failure fails the Job; the JobSet's failurePolicy decides what follows
        "podFailurePolicy": pod_failure_policy(ctx, view.role),
    }
    elastic = elastic_index_policy(ctx, view.role)
    if elastic:
        # An elastic role's child Job replaces its own lost pods (per index) and never fails for one: the
        # JobSet's gang restart is left for the other roles and for an index out of retries.
        del job_spec["backoffLimit"]
        job_spec.update(elastic)
    if ctx.spec.run_policy.active_deadline_seconds is not None:
        job_spec["activeDeadlineSeconds"] = ctx.spec.run_policy.active_deadline_seconds
    job_spec["template"] = pod_template(ctx, view, PodStyle(index_env=INDEX_ENV))
    template_meta: dict[str, Any] = {"labels": ctx.labels(view.role)}
    if elastic:  # what the status reads to say a job that lost workers is degraded
        from ..manifests.policy import elastic_annotation

        template_meta["annotations"] = elastic_annotation(ctx)
    return {"name": view.role, "replicas": 1, "template": {"metadata": template_meta, "spec": job_spec}}


FLAVOR = JobSetFlavor(
    name="jobset",
    summary="one JobSet, a replicatedJob per role; gang restart",
    group=JOBSETS.group,
    version=JOBSETS.version,
    resources=(JOBSETS,),
    install="the JobSet controller (https://jobset.sigs.k8s.io)",
    auto=0,
    index_fields=("metadata.annotations['batch.kubernetes.io/job-completion-index']",
                  "metadata.labels['batch.kubernetes.io/job-completion-index']"),
    features=FEATURES["jobset"],
    controller=CONTROLLER,
)


def failure_policy(ctx: Ctx) -> dict[str, Any]:
    """Gang restart: any failed Job restarts the whole JobSet, maxRestarts times; a Job of a role whose
    restartPolicy is Never, or failed by its podFailurePolicy (permanent exit code, preemption with
    terminateAfterPreemption), fails the JobSet."""
    from ..manifests.policy import restarts_allowed, role_policy

    restarts = restarts_allowed(ctx)
    out: dict[str, Any] = {"maxRestarts": restarts}
    # JobSet's webhook takes rule names matching ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$ only.
    rules: list[dict[str, Any]] = []
    never = [view.role for view in ctx.roles if role_policy(ctx, view.role) == "Never"]
    if restarts and never:
        rules.append({"name": "NotRestarted", "action": "FailJobSet", "targetReplicatedJobs": never})
    exit_code = any(role_policy(ctx, view.role) == "ExitCode" for view in ctx.roles)
    if exit_code or ctx.spec.scheduling.terminate_after_preemption:
        rules.append({"name": "PermanentFailure", "action": "FailJobSet",
                      "onJobFailureReasons": ["PodFailurePolicy"]})
    if rules:
        out["rules"] = rules
    return out


__all__ = ["API_VERSION", "FLAVOR", "INDEX_ENV", "JOBSETS", "JobSetFlavor"]
