"""The job model: a TrainJob document (`apiVersion: kubetrain.dev/v1alpha1`, `kind: TrainJob`), its spec
(`JobSpec`, with its roles) and metadata.

The parts a spec is made of live beside it, each with its own concern: the program (`program.py`), the
policies (`policies.py`), what every replica gets (`replica_settings.py`), and the checks that read several
fields at once (`spec_checks.py`). Their public names are importable from here as well.

Field docstrings are the reference text that `kubetrain explain` prints and `kubetrain schema` publishes.
"""

from __future__ import annotations

import copy
import os
from typing import Any, Literal

from pydantic import AliasChoices, Field, PrivateAttr, field_validator, model_validator

from ..contract.frameworks import record_of
from ..contract.naming import is_dns_label
from .controller import Controller
from .errors import FieldError, SpecError, format_path
from .frameworks import Framework
from .policies import DEFAULT_BACKOFF_LIMIT, Elastic, ExitCodes, Mpi, RestartPolicy, RunPolicy, Trials
from .program import Port, Run
from .replica_settings import (
    Annotations,
    DistributedConfig,
    Labels,
    PodOptions,
    ReplicaSettings,
    Scheduling,
    Security,
    merge_settings,
    settings_dict,
)
from .resources import Resources
from .spec_checks import DEFAULT_ROLE, spec_problems
from .types import MAX_REPLICAS, SpecModel, WholeNumber

API_VERSION = "kubetrain.dev/v1alpha1"
KIND = "TrainJob"


class RoleSpec(ReplicaSettings):
    """One role (worker, ps, chief, launcher, ...): its replica count and its overrides of the job's settings."""

    replicas: WholeNumber = Field(default=1, ge=1, le=MAX_REPLICAS)
    restart_policy: RestartPolicy | None = None
    """This role's restartPolicy, over the job's (DeepSpeedJob's worker restartPolicy): what a failure of
    one of its replicas does. Restarts count against the job's runPolicy.backoffLimit."""


