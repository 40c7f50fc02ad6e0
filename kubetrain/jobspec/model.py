"""The job model: a TrainJob document (`apiVersion: kubetrain.dev/v1alpha1`, `kind: TrainJob`).

Field docstrings are the reference text that `kubetrain explain` prints and `kubetrain schema` publishes.
"""

from __future__ import annotations

import copy
import os
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from ..contract.frameworks import frameworks_where, record_of
from ..contract.labels import NODE_POOL_LABEL, NODE_TYPE_LABEL
from ..contract.naming import is_dns_label, is_label_key, is_label_value
from .controller import Controller
from .convert import convert_validation_error
from .errors import FieldError, SpecError, format_path
from .frameworks import Framework
from .mounts import MountInput
from .pod_template import PodTemplate, has_args_only, template_program
from .resources import ResourceList, Resources
from .types import (
    INT32_MAX,
    MAX_DEADLINE_SECONDS,
    MAX_PROCS_PER_REPLICA,
    MAX_REPLICAS,
    Affinity,
    Arg,
    EnvFromList,
    EnvList,
    SpecModel,
    Tolerations,
    WholeNumber,
)

API_VERSION = "kubetrain.dev/v1alpha1"
KIND = "TrainJob"
DEFAULT_ROLE = "worker"


def _labels(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    problems = []
    for key, val in value.items():
        if not isinstance(key, str) or not is_label_key(key):
            problems.append(FieldError((str(key),), "is not a valid label key", hint="[prefix/]name, name ≤ 63 chars"))
        elif isinstance(val, str) and not is_label_value(val):
            problems.append(
                FieldError(
                    (key,),
                    "is not a valid label value",
                    val,
                    True,
                    hint="≤ 63 alphanumerics, '-', '_', '.', starting and ending alphanumeric",
                )
            )
    if problems:
        raise SpecError(problems)
    return value


def _annotations(value: Any) -> Any:
    if isinstance(value, dict):
        bad = [FieldError((str(k),), "is not a valid annotation key") for k in value if not is_label_key(str(k))]
        if bad:
            raise SpecError(bad)
    return value


Labels = Annotated[dict[str, str], BeforeValidator(_labels)]
Annotations = Annotated[dict[str, str], BeforeValidator(_annotations)]


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


class Run(SpecModel):
    """What each replica runs: exactly one of python, module, exec, customCommand (DeepSpeedJob's RunType), or
    entrypoint (the image's own ENTRYPOINT, on Kubernetes)."""

    python: list[Arg] | None = None
    """A script and its arguments: [train.py, --epochs, "3"]."""
    module: list[Arg] | None = None
    """A module run with `python -m` and its arguments: [my_pkg.train, --lr, "0.1"]."""
    exec: list[Arg] | None = None
    """A program and its arguments: [./train, --fast]."""
    custom_command: str | list[Arg] | None = None
    """Your own launch command, used as is instead of the framework's launcher. A string runs through
    `/bin/sh -c` (it is yours, so it is not quoted); a list runs directly. Env contract still applies."""
    entrypoint: list[Arg] | None = None
    """The image's own ENTRYPOINT runs, with these arguments (a container with args and no command; [] for
    neither): what a foreign file's container without a command means. The program is in the image, not in the
    job, so it runs on Kubernetes only (a local run is refused, naming the image: give the command instead),
    and kubetrain's start-up script cannot run before it: variables that depend on the replica's index are
    given only where the engine or the downward API can give them."""
    other_args: list[Arg] = Field(default_factory=list)
    """Extra arguments for the framework's launcher (torchrun, deepspeed, mpirun), before the program."""
    expand_env: bool = False
    """true: `$(NAME)` in the program's arguments (python, module, exec, a customCommand list, otherArgs) is the
    replica's variable NAME, by Kubernetes' rule for a container's args: `$$` is a `$`, a name the replica does
    not have stays as written. Each replica gets its own: `--out=/ckpt/$(KUBETRAIN_REPLICA_INDEX)`. Off: the
    arguments reach the program exactly as written (a customCommand string is a shell's and never expanded).
    A TorchX AppDef converts with it on, its macros written as references."""

    @model_validator(mode="after")
    def _exactly_one(self) -> Run:
        forms = ("python", "module", "exec", "custom_command", "entrypoint")
        given = [name for name in forms if getattr(self, name) is not None]
        if len(given) != 1:
            camel = {"custom_command": "customCommand"}
            shown = [camel.get(g, g) for g in given]
            message = "set exactly one of python, module, exec, customCommand, entrypoint"
            message += f" (got {', '.join(shown)})" if given else ""
            raise SpecError([FieldError((), message, hint="e.g. run: {python: [train.py, --steps, '20']}")])
        for name in ("python", "module", "exec"):
            value = getattr(self, name)
            if value is not None and not value:
                raise SpecError(
                    [FieldError((name,), "must name at least the program", hint=f"{name}: [program, args...]")]
                )
        if self.custom_command is not None and not self.custom_command:
            raise SpecError([FieldError(("customCommand",), "must not be empty")])
        return self


class Port(SpecModel):
    """A container port, optionally exposed through a Service (Run:ai's ports)."""

    container: WholeNumber = Field(ge=1, le=65535)
    external: WholeNumber | None = Field(default=None, ge=1, le=65535)
    """Port on the Service; defaults to the container port. With serviceType NodePort, the port opened on every
    node (the Service's nodePort; the cluster's range, 30000–32767 by default), the Service answering on the
    container port inside the cluster; not given, Kubernetes picks one."""
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    name: str | None = None
    """Port name (≤ 15 characters, lowercase alphanumerics and '-')."""
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not is_dns_label(value, max_len=15):
            raise ValueError("must be ≤ 15 lowercase alphanumerics or '-' (an IANA service name)")
        return value


_CAPABILITY = re.compile(r"[A-Z][A-Z0-9_]*")


class Security(SpecModel):
    """Security context. Defaults are locked down: no privilege escalation, all capabilities dropped,
    RuntimeDefault seccomp. Loosen only what the job needs."""

    run_as_user: bool = False
    """Run as the submitting user's uid/gid (Run:ai's runAsUser)."""
    run_as_uid: WholeNumber | None = Field(default=None, ge=0, le=INT32_MAX)
    run_as_gid: WholeNumber | None = Field(default=None, ge=0, le=INT32_MAX)
    run_as_non_root: bool | None = None
    supplemental_groups: list[Annotated[WholeNumber, Field(ge=0, le=INT32_MAX)]] = Field(default_factory=list)
    capabilities: list[str] = Field(default_factory=list)
    """Linux capabilities to add back (all others stay dropped), e.g. [IPC_LOCK, SYS_PTRACE]."""
    allow_privilege_escalation: bool = False
    privileged: bool = False
    """Full host access. Also implied by device mounts. kubetrain warns whenever a pod is privileged."""
    seccomp_profile_type: Literal["RuntimeDefault", "Unconfined", "Localhost"] = "RuntimeDefault"
    seccomp_localhost_profile: str | None = None
    read_only_root_filesystem: bool = False
    host_ipc: bool = False
    host_network: bool = False

    @field_validator("capabilities")
    @classmethod
    def _caps(cls, value: list[str]) -> list[str]:
        for cap in value:
            if cap.startswith("CAP_"):
                raise ValueError(f"write {cap[4:]!r} rather than {cap!r}: Kubernetes names capabilities without CAP_")
            if not _CAPABILITY.fullmatch(cap):
                raise ValueError(f"{cap!r} is not a capability name such as NET_ADMIN or SYS_PTRACE")
        return value

    @model_validator(mode="after")
    def _localhost(self) -> Security:
        if (self.seccomp_profile_type == "Localhost") != (self.seccomp_localhost_profile is not None):
            raise SpecError(
                [
                    FieldError(
                        ("seccompLocalhostProfile",), "is required with seccompProfileType Localhost, and only then"
                    )
                ]
            )
        if self.run_as_user and self.run_as_uid is not None:
            raise SpecError([FieldError(("runAsUid",), "conflicts with runAsUser: true (which takes your own uid)")])
        return self


class Scheduling(SpecModel):
    """Where and when replicas are placed."""

    queue: str | None = None
    """Queue name: a Kueue LocalQueue (kueue.x-k8s.io/queue-name label) or a Volcano queue."""
    priority_class: str | None = None
    node_pools: list[str] = Field(default_factory=list)
    """Node pools the replicas may run on: a required node affinity on these pools, and a preference for
    them in this order (weights descending)."""
    node_pool_label: str = NODE_POOL_LABEL
    """Node label that names a node's pool."""
    node_type: str | None = None
    """Required node type (a node selector on nodeTypeLabel)."""
    node_type_label: str = NODE_TYPE_LABEL
    gang: bool | None = None
    """Schedule all replicas together or none (Volcano minAvailable, JobSet/Kueue all-or-nothing)."""
    min_available: WholeNumber | None = Field(default=None, ge=1, le=MAX_REPLICAS)
    """Replicas that must be placed together for the job to start; implies gang; default: all."""
    preemption_limit: WholeNumber | None = Field(default=None, ge=0, le=INT32_MAX)
    """Preemptions tolerated before the job fails."""
    terminate_after_preemption: bool = False
    """Fail the job instead of requeueing it when a replica is preempted."""
    scheduler_name: str | None = None

    @field_validator("node_pool_label", "node_type_label")
    @classmethod
    def _label_key(cls, value: str) -> str:
        if not is_label_key(value):
            raise ValueError(f"{value!r} is not a valid label key")
        return value

    @field_validator("node_pools")
    @classmethod
    def _pools(cls, value: list[str]) -> list[str]:
        for pool in value:
            if not is_label_value(pool):
                raise ValueError(f"{pool!r} is not a valid label value (node pools are matched by label)")
        if len(set(value)) != len(value):
            raise ValueError("lists a node pool twice")
        return value


class Mpi(SpecModel):
    """MPI on Kubernetes (framework mpi). Locally mpirun starts every rank on this machine, without ssh: none of
    this is used there."""

    mpi_job_version: Literal["v1", "v2beta1"] = "v1"
    """The MPIJob the kubeflow flavor renders: v1, the training operator's (its launcher reaches the workers
    with kubectl exec), or v2beta1, the MPI Operator's (over ssh, with a key pair the operator makes; the
    workers run the image's /usr/sbin/sshd -De unless they name their own run). Other flavors render no
    MPIJob."""


class PodOptions(SpecModel):
    """Pod and container options that apply to every replica (of the job, or of one role)."""

    env: EnvList | None = None
    """Environment variables: {NAME: value} or a list of V1EnvVar (valueFrom allowed)."""
    env_from: EnvFromList | None = None
    """Variables from ConfigMaps/Secrets (V1EnvFromSource)."""
    requests: ResourceList | None = None
    """Raw resource requests, merged over `resources` ({"cpu": "100m", "memory": "1Gi"}). Extended resources
    (example.com/x) are whole numbers and need the same value in `limits` (or only the limit)."""
    limits: ResourceList | None = None
    """Raw resource limits, merged over `resources` ({"nvidia.com/gpu": 1}); the request of an extended
    resource defaults to its limit."""
    annotations: Annotations | None = None
    """Pod annotations."""
    labels: Labels | None = None
    """Pod labels."""
    node_selector: dict[str, str] | None = None
    affinity: Affinity | None = None
    tolerations: Tolerations | None = None


def _run_policy(value: Any) -> Any:
    # Kubeflow's training SDK V1RunPolicy (Kale passes one) → its snake_case dict.
    if value is not None and not isinstance(value, dict | RunPolicy) and hasattr(value, "to_dict"):
        data = {k: v for k, v in value.to_dict().items() if v is not None}
        if data.pop("scheduling_policy", None):
            raise SpecError([FieldError(("schedulingPolicy",), "is not taken here; use spec.scheduling")])
        data.pop("managed_by", None)
        return data
    return value


class DistributedConfig(PodOptions):
    """Kale's DistributedConfig: options propagated to every replica of every role.

    Each field takes official `kubernetes` client models (V1EnvVar, V1Affinity, ...) or plain dicts,
    which are deserialized into those models. Bad values raise SpecError, with the path of each field
    (`requests."nvidia.com/gpu"`, `run_policy.backoff_limit`) and a hint.
    """

    run_policy: Annotated[RunPolicy | None, BeforeValidator(_run_policy)] = None

    # Hidden from type checkers, so they keep the per-field signature pydantic's plugin generates.
    if not TYPE_CHECKING:

        def __init__(self, /, **data: Any) -> None:
            # Built directly in Python (Kale's usage) rather than through from_dict: the same SpecError a
            # job file gets, not pydantic's report.
            try:
                super().__init__(**data)
            except ValidationError as exc:
                raise SpecError(convert_validation_error(exc, data, DistributedConfig)) from None


class ReplicaSettings(PodOptions):
    """Everything a role may set for its replicas; role-level values are merged over the job's."""

    run: Run | None = None
    image: str | None = None
    """Container image (needed on Kubernetes; the local backend runs on this machine)."""
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    working_dir: str | None = None
    """Working directory of the replica's process."""
    procs_per_replica: Annotated[WholeNumber, Field(le=MAX_PROCS_PER_REPLICA)] | Literal["auto"] | None = None
    """Processes per replica (torchrun --nproc-per-node, slotsPerWorker): a number, or auto (one per GPU)."""
    resources: Resources | None = None
    mounts: list[MountInput] | None = None
    """Volumes: objects or TorchX strings `type=bind|volume|device,src=..,dst=..[,readonly]`."""
    ports: list[Port] | None = None
    security: Security | None = None
    pod_template: PodTemplate | None = None
    """A Kubernetes PodTemplateSpec ({metadata: {labels, annotations}, spec: {<PodSpec>}}) under what kubetrain
    renders: the escape hatch for what the job does not type (imagePullSecrets, sidecars, init containers,
    other volume types, probes, hostAliases, ...). A role's replaces the job's. Precedence, on Kubernetes:
    the template is the base and kubetrain's pod goes on top. Labels and annotations merge (kubetrain's keys
    win); pod spec fields kubetrain does not set are kept; lists merge by their Kubernetes keys, kubetrain's
    item winning on a clash (containers and volumes by name, env by name, volumeMounts by mountPath, ports
    by containerPort; tolerations appended). The MAIN container is the template's container named `main`
    (or the training operator's name: pytorch, tensorflow, mpi, jax), else its first: kubetrain's container
    is merged into it and comes first; what kubetrain does not set there (probes, lifecycle, volumeMounts,
    resources) is kept. Its command + args are the program (as run.exec) and its image, env (under the
    job's) and workingDir apply where the job sets none, on every backend. Security defaults (no privilege
    escalation, ALL capabilities dropped, RuntimeDefault seccomp, no service account token) apply where the
    template sets nothing; a field it sets is kept unless `security` sets it too, and each relaxation
    (privileged, allowPrivilegeEscalation, capabilities added, hostPath, hostNetwork/hostPID/hostIPC,
    runAsUser 0, seccomp Unconfined) is warned with its path. Locally only the main container's command,
    args, env and workingDir are used; the rest is warned as not used."""

    @field_validator("procs_per_replica")
    @classmethod
    def _procs(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, int) and value < 1:
            raise ValueError("must be ≥ 1 or auto")
        return value


RestartPolicy = Literal["Never", "OnFailure", "Always", "ExitCode"]

DEFAULT_BACKOFF_LIMIT = 6
"""runPolicy.backoffLimit when a restartPolicy restarts and none is given: the Kubernetes Job
controller's and Run:ai's default."""


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
        problems: list[FieldError] = []
        if self.replicas is not None and self.roles is not None:
            problems.append(FieldError(("replicas",), "give either replicas (one worker role) or roles, not both"))
        record = record_of(self.framework)
        valid = record.roles
        for name, role in (self.roles or {}).items():
            if valid is not None and name not in valid:
                problems.append(
                    FieldError(
                        ("roles", name),
                        f"is not a {self.framework.value} role",
                        hint=f"valid roles: {', '.join(valid)}",
                    )
                )
            elif not is_dns_label(name, max_len=40):
                problems.append(FieldError(("roles", name), "role names must be lowercase DNS labels (≤ 40 chars)"))
            if name in record.single_roles and role.replicas != 1:
                problems.append(
                    FieldError(("roles", name, "replicas"), f"a {name} runs as exactly 1 replica", role.replicas, True)
                )
            template = role.pod_template if "pod_template" in role.model_fields_set else self.pod_template
            if self.run is None and role.run is None and template_program(template) is None:
                problems.append(_nothing_to_run(("roles", name, "run"), template,
                                                "nothing to run: set spec.run or this role's run"))
        if self.roles is None and self.run is None and template_program(self.pod_template) is None:
            problems.append(_nothing_to_run(("run",), self.pod_template, "nothing to run"))
        if self.roles is not None:
            problems += _framework_role_rules(self.framework, self.roles)
        if self.elastic is not None:
            problems += self._elastic_problems(self.elastic)
        if self.trials is not None:
            problems += self._trials_problems()
        problems += self._restart_problems()
        if self.mpi is not None and not record.takes_mpi:
            names = ", ".join(frameworks_where(lambda r: r.takes_mpi))
            problems.append(FieldError(("mpi",), f"applies to framework {names}, not {self.framework.value}",
                                       hint=f"set framework: {names}, or remove mpi"))
        if self.controller is not None:
            problems += self._controller_problems(self.controller)
        for i, name in enumerate(self.run_policy.success_roles or []):
            if name not in self.role_replicas():
                problems.append(FieldError(("runPolicy", "successRoles", i), "is not a role of the job", name, True,
                                           hint=f"roles: {', '.join(self.role_replicas())}"))
        if self.run_policy.suspend and self.run_mode == "Debug":
            problems.append(FieldError(("runPolicy", "suspend"), "conflicts with runMode: Debug"))
        total = sum(self.role_replicas().values())
        if self.scheduling.min_available is not None and self.scheduling.min_available > total:
            problems.append(
                FieldError(
                    ("scheduling", "minAvailable"),
                    f"exceeds the job's {total} replicas",
                    self.scheduling.min_available,
                    True,
                )
            )
        if problems:
            raise SpecError(problems)
        return self

    def _controller_problems(self, controller: Controller) -> list[FieldError]:
        roles = self.role_replicas()
        return [
            FieldError(("controller", "roles", name), "is not a role of the job", hint=f"roles: {', '.join(roles)}")
            for name in controller.roles
            if name not in roles
        ]

    def _elastic_problems(self, elastic: Elastic) -> list[FieldError]:
        if not record_of(self.framework).elastic:
            names = ", ".join(frameworks_where(lambda r: r.elastic))
            return [
                FieldError(
                    ("elastic",), f"{self.framework.value} jobs cannot be elastic", hint=f"elastic works with {names}"
                )
            ]
        worker = self.roles.get(DEFAULT_ROLE) if self.roles is not None else None
        if self.roles is not None and worker is None:
            return [FieldError(("elastic",), "needs a worker role to scale")]
        where = ("replicas",) if worker is None else ("roles", DEFAULT_ROLE, "replicas")
        given = self.replicas is not None if worker is None else "replicas" in worker.model_fields_set
        expected = elastic.expected_replicas
        if expected is not None and not given:
            # expectedReplicas is the start size: given alone, it is the worker role's replicas.
            if worker is None:
                self.replicas = expected
            else:
                worker.replicas = expected
        workers = self.role_replicas()[DEFAULT_ROLE]
        if expected is not None and expected != workers:
            return [
                FieldError(
                    ("elastic", "expectedReplicas"),
                    f"differs from the worker role's {workers} replicas: the job starts with one number of workers",
                    expected,
                    True,
                    hint="set them equal, or give only one of them",
                )
            ]
        assert elastic.min_replicas is not None and elastic.max_replicas is not None  # Elastic checked them
        if not elastic.min_replicas <= workers <= elastic.max_replicas:
            return [
                FieldError(
                    where, f"must lie in elastic [{elastic.min_replicas}, {elastic.max_replicas}]", workers, True
                )
            ]
        return []

    def _trials_problems(self) -> list[FieldError]:
        """Trials are one program run many times: no other way of counting replicas beside them."""
        why = "trials run one replica per run: their count is trials.completions"
        problems = [FieldError((name,), f"conflicts with trials ({why})") for name, given in
                    (("replicas", self.replicas is not None), ("roles", self.roles is not None),
                     ("elastic", self.elastic is not None)) if given]
        if not record_of(self.framework).trials:
            problems.append(FieldError(("framework",), "must be generic with trials: independent runs form no "
                                       f"{self.framework.value} job together", self.framework.value, True,
                                       hint="drop framework (generic is the default), or drop trials"))
        return problems

    def _restart_problems(self) -> list[FieldError]:
        problems: list[FieldError] = []
        roles = self.roles or {}
        if self.exit_codes is not None and "ExitCode" not in (
            self.restart_policy,
            *(role.restart_policy for role in roles.values()),
        ):
            problems.append(
                FieldError(("exitCodes",), "only applies with restartPolicy: ExitCode (the job's or a role's)")
            )
        limit = self.run_policy.backoff_limit
        restarting_roles = [name for name, role in roles.items() if role.restart_policy not in (None, "Never")]
        if self.restart_policy == "Never" and limit and not restarting_roles:
            problems.append(
                FieldError(
                    ("restartPolicy",),
                    f"Never restarts nothing, yet runPolicy.backoffLimit allows {limit} restarts",
                    "Never",
                    True,
                    hint="drop restartPolicy (a backoffLimit alone means OnFailure), set OnFailure or ExitCode, "
                    "or set backoffLimit: 0",
                )
            )
        return problems

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
            return ReplicaSettings.model_validate(_settings_dict(self))
        return merge_settings(self, self.roles[role])


def _nothing_to_run(path: tuple[str, ...], template: Any, message: str) -> FieldError:
    if has_args_only(template):
        return FieldError(path, message + " (the podTemplate's main container has args but no command: they "
                          "would go to the image's entrypoint, which kubetrain does not know)",
                          hint="give the main container a command, or set run")
    return FieldError(path, message, hint="run: {python: [train.py]}, or a command in podTemplate's main container")


_SETTINGS_FIELDS = tuple(ReplicaSettings.model_fields)


def _settings_dict(obj: ReplicaSettings) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in _SETTINGS_FIELDS}


