"""`Features`: what each Kubernetes flavor can express, one record per flavor (`FEATURES`).

Two readers decide by these records, so they are written once, here, below both: render (a flavor's
`Flavor.features` is its record; render refuses what a flavor cannot express and names the flavors whose
records can, handed every record with the flavor: render knows no registry) and the parity table
(`kubetrain.parity`), whose cells for these facts are derived from the records, so changing a record changes
what render does, what docs/parity.md says and what the parity tests hold the two to. The parity table sits
below the backends (the local backend reads it), hence here: standard library only, like the rest of the
contract. `FEATURES` is in `choices.FLAVORS`' order, and a test holds each flavor's `features` to its record.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Features:
    """What a flavor can express. Render refuses the rest, naming the flavors whose features allow it."""

    suspend: bool = True
    """Create the job suspended (runMode Pause, runPolicy.suspend)."""
    deadline: bool = True
    """A deadline for the whole job (runPolicy.activeDeadlineSeconds)."""
    exit_code_overrides: bool = True
    """exitCodes (retryable / permanent) beside restartPolicy ExitCode."""
    terminate_after_preemption: bool = True
    """Fail the job on the first preemption (scheduling.terminateAfterPreemption)."""
    clean_pod_policies: tuple[str, ...] = ("Running",)
    """The runPolicy.cleanPodPolicy values it honours."""
    gang: bool = False
    """Gang scheduling of the whole job (scheduling.gang, minAvailable = every replica)."""
    partial_gang: bool = False
    """A gang smaller than the job (scheduling.minAvailable below the replica count)."""
    gang_needs_kueue: bool = False
    """Its gang is Kueue's: it needs scheduling.queue (a LocalQueue)."""
    every_framework: bool = True
    """Runs any framework, generic jobs and launcher roles included (the training operator has a kind per
    framework instead)."""
    pod_scheduler: bool = True
    """The pods' schedulerName is kubetrain's to set (Run:ai, gpushare); False: the engine schedules its own."""
    kueue_queue: bool = True
    """scheduling.queue is a Kueue LocalQueue (a label on the root); False: the engine's own queue."""
    trials: bool = False
    """Independent runs retried alone, at most parallelism at a time (spec.trials: an Indexed Job's completions
    and parallelism)."""
    success_roles: bool = False
    """The job completes when some roles have (runPolicy.successRoles, any of them); False: only when its first
    role has, the engine's own rule (the job flavor's root Job, the training operator's master)."""
    exclusive_jobs: bool = False
    """A replicated Job of several Jobs keeps one Job each (a JobSet's exclusive-topology placement)."""


FEATURES: dict[str, Features] = {
    "job": Features(trials=True),
    "jobset": Features(success_roles=True, gang=True, gang_needs_kueue=True),
    "volcano": Features(success_roles=True, suspend=False, deadline=False, gang=True, partial_gang=True,
                        pod_scheduler=False, kueue_queue=False),
    "kubeflow": Features(exit_code_overrides=False, terminate_after_preemption=False,
                         clean_pod_policies=("All", "Running", "None"), gang=True, partial_gang=True,
                         every_framework=False),
}
"""Each flavor's record, by name (`choices.FLAVORS`' order): what `FLAVORS[name].features` is."""


__all__ = ["FEATURES", "Features"]