class JobSpec(ReplicaSettings):
    """What to run, how many, where, and under which policies."""

    framework: Framework = Framework.GENERIC
    """pytorch | tensorflow | deepspeed | mpi | jax | generic: decides the env and launcher of each replica."""
    base: str | None = None
    """Inherit from a template: a file (relative to this one) or a name in the templates folder.
    Deep-merged; this file wins. Resolved when the file is loaded: the loaded job holds the merged result."""
    replicas: WholeNumber | None = Field(default=None, ge=1, le=MAX_REPLICAS)
    """Shorthand for one role named `worker` with this many replicas."""
    roles: dict[str, RoleSpec] | None = None
    """Roles by name, each with replicas and overrides: {worker: {replicas: 4}, ps: {replicas: 2}}."""
    local_rank: bool = False
    """Also pass `--local_rank=N` to the program (DeepSpeed's legacy argument)."""
    service_account: str | None = None
    api_access: bool = False
    """The replicas read the Kubernetes API (kubetrain.resolver.KubernetesClusterResolver): on Kubernetes, mount
    a service account token and render a Role that may get/list the namespace's pods (`kubetrain rbac`)."""
    tty: bool = False
    stdin: bool = False
    restart_policy: RestartPolicy | None = None
    """On a replica's failure: Never restart; OnFailure (Always is the same for a job: a replica that exits 0
    is done); ExitCode (exit codes 1–127 permanent, 128–255 retried). Not given: OnFailure when
    runPolicy.backoffLimit is given, else Never. A role may set its own (roles.<role>.restartPolicy).
    Restarts count against runPolicy.backoffLimit (default 6 under OnFailure, Always, ExitCode)."""
    exit_codes: ExitCodes | None = None
    """Overrides for restartPolicy ExitCode (the job's or a role's)."""
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    run_mode: Literal["Immediate", "Debug", "Pause"] = "Immediate"
    """Immediate: start now. Pause: create without starting (resume later). Debug: start the replicas with
    their environment but hold the program, so you can attach and run it by hand."""
    elastic: Elastic | None = None
    """Elastic training (pytorch, deepspeed): the worker role may shrink and grow in [minReplicas,
    maxReplicas] while the job runs. `enabled: false` ignores the block."""
    scheduling: Scheduling = Field(default_factory=Scheduling)
    ssh_auth_mount_path: str | None = None
    """On Kubernetes, give the job's pods an ssh key pair of their own, mounted in each at this folder as
    `id_rsa`, `id_rsa.pub` and `authorized_keys` (the MPI Operator's sshAuthMountPath; Volcano's ssh plugin's
    --ssh-key-file-path): for programs that ssh between the pods themselves, such as MPI workers that run their
    own sshd (`roles.worker.run: {exec: [/usr/sbin/sshd, -De]}`, where /root/.ssh is the default) or an mpiexec
    of your own. MPI workers without a program of their own need none: they run kubetrain's sshd, with keys of
    its own. Locally, processes need no ssh."""
    mpi: Mpi | None = None
    """MPI on Kubernetes (framework mpi): which MPIJob the kubeflow flavor renders."""
    trials: Trials | None = None
    """Independent runs of the program instead of one distributed job: `completions` successful runs, at most
    `parallelism` at a time (Run:ai's completions and parallelism). Not with replicas, roles or elastic."""
    controller: Controller | None = None
    """The controller whose contract the replicas get (a converted foreign file's: its kind, name and the
    parameters its controller reads). Each container's command then runs as written, with every variable, file
    and host name that controller would give it, instead of the framework's wiring (docs/foreign.md)."""

    @field_validator("ssh_auth_mount_path")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError("must be an absolute path (the folder the keys are mounted at)")
        return value

    @field_validator("roles")
    @classmethod
    def _role_names(cls, value: dict[str, RoleSpec] | None) -> dict[str, RoleSpec] | None:
        if value is not None and not value:
            raise ValueError("must name at least one role")
        return value

    @field_validator("elastic")
    @classmethod
    def _elastic_enabled(cls, value: Elastic | None) -> Elastic | None:
        # DeepSpeedJob's `enabled: false`: the block is ignored, as if it were not there.
        return value if value is None or value.enabled else None

    @model_validator(mode="after")
    def _cross_field(self) -> JobSpec:
        problems = spec_problems(self)
        if problems:
            raise SpecError(problems)
        return self

    # -- restarts (derived, pure) ---------------------------------------------------------------------------

    def job_restart_policy(self) -> RestartPolicy:
        """The job's restartPolicy as it applies: the one given, else OnFailure when runPolicy.backoffLimit is
        given, else Never. Roles without their own follow it."""
        if self.restart_policy is not None:
            return self.restart_policy
        return "OnFailure" if self.run_policy.backoff_limit is not None else "Never"

    def restart_policy_of(self, role: str) -> RestartPolicy:
        """The restartPolicy of `role`'s replicas: the role's own, else the job's (`job_restart_policy`)."""
        override = self.roles.get(role) if self.roles is not None else None
        if override is not None and override.restart_policy is not None:
            return override.restart_policy
        return self.job_restart_policy()

    def backoff_limit_of(self) -> int:
        """runPolicy.backoffLimit as it applies: the one given, else `DEFAULT_BACKOFF_LIMIT` when a restart
        policy (the job's or a role's) restarts, else 0."""
        if self.run_policy.backoff_limit is not None:
            return self.run_policy.backoff_limit
        policies = {self.job_restart_policy(), *(self.restart_policy_of(role) for role in self.roles or {})}
        return DEFAULT_BACKOFF_LIMIT if policies - {"Never"} else 0

    # -- derived views (pure) --------------------------------------------------------------------------

    def role_replicas(self) -> dict[str, int]:
        """Replicas per role, in the framework's role order (then the order written)."""
        if self.roles is None:
            return {DEFAULT_ROLE: self.trials.completions if self.trials is not None else self.replicas or 1}
        order = record_of(self.framework).roles or ()
        names = sorted(self.roles, key=lambda n: order.index(n) if n in order else len(order))
        return {name: self.roles[name].replicas for name in names}

    def role_settings(self, role: str) -> ReplicaSettings:
        """The job's settings with the role's overrides merged over them: what one replica of `role` gets."""
        if self.roles is None or role not in self.roles:
            if self.roles is not None:
                raise KeyError(role)
            return ReplicaSettings.model_validate(settings_dict(self))
        return merge_settings(self, self.roles[role])


class Metadata(SpecModel):
    """A job's name (or a prefix kubetrain completes), namespace, labels and annotations, as on any Kubernetes
    object: labels and annotations go on every object and pod of the job."""

    name: str | None = None
    """Job name: a DNS-1123 label (lowercase alphanumerics and '-', ≤ 63)."""
    name_prefix: str | None = Field(
        default=None, validation_alias=AliasChoices("namePrefix", "generateName", "name_prefix")
    )
    """Prefix for a generated unique name (Kubernetes generateName)."""
    namespace: str | None = None
    labels: Labels = Field(default_factory=dict)
    annotations: Annotations = Field(default_factory=dict)

    @model_validator(mode="after")
    def _naming(self) -> Metadata:
        problems = []
        if (self.name is None) == (self.name_prefix is None):
            problems.append(FieldError(("name",), "set exactly one of name and namePrefix"))
        if self.name is not None and not is_dns_label(self.name):
            problems.append(
                FieldError(
                    ("name",),
                    "must be a DNS-1123 label",
                    self.name,
                    True,
                    hint="lowercase letters, digits and '-', starting and ending with a letter or digit, ≤ 63",
                )
            )
        if self.name_prefix is not None and not is_dns_label(self.name_prefix.rstrip("-") or "x", max_len=52):
            problems.append(
                FieldError(
                    ("namePrefix",), "must be a DNS-1123 label prefix of ≤ 52 characters", self.name_prefix, True
                )
            )
        if self.namespace is not None and not is_dns_label(self.namespace):
            problems.append(FieldError(("namespace",), "must be a DNS-1123 label", self.namespace, True))
        if problems:
            raise SpecError(problems)
        return self

    @property
    def display_name(self) -> str:
        return self.name or (self.name_prefix or "job").rstrip("-")