def merge_settings(base: ReplicaSettings, override: ReplicaSettings) -> ReplicaSettings:
    """Role over job: scalars replaced, maps merged, env merged by name, lists appended, objects field-wise,
    affinity per kind (`_merge_affinity`), a podTemplate replaced whole."""
    merged = _settings_dict(base)
    for name in override.model_fields_set:
        if name not in merged or name == "replicas":
            continue
        new, old = getattr(override, name), merged[name]
        if new is None or old is None:
            merged[name] = new if new is not None else old
        elif name == "pod_template":  # a whole pod template: the role's replaces the job's
            merged[name] = new
        elif name == "affinity":
            merged[name] = _merge_affinity(old, new)
        elif name == "env":
            by_name = {var.name: var for var in old}
            by_name.update({var.name: var for var in new})
            merged[name] = list(by_name.values())
        elif isinstance(new, dict):
            merged[name] = {**old, **new}
        elif isinstance(new, list):
            merged[name] = [*old, *new]
        elif name in ("resources", "security"):
            merged[name] = old.model_copy(update={f: getattr(new, f) for f in new.model_fields_set})
        else:
            merged[name] = new
    fields_set = (set(override.model_fields_set) | set(base.model_fields_set)) & set(_SETTINGS_FIELDS)
    return ReplicaSettings.model_construct(_fields_set=fields_set, **merged)


def _merge_affinity(old: Any, new: Any) -> Any:
    """Two V1Affinity, `new` over `old` per kind: nodeAffinity, podAffinity and podAntiAffinity each the
    override's where it sets that kind, else the base's (a role's podAntiAffinity keeps the job's nodeAffinity).
    Neither argument is changed; the kinds themselves are shared, as other merged values are."""
    import copy

    out = copy.copy(old)
    for attr in new.attribute_map:  # node_affinity, pod_affinity, pod_anti_affinity
        value = getattr(new, attr)
        if value is not None:
            setattr(out, attr, value)
    return out


def _framework_role_rules(framework: Framework, roles: dict[str, RoleSpec]) -> list[FieldError]:
    problems = []
    for rule in record_of(framework).role_rules:
        if (rule.when is None or rule.when in roles) and not any(role in roles for role in rule.needs_one_of):
            where = ("roles", rule.when) if rule.when else ("roles",)
            problems.append(FieldError(where, rule.message, hint=rule.hint))
    return problems


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
    "KIND",
    "Controller",
    "DistributedConfig",
    "Elastic",
    "ExitCodes",
    "JobSpec",
    "Metadata",
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
]
