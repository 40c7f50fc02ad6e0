"""restartPolicy, runPolicy, runMode and gang scheduling → each flavor's fields, or a clear refusal.

The spec's meaning (the local backend implements it exactly): a failed replica either ends the job or,
under its role's OnFailure/Always/ExitCode (retryable codes), restarts it, at most runPolicy.backoffLimit
times. restartPolicy not given: OnFailure when backoffLimit is, else Never; backoffLimit not given: 6 where
a policy restarts, else 0 (`JobSpec.job_restart_policy`, `restart_policy_of`, `backoff_limit_of`).
ExitCode: 1–127 permanent, 128–255 retried, overridden by exitCodes. A role's own restartPolicy
(`roles.<role>.restartPolicy`) is rendered where its replicas are: its Job (job), its replicatedJob's
failure rule (jobset), its task's policies (volcano), its replica spec (kubeflow).

What every flavor shares is here (the checks, the Indexed Jobs' fields of job and jobset); each flavor's own
fields are in its module (`..flavors.jobset.failure_policy`, `..flavors.volcano.job_policies`,
`..flavors.kubeflow.run_policy`). The table of what maps to what, per flavor, is in docs/render.md ("Policies").
"""

from __future__ import annotations

from typing import Any

from .context import Ctx

PERMANENT_RANGE = range(1, 128)
MAX_INDEXED_COMPLETIONS = 100_000


def restarts_allowed(ctx: Ctx) -> int:
    """How many times the job's failures may be retried: runPolicy.backoffLimit (its default applied), 0
    when no role's restartPolicy restarts."""
    if all(role_policy(ctx, view.role) == "Never" for view in ctx.roles):
        return 0
    return ctx.spec.backoff_limit_of()


def role_policy(ctx: Ctx, role: str) -> str:
    """The restartPolicy of `role`'s replicas: the role's own, else the job's."""
    return ctx.spec.restart_policy_of(role)


def role_restarts(ctx: Ctx, role: str) -> int:
    """How many times a failure of `role`'s replicas may be retried: 0 under its restartPolicy Never."""
    return 0 if role_policy(ctx, role) == "Never" else restarts_allowed(ctx)


def permanent_codes(ctx: Ctx) -> list[int]:
    """Exit codes that end the job at once under restartPolicy ExitCode (sorted, 1–255)."""
    codes = ctx.spec.exit_codes
    retryable = set(codes.retryable) if codes else set()
    permanent = set(codes.permanent) if codes else set()
    return sorted((set(PERMANENT_RANGE) - retryable) | permanent)


def suspended(ctx: Ctx) -> bool:
    return ctx.spec.run_policy.suspend or ctx.spec.run_mode == "Pause"


def _suspend_path(ctx: Ctx) -> tuple[str, ...]:
    return ("spec", "runMode") if ctx.spec.run_mode == "Pause" else ("spec", "runPolicy", "suspend")


# -- checks shared by the flavors ----------------------------------------------------------------------


EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"


def _exclusive_jobs(ctx: Ctx) -> None:
    """A JobSet's replicated Job of several Jobs with exclusive placement (a node pool per Job): rendered as one
    Job of all their pods, the placement would be one pool for every pod. Refused; one Job alone, or no
    exclusive placement, keeps its meaning."""
    controller = ctx.spec.controller
    if controller is None or EXCLUSIVE not in ctx.job.metadata.annotations or ctx.flavor.features.exclusive_jobs:
        return
    several = [(role, found.jobs) for role, found in controller.roles.items() if found.jobs and found.jobs > 1]
    for role, jobs in several:
        ctx.problems.add(("spec", "controller", "roles", role, "jobs"),
                         f"is {jobs} Jobs placed exclusively ({EXCLUSIVE}: a topology domain each), which the "
                         f"{ctx.flavor.name} flavor would render as one Job of all their pods, in one domain",
                         hint="run each Job as a JobSet of its own, or drop the annotation")


