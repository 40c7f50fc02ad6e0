"""What every replica of a role gets beside its count: pod and container options (PodOptions, Security,
Scheduling), the program (ReplicaSettings), Kale's DistributedConfig, and how a role's settings merge over the
job's (`merge_settings`)."""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationError, field_validator, model_validator

from ..contract.labels import NODE_POOL_LABEL, NODE_TYPE_LABEL
from ..contract.naming import is_label_key, is_label_value
from .convert import convert_validation_error
from .errors import FieldError, SpecError
from .mounts import MountInput
from .pod_template import PodTemplate
from .policies import RunPolicy
from .program import Port, Run
from .resources import ResourceList, Resources
from .types import (
    INT32_MAX,
    MAX_PROCS_PER_REPLICA,
    MAX_REPLICAS,
    Affinity,
    EnvFromList,
    EnvList,
    SpecModel,
    Tolerations,
    WholeNumber,
)


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


_SETTINGS_FIELDS = tuple(ReplicaSettings.model_fields)


def settings_dict(obj: ReplicaSettings) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in _SETTINGS_FIELDS}


def merge_settings(base: ReplicaSettings, override: ReplicaSettings) -> ReplicaSettings:
    """Role over job: scalars replaced, maps merged, env merged by name, lists appended, objects field-wise,
    affinity per kind (`_merge_affinity`), a podTemplate replaced whole."""
    merged = settings_dict(base)
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
    out = copy.copy(old)
    for attr in new.attribute_map:  # node_affinity, pod_affinity, pod_anti_affinity
        value = getattr(new, attr)
        if value is not None:
            setattr(out, attr, value)
    return out


__all__ = [
    "Annotations",
    "DistributedConfig",
    "Labels",
    "PodOptions",
    "ReplicaSettings",
    "Scheduling",
    "Security",
    "merge_settings",
    "settings_dict",
]