class TrainJob(SpecModel):
    """A distributed training job: the same document runs as local processes or on Kubernetes."""

    api_version: Literal["kubetrain.dev/v1alpha1"] = Field(default="kubetrain.dev/v1alpha1", alias="apiVersion")
    kind: Literal["TrainJob"] = "TrainJob"
    metadata: Metadata
    spec: JobSpec
    _base_dir: str | None = PrivateAttr(default=None)
    _source: dict[str, Any] | None = PrivateAttr(default=None)
    _unconverted: SpecError | None = PrivateAttr(default=None)

    @property
    def name(self) -> str:
        return self.metadata.display_name

    @property
    def base_dir(self) -> str | None:
        """The folder relative paths of the job resolve against (its script, workingDir): the job file's
        folder when it was loaded from one, else None (the current folder)."""
        return self._base_dir

    def __eq__(self, other: object) -> bool:
        """Jobs are equal when their documents are: where a job was loaded from is not part of it."""
        if not isinstance(other, TrainJob):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # mutable, as pydantic models are

    @property
    def source(self) -> dict[str, Any] | None:
        """The foreign document this job was converted from, as its author wrote it (after `--set`), or None:
        what a cluster that runs that kind's controller is given as is."""
        return self._source

    def with_source(self, document: dict[str, Any] | None, unconverted: SpecError | None = None) -> TrainJob:
        """This job, remembering the foreign document it was converted from. ``unconverted``: the document could
        not be converted (this job only stands in for it): it can only be submitted as written, and anything
        else raises that error."""
        job = self.model_copy()
        job._source = None if document is None else copy.deepcopy(document)
        job._unconverted = unconverted
        return job

    @property
    def unconverted(self) -> SpecError | None:
        """Why the foreign document this job stands for could not be converted (None: it was)."""
        return self._unconverted

    def with_base_dir(self, path: str | os.PathLike[str] | None) -> TrainJob:
        """This job with relative paths resolving against `path`."""
        job = self.model_copy()
        job._base_dir = None if path is None else os.fspath(path)
        return job

    def to_dict(self) -> dict[str, Any]:
        """The document as plain data (camelCase), without defaults that were never set."""
        data: dict[str, Any] = self.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)
        return {"apiVersion": API_VERSION, "kind": KIND, **data}

    def with_config(self, config: DistributedConfig) -> TrainJob:
        """This job with Kale's DistributedConfig applied to every replica of every role.

        The config is merged over the job's own settings the way a role's are: env by name, maps merged,
        lists appended, affinity merged per kind (node, pod, pod anti-affinity: the config's wins where it sets
        one); its run_policy fields replace the job's.
        """
        merged = merge_settings(
            self.spec,
            ReplicaSettings.model_construct(
                _fields_set=config.model_fields_set - {"run_policy"},
                **{name: getattr(config, name) for name in PodOptions.model_fields},
            ),
        )
        update = {name: getattr(merged, name) for name in merged.model_fields_set}
        if config.run_policy is not None:
            update["run_policy"] = self.spec.run_policy.model_copy(
                update={f: getattr(config.run_policy, f) for f in config.run_policy.model_fields_set}
            )
        spec = self.spec.model_copy(update=update)
        spec.model_fields_set.update(update)
        return self.model_copy(update={"spec": spec})


__all__ = [
    "API_VERSION",
    "DEFAULT_BACKOFF_LIMIT",
    "DEFAULT_ROLE",
    "KIND",
    "Controller",
    "DistributedConfig",
    "Elastic",
    "ExitCodes",
    "JobSpec",
    "Metadata",
    "Mpi",
    "PodOptions",
    "Port",
    "ReplicaSettings",
    "Resources",
    "RestartPolicy",
    "RoleSpec",
    "Run",
    "RunPolicy",
    "Scheduling",
    "Security",
    "TrainJob",
    "Trials",
    "format_path",
    "merge_settings",
]
