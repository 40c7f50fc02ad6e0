"""`Features`: what a flavor can express, the vocabulary render refuses a job in.

Each flavor (:mod:`.flavors`) declares its `Features`; render checks a job against the flavor it renders for and,
where it cannot express a field, names the flavors whose features can (the table of every flavor's features is
handed to render with the flavor: render knows no registry). Standard library only: the flavors import it when
they load, and status, list and logs load the flavors.
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


__all__ = ["Features"]
