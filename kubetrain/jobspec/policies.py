"""The job's policies: how it is retried and bounded in time (RunPolicy, ExitCodes, restartPolicy), and the
modes that change how its replicas are counted (Elastic, Trials) or rendered (Mpi)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .errors import FieldError, SpecError
from .types import INT32_MAX, MAX_DEADLINE_SECONDS, MAX_REPLICAS, SpecModel, WholeNumber


class RunPolicy(SpecModel):
    """How the job as a whole is retried, bounded in time and cleaned up (Kubeflow's RunPolicy)."""

    backoff_limit: WholeNumber | None = Field(default=None, ge=0, le=INT32_MAX)
    """Restarts before the job fails (Kubeflow's and Run:ai's backoffLimit). Given without a restartPolicy,
    it means restartPolicy OnFailure: failed replicas are restarted up to this many times. Not given: 6
    (the Kubernetes Job controller's and Run:ai's default) where a restartPolicy restarts (OnFailure, Always,
    ExitCode), else 0. With restartPolicy Never it must be 0. A restart restarts the whole replica group
    (locally, jobset, volcano) or the failed pod (job, kubeflow), after a back-off that doubles each time:
    locally from 1 s up to 1 min (status: reason BackOff, with the time of the next attempt); on Kubernetes
    the engine's own (the Job controller's: from 10 s up to 6 min)."""
    active_deadline_seconds: WholeNumber | None = Field(default=None, gt=0, le=MAX_DEADLINE_SECONDS)
    """Wall-clock limit for the job, counted from its start; then every replica is stopped and the job fails."""
    ttl_seconds_after_finished: WholeNumber | None = Field(default=None, ge=0, le=INT32_MAX)
    """Delete the finished job's objects after this many seconds (Run:ai's autoDeletion)."""
    clean_pod_policy: Literal["All", "Running", "None"] | None = None
    """Which pods to delete when the job ends: All, Running (still running ones), or None."""
    suspend: bool = False
    """Create the job without starting it; the same as runMode: Pause."""
    success_roles: list[str] | None = None
    """The job succeeds once every replica of these roles has exited 0; the other roles' replicas are then
    stopped (a Volcano task's TaskCompleted → CompleteJob, a JobSet's successPolicy on some replicated Jobs: the
    servers beside a driver never end on their own). Not given: every replica that runs a program must exit 0."""


class ExitCodes(SpecModel):
    """Overrides of restartPolicy ExitCode's rule (1–127 permanent, 128–255 retried)."""

    retryable: list[WholeNumber] = Field(default_factory=list)
    """Exit codes to retry even if in 1–127."""
    permanent: list[WholeNumber] = Field(default_factory=list)
    """Exit codes that fail the job at once even if in 128–255."""

    @model_validator(mode="after")
    def _valid(self) -> ExitCodes:
        problems = []
        for name in ("retryable", "permanent"):
            for i, code in enumerate(getattr(self, name)):
                if not 1 <= code <= 255:
                    problems.append(FieldError((name, i), "must be an exit code 1–255", code, True))
        both = sorted(set(self.retryable) & set(self.permanent))
        if both:
            problems.append(FieldError(("permanent",), f"codes {both} are also listed as retryable"))
        if problems:
            raise SpecError(problems)
        return self


class Elastic(SpecModel):
    """Elastic training (DeepSpeedJob's ElasticConfig): the job keeps running with any worker count in
    [minReplicas, maxReplicas] (torchrun's elastic agent, on every backend), starting with expectedReplicas."""

    enabled: bool = True
    """false: the job is not elastic, the whole block is ignored (DeepSpeedJob's elastic.enabled).
    minReplicas and maxReplicas may then be left out."""
    min_replicas: WholeNumber | None = Field(default=None, ge=1, le=MAX_REPLICAS)
    """Fewest workers the job runs with (required when enabled)."""
    max_replicas: WholeNumber | None = Field(default=None, ge=1, le=MAX_REPLICAS)
    """Most workers the job runs with (required when enabled)."""
    expected_replicas: WholeNumber | None = Field(default=None, ge=1, le=MAX_REPLICAS)
    """Worker replicas the job starts with (the worker role's replicas), in [minReplicas, maxReplicas].
    Given alone, it sets the worker role's replicas; given with them, it must equal them; not given, it is
    them. The same on every backend."""
    max_restarts: WholeNumber = Field(default=3, ge=0, le=INT32_MAX)
    """Membership changes / failures the elastic agent tolerates before giving up."""

    @model_validator(mode="after")
    def _ordered(self) -> Elastic:
        if not self.enabled:
            return self
        problems = [
            FieldError((name,), "is required for elastic training", hint="or set enabled: false")
            for name, value in (("minReplicas", self.min_replicas), ("maxReplicas", self.max_replicas))
            if value is None
        ]
        if self.min_replicas is None or self.max_replicas is None:
            raise SpecError(problems)
        if self.max_replicas < self.min_replicas:
            problems.append(
                FieldError(("maxReplicas",), f"must be ≥ minReplicas ({self.min_replicas})", self.max_replicas, True)
            )
        elif self.expected_replicas is not None and not (
            self.min_replicas <= self.expected_replicas <= self.max_replicas
        ):
            problems.append(
                FieldError(
                    ("expectedReplicas",),
                    f"must lie in [{self.min_replicas}, {self.max_replicas}]",
                    self.expected_replicas,
                    True,
                )
            )
        if problems:
            raise SpecError(problems)
        return self


class Trials(SpecModel):
    """Independent runs of the program, each a replica of its own, until `completions` of them have succeeded,
    at most `parallelism` at a time: a hyperparameter search's trials (Run:ai's completions and parallelism, a
    Kubernetes Job's). Run i gets KUBETRAIN_REPLICA_INDEX i (0 … completions-1) and KUBETRAIN_NUM_REPLICAS
    completions; the runs do not form one distributed job, so the framework is generic. A failed run is
    started again alone (its restartPolicy; every retry counts against runPolicy.backoffLimit) while the
    others go on; the job succeeds once every index has succeeded."""

    completions: WholeNumber = Field(ge=1, le=MAX_REPLICAS)
    """Successful runs the job needs (Run:ai's completions: "the number of successful pods the job should
    reach to be completed")."""
    parallelism: WholeNumber = Field(default=1, ge=1, le=MAX_REPLICAS)
    """Most runs at a time (Run:ai's parallelism; default 1, a Kubernetes Job's). At most completions: fewer
    run once fewer are left to do."""

    @model_validator(mode="after")
    def _at_most_completions(self) -> Trials:
        if self.parallelism > self.completions:
            raise SpecError([FieldError(("parallelism",), f"must be ≤ completions ({self.completions}): no more "
                                        "runs than there are to do ever run at once", self.parallelism, True)])
        return self


class Mpi(SpecModel):
    """MPI on Kubernetes (framework mpi). Locally mpirun starts every rank on this machine, without ssh: none of
    this is used there."""

    mpi_job_version: Literal["v1", "v2beta1"] = "v1"
    """The MPIJob the kubeflow flavor renders: v1, the training operator's (its launcher reaches the workers
    with kubectl exec), or v2beta1, the MPI Operator's (over ssh, with a key pair the operator makes; the
    workers run the image's /usr/sbin/sshd -De unless they name their own run). Other flavors render no
    MPIJob."""


RestartPolicy = Literal["Never", "OnFailure", "Always", "ExitCode"]

DEFAULT_BACKOFF_LIMIT = 6
"""runPolicy.backoffLimit when a restartPolicy restarts and none is given: the Kubernetes Job
controller's and Run:ai's default."""


__all__ = ["DEFAULT_BACKOFF_LIMIT", "Elastic", "ExitCodes", "Mpi", "RestartPolicy", "RunPolicy", "Trials"]
