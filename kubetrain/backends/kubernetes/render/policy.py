"""restartPolicy, runPolicy, runMode and gang scheduling → each flavor's fields, or a clear refusal.

The spec's meaning (the local backend implements it exactly): a failed replica either ends the job or,
under OnFailure/Always/ExitCode (retryable codes), restarts it, at most runPolicy.backoffLimit times
(default 0). ExitCode: 1–127 permanent, 128–255 retried, overridden by exitCodes.

The table of what maps to what, per flavor, is in docs/render.md ("Policies").
"""

from __future__ import annotations

from typing import Any

from ..flavors import flavors_that
from .context import Ctx

PERMANENT_RANGE = range(1, 128)
MAX_INDEXED_COMPLETIONS = 100_000


def restarts_allowed(ctx: Ctx) -> int:
    """How many times a failure may be retried: 0 under restartPolicy Never."""
    if ctx.spec.restart_policy == "Never":
        return 0
    return ctx.spec.run_policy.backoff_limit or 0


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
                             flavors_that(lambda f: f.suspend))
    if policy.active_deadline_seconds is not None and not can.deadline:
        problems.unsupported(("spec", "runPolicy", "activeDeadlineSeconds"), "a deadline for the whole job", flavor,
                             flavors_that(lambda f: f.deadline))
    codes = spec.exit_codes
    if codes is not None and (codes.retryable or codes.permanent) and not can.exit_code_overrides:
        problems.unsupported(("spec", "exitCodes"), "exit code overrides", flavor,
                             flavors_that(lambda f: f.exit_code_overrides),
                             hint="without exitCodes, restartPolicy ExitCode is the operator's own rule")
    if spec.scheduling.terminate_after_preemption and not can.terminate_after_preemption:
        problems.unsupported(("spec", "scheduling", "terminateAfterPreemption"), "failing on preemption", flavor,
                             flavors_that(lambda f: f.terminate_after_preemption))
    clean = policy.clean_pod_policy
    if clean is not None and clean not in can.clean_pod_policies:
        problems.unsupported(
            ("spec", "runPolicy", "cleanPodPolicy"), f"cleanPodPolicy {clean}", flavor,
            flavors_that(lambda f: clean in f.clean_pod_policies),
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


def pod_failure_policy(ctx: Ctx) -> dict[str, Any]:
    """Rules of each Job: a preemption either is requeued (Ignore: not counted) or fails the job;
    permanent exit codes fail it at once."""
    rules: list[dict[str, Any]] = [{
        "action": "FailJob" if ctx.spec.scheduling.terminate_after_preemption else "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }]
    if ctx.spec.restart_policy == "ExitCode":
        rules.append({"action": "FailJob", "onExitCodes": {"operator": "In", "values": permanent_codes(ctx)}})
    return {"rules": rules}


# -- jobset --------------------------------------------------------------------------------------------


def jobset_failure_policy(ctx: Ctx) -> dict[str, Any]:
    """Gang restart: any failed Job restarts the whole JobSet, maxRestarts times; a Job failed by its
    podFailurePolicy (permanent exit code, preemption with terminateAfterPreemption) fails the JobSet."""
    out: dict[str, Any] = {"maxRestarts": restarts_allowed(ctx)}
    if ctx.spec.restart_policy == "ExitCode" or ctx.spec.scheduling.terminate_after_preemption:
        # JobSet's webhook takes rule names matching ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$ only.
        out["rules"] = [{"name": "PermanentFailure", "action": "FailJobSet",
                         "onJobFailureReasons": ["PodFailurePolicy"]}]
    return out


# -- volcano -------------------------------------------------------------------------------------------


def volcano_policies(ctx: Ctx) -> tuple[list[dict[str, Any]], int]:
    """(job policies, maxRetry). Volcano takes the first policy that matches an event, so exit-code
    rules come before the PodFailed restart."""
    restarts = restarts_allowed(ctx)
    policies: list[dict[str, Any]] = []
    if ctx.spec.restart_policy == "ExitCode" and restarts:
        policies += [{"exitCode": code, "action": "TerminateJob"} for code in permanent_codes(ctx)]
    policies.append({"event": "PodFailed", "action": "RestartJob" if restarts else "TerminateJob"})
    evicted = "TerminateJob" if ctx.spec.scheduling.terminate_after_preemption else "RestartJob"
    policies.append({"event": "PodEvicted", "action": evicted})
    # Volcano's webhook turns maxRetry 0 into 3; a preemption restart still needs room to happen.
    return policies, max(restarts, 1)


# -- kubeflow ------------------------------------------------------------------------------------------


def kubeflow_run_policy(ctx: Ctx) -> dict[str, Any]:
    policy = ctx.spec.run_policy
    out: dict[str, Any] = {}
    if policy.clean_pod_policy is not None:
        out["cleanPodPolicy"] = policy.clean_pod_policy
    if policy.ttl_seconds_after_finished is not None:
        out["ttlSecondsAfterFinished"] = policy.ttl_seconds_after_finished
    if policy.active_deadline_seconds is not None:
        out["activeDeadlineSeconds"] = policy.active_deadline_seconds
    out["backoffLimit"] = restarts_allowed(ctx)
    if suspended(ctx):
        out["suspend"] = True
    gang = gang_size(ctx)
    if gang is not None:
        scheduling: dict[str, Any] = {"minAvailable": gang}
        if ctx.spec.scheduling.queue:
            scheduling["queue"] = ctx.spec.scheduling.queue
        if ctx.spec.scheduling.priority_class:
            scheduling["priorityClass"] = ctx.spec.scheduling.priority_class
        out["schedulingPolicy"] = scheduling
    return out


__all__ = [
    "check_common",
    "check_indexed_completions",
    "gang_size",
    "jobset_failure_policy",
    "kubeflow_run_policy",
    "permanent_codes",
    "pod_failure_policy",
    "restarts_allowed",
    "suspended",
    "volcano_policies",
]