def check_common(ctx: Ctx) -> None:
    """Refuse what the flavor cannot express (its `Features`), naming the flavors that can."""
    spec, problems = ctx.spec, ctx.problems
    flavor, can = ctx.flavor.name, ctx.flavor.features
    policy = spec.run_policy
    if spec.scheduling.preemption_limit is not None:
        problems.unsupported(("spec", "scheduling", "preemptionLimit"), "a preemption limit", flavor, (),
                             hint="drop it; terminateAfterPreemption fails the job on the first preemption")
    if suspended(ctx) and not can.suspend:
        problems.unsupported(_suspend_path(ctx), "creating the job suspended", flavor,
                             ctx.flavors_that(lambda f: f.suspend))
    if policy.active_deadline_seconds is not None and not can.deadline:
        problems.unsupported(("spec", "runPolicy", "activeDeadlineSeconds"), "a deadline for the whole job", flavor,
                             ctx.flavors_that(lambda f: f.deadline))
    codes = spec.exit_codes
    if codes is not None and (codes.retryable or codes.permanent) and not can.exit_code_overrides:
        problems.unsupported(("spec", "exitCodes"), "exit code overrides", flavor,
                             ctx.flavors_that(lambda f: f.exit_code_overrides),
                             hint="without exitCodes, restartPolicy ExitCode is the operator's own rule")
    if spec.scheduling.terminate_after_preemption and not can.terminate_after_preemption:
        problems.unsupported(("spec", "scheduling", "terminateAfterPreemption"), "failing on preemption", flavor,
                             ctx.flavors_that(lambda f: f.terminate_after_preemption))
    if spec.trials is not None and not can.trials:
        problems.unsupported(("spec", "trials"), "independent runs (completions, at most parallelism at a time, "
                             "each retried alone)", flavor, ctx.flavors_that(lambda f: f.trials),
                             hint=f"the {flavor} flavor starts a job's pods together and restarts them as one")
    success = policy.success_roles
    if success and not can.success_roles and list(success) != [ctx.roles[0].role]:
        problems.unsupported(("spec", "runPolicy", "successRoles"), f"completing the job when {', '.join(success)} "
                             "completes", flavor, ctx.flavors_that(lambda f: f.success_roles),
                             hint=f"the {flavor} flavor's job completes when its first role ({ctx.roles[0].role}) does")
    _exclusive_jobs(ctx)
    clean = policy.clean_pod_policy
    if clean is not None and clean not in can.clean_pod_policies:
        problems.unsupported(
            ("spec", "runPolicy", "cleanPodPolicy"), f"cleanPodPolicy {clean}", flavor,
            ctx.flavors_that(lambda f: clean in f.clean_pod_policies),
            hint=f"the {flavor} flavor stops still-running pods when the job ends (cleanPodPolicy Running)",
        )


def check_indexed_completions(ctx: Ctx) -> None:
    """Kubernetes caps an Indexed Job's completions (and parallelism) at 100,000."""
    for view in ctx.roles:
        if view.replicas > MAX_INDEXED_COMPLETIONS:
            where = ("spec", "roles", view.role, "replicas") if ctx.spec.roles and view.role in ctx.spec.roles else (
                "spec", "replicas")
            ctx.problems.add(where, f"an Indexed Job runs at most {MAX_INDEXED_COMPLETIONS:,} replicas",
                             hint="split the role, or use the volcano flavor")


def gang_size(ctx: Ctx) -> int | None:
    """Replicas that must be placed together, or None when the spec asks for no gang."""
    scheduling = ctx.spec.scheduling
    if scheduling.min_available is not None:
        return scheduling.min_available
    if scheduling.gang:
        return ctx.total_replicas
    return None


# -- Indexed Jobs (job, jobset) --------------------------------------------------------------------------------


def pod_failure_policy(ctx: Ctx, role: str) -> dict[str, Any]:
    """Rules of `role`'s Job: a preemption either is requeued (Ignore: not counted) or fails the job;
    under the role's restartPolicy ExitCode, permanent exit codes fail it at once."""
    rules: list[dict[str, Any]] = [{
        "action": "FailJob" if ctx.spec.scheduling.terminate_after_preemption else "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }]
    if role_policy(ctx, role) == "ExitCode":
        rules.append({"action": "FailJob", "onExitCodes": {"operator": "In", "values": permanent_codes(ctx)}})
    return {"rules": rules}


def elastic_role(ctx: Ctx, role: str) -> bool:
    """`role`'s replicas may come and go while the job runs: the worker role of an elastic job."""
    elastic = ctx.spec.elastic
    return elastic is not None and elastic.enabled and role == "worker"


def elastic_annotation(ctx: Ctx) -> dict[str, str]:
    """The annotation an elastic job's workload carries: its bounds, which `kubetrain scale` keeps to."""
    elastic = ctx.spec.elastic
    if elastic is None or not elastic.enabled:
        return {}
    from ....contract.labels import ELASTIC_ANNOTATION

    return {ELASTIC_ANNOTATION: f"{elastic.min_replicas}:{elastic.max_replicas}"}


def elastic_index_policy(ctx: Ctx, role: str) -> dict[str, Any]:
    """An elastic role's Indexed Job fields (Kubernetes >= 1.31; GA in 1.33): a failed pod is its index's
    failure alone, recreated up to backoffLimit times for that index (backoffLimitPerIndex), while the other
    indexes run on: torchrun's agents re-form the rendezvous without the lost one and take it back when its
    new pod joins. The Job succeeds once minReplicas indexes have (successPolicy): a lost index that was not
    replaced (restartPolicy Never) does not fail a job whose survivors finished the training. {} for the
    other roles."""
    if not elastic_role(ctx, role):
        return {}
    elastic = ctx.spec.elastic
    assert elastic is not None and elastic.min_replicas is not None
    return {
        "backoffLimitPerIndex": role_restarts(ctx, role),
        "successPolicy": {"rules": [{"succeededCount": elastic.min_replicas}]},
    }


__all__ = [
    "check_common",
    "check_indexed_completions",
    "elastic_annotation",
    "elastic_index_policy",
    "elastic_role",
    "gang_size",
    "permanent_codes",
    "pod_failure_policy",
    "restarts_allowed",
    "role_policy",
    "role_restarts",
    "suspended",
]
