"""What every flavor renders from: names, the wired roles, field paths for errors, shared metadata.

The roles come from `plan()`, the one planner the local backend uses too, over the flavor's topology
(stable DNS names, one port per role); a manifest needs only the per-role wiring (O(roles)), never the
replicas the plan would expand on demand.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic.alias_generators import to_camel

from ....contract.features import Features
from ....contract.frameworks import record_of
from ....contract.labels import (
    INDEX_LABEL,
    JOB_LABEL,
    KUEUE_QUEUE_LABEL,
    MANAGED_BY,
    MANAGER,
    RESERVED_LABELS,
    ROLE_LABEL,
)
from ....contract.naming import dns1035_label, dns_label, index_suffix_len, is_label_value, label_value
from ....frameworks import RoleWiring, Topology, Value
from ....frameworks.common import program_argv
from ....frameworks.controllers import role_port
from ....jobspec import JobSpec, ReplicaSettings, TrainJob
from ....jobspec.errors import Path
from ....plan import Plan, plan, replica_counts, settings_for
from .errors import Problems

FILES_DIR = "/etc/kubetrain"
"""Where the job's files (hostfiles) are mounted from their ConfigMap."""


_LIST_FIELDS = {"mounts", "ports", "tolerations", "env_from"}
_MODEL_FIELDS = {"resources", "security"}


@dataclass(frozen=True)
class Options:
    """Render options that do not come from the spec."""

    namespace: str | None = None
    api_access: bool = False
    """Replicas call the Kubernetes API (the cluster resolver): mount the service account token."""
    uid: int | None = None
    """The submitting user's uid/gid, for `security.runAsUser: true` (default: this process's)."""
    gid: int | None = None
    git_sync_image: str = "registry.k8s.io/git-sync/git-sync:v4.4.2"


class Engine(Protocol):
    """What render reads of the flavor it renders for (a `flavors.base.Flavor`, handed down in the `Ctx`): render
    knows no flavor by name and calls none of its methods; the flavor's own render (`layout`, `objects`) calls
    render's helpers."""

    @property
    def name(self) -> str: ...

    @property
    def features(self) -> Features: ...

    @property
    def index_fields(self) -> tuple[str, ...]:
        """Downward-API fields that hold a pod's replica index on this engine."""

    @property
    def gpu_share_resources(self) -> tuple[str, str, str] | None: ...

    @property
    def oversize_hint(self) -> str | None: ...


Keys = Literal["kubetrain", "plugin", "operator"]
"""Who makes the key pair of a job's ssh between its pods (manifests/mpi_ssh.py)."""


@dataclass(frozen=True)
class Transport:
    """The ssh between this job's pods on this flavor (`mpi_ssh.transport`)."""

    keys: Keys
    """Who makes the key pair: kubetrain (a Secret filled when submitted), Volcano's ssh plugin, the MPI
    Operator."""
    kubetrain_sshd: bool
    """The workers run kubetrain's sshd (they have no program of their own)."""
    auth_path: str | None
    """Where the keys are mounted in the MPI Operator's layout (for programs with an ssh of their own)."""
    worker_program: tuple[str, ...] | None
    """What MPI workers without a program of their own run: kubetrain's sshd, or the operator's default."""
    launcher: bool = True
    """An MPI launcher's mpirun reaches the workers over it (it waits for them, with these ssh options)."""


@dataclass(frozen=True)
class Layout:
    """Object names and replica addresses of one flavor."""

    base: str
    """Name of the root object (and prefix of the others): the job name, shortened if needed."""
    host_pattern: str
    """`{role}`/`{index}` pattern of a replica's stable DNS name."""
    service: str | None
    """The headless Service (or JobSet subdomain) that publishes those names."""
    index_env: str
    """Variable holding the replica's index inside a pod."""
    role_names: dict[str, str] = field(default_factory=dict)
    """Role → the name its objects and host names carry, where it is not the role's own (a Volcano task or
    Kubeflow replica type named as the job file names it)."""


@dataclass(frozen=True)
class RoleView:
    """One role as rendered: its wiring, settings, and what its container runs."""

    role: str
    replicas: int
    wiring: RoleWiring
    settings: ReplicaSettings
    env: dict[str, Value]
    """Framework env (the role's, with its single process's merged over it)."""
    argv: tuple[str, ...] | None
    """The program; None when the replica only hosts processes a launcher starts and runs nothing of its own
    (it waits)."""
    procs: int
    hosting: bool = False
    """The replicas host processes another role's launcher starts (MPI workers): they never end on their own,
    whatever they run (a wait, sshd), so the launcher's end is the job's."""
    entrypoint: bool = False
    """`argv` are the arguments of the image's own ENTRYPOINT (`run.entrypoint`): the container has no command,
    so kubetrain's start-up script does not run."""
    env_by_index: dict[int, dict[str, Value]] = field(default_factory=dict)
    """Variables only some replicas get (replica index → its own): a controller's rank 0 (`RoleWiring`)."""


def room_for_base(counts: dict[str, int], per_role_extra: int) -> int:
    """Longest base name such that `<base>-<role>[...]-<index>` stays a DNS label for every replica."""
    widest = max(len(role) + per_role_extra + index_suffix_len(n) for role, n in counts.items())
    return 63 - 1 - widest


def base_name(name: str, room: int, *, rfc1035: bool) -> str:
    """The job name if it fits (and starts with a letter where a Service is named after it), else a
    sanitized, hashed form (contract/naming.py): distinct job names never share objects."""
    return dns1035_label(name, max_len=room) if rfc1035 else dns_label(name, max_len=room)


@dataclass
class Ctx:
    """One render in progress."""

    job: TrainJob
    name: str
    flavor: Engine
    layout: Layout
    options: Options
    topology: Topology
    roles: list[RoleView]
    files: dict[str, str]
    problems: Problems
    peers: Mapping[str, Features]
    """Every flavor's features by name, in the registry's order: what a refusal names as able to express it."""
    warnings: list[str] = field(default_factory=list)
    ssh: Transport | None = None
    """How an MPI launcher reaches its workers on this flavor (`mpi_ssh.apply`), if over ssh."""
    paths: dict[str, str] = field(default_factory=dict)
    """Files a controller places at absolute paths (`/etc/volcano/worker.host`), mounted there from the files
    ConfigMap (`spec.controller`, on a flavor without that controller)."""
    names: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Host names the job's controller makes resolvable → the replica each names (`spec.controller`)."""
    native: bool = False
    """The flavor's engine is the job's controller itself: it gives the contract, kubetrain adds its own."""

    @property
    def spec(self) -> JobSpec:
        return self.job.spec

    @property
    def total_replicas(self) -> int:
        return sum(v.replicas for v in self.roles)

    @property
    def launcher_style(self) -> bool:
        """Some replicas only host processes a launcher role starts (MPI, DeepSpeed's launcher)."""
        return any(v.hosting for v in self.roles)

    def flavors_that(self, test: Callable[[Features], bool]) -> tuple[str, ...]:
        """The flavors whose features pass `test` (for "flavors that can express it")."""
        return tuple(name for name, features in self.peers.items() if test(features))

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    # -- field paths -----------------------------------------------------------------------------------

    def where(self, role: str, head: str, *rest: str | int) -> Path:
        """Spec path of a merged setting of `role`: the role's own field if it set it, else the job's.

        `head` is a settings attribute (snake_case). For `resources` and `security` the next part is an
        attribute of that object (snake_case too); anything else is a map key or a list index, kept as
        is. Lists merge by appending the role's items to the job's, so an index past the job's is the role's.
        """
        tail: list[str | int] = list(rest)
        if head in _MODEL_FIELDS and tail and isinstance(tail[0], str):
            sub: str | None = tail[0]
            tail[0] = to_camel(tail[0])
        else:
            sub = None
        spec = self.spec
        job_path: Path = ("spec", to_camel(head), *tail)
        override = spec.roles.get(role) if spec.roles else None
        if override is None or head not in override.model_fields_set:
            return job_path
        role_path: Path = ("spec", "roles", role, to_camel(head))
        if tail and isinstance(tail[0], int) and head in _LIST_FIELDS:
            inherited = len(getattr(spec, head) or [])
            if tail[0] < inherited:
                return job_path
            return (*role_path, tail[0] - inherited, *tail[1:])
        if sub is not None and sub not in getattr(override, head).model_fields_set:
            return job_path
        return (*role_path, *tail)

    # -- metadata --------------------------------------------------------------------------------------

    def labels(self, role: str | None = None) -> dict[str, str]:
        """Labels of every object (and pod) of this job; the role's when it belongs to one."""
        out = dict(self.job.metadata.labels)
        out[MANAGED_BY] = MANAGER
        out[JOB_LABEL] = label_value(self.name)
        if role is not None:
            out[ROLE_LABEL] = role
        return out

    def metadata(self, name: str, role: str | None = None, *, queue_label: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if self.options.namespace:
            meta["namespace"] = self.options.namespace
        labels = self.labels(role)
        if queue_label and self.spec.scheduling.queue:
            labels[KUEUE_QUEUE_LABEL] = self.spec.scheduling.queue
        meta["labels"] = labels
        if self.job.metadata.annotations:
            meta["annotations"] = dict(self.job.metadata.annotations)
        return meta

    def selector(self, role: str | None = None) -> dict[str, str]:
        out = {JOB_LABEL: label_value(self.name)}
        if role is not None:
            out[ROLE_LABEL] = role
        return out


def wire_roles(
    job: TrainJob, name: str, layout: Layout, problems: Problems, *, native: bool = False
) -> tuple[Topology, list[RoleView], dict[str, str], Plan]:
    """Plan every role over the flavor's uniform topology (stable DNS names, one port per role). A job under a
    controller's contract listens on that controller's ports; `native`: the flavor's engine is that controller."""
    spec = job.spec
    counts = replica_counts(spec)
    controller = spec.controller
    if controller is not None:
        ports = {r: role_port(controller, r) for r in counts}
    else:
        ports = dict.fromkeys(counts, record_of(spec.framework).default_port)
    topology = Topology(roles=counts, host_pattern=layout.host_pattern, role_ports=ports,
                        role_names=dict(layout.role_names))
    # One launcher per replica (torchrun), as kubetrain is not in the image to start each process.
    the_plan = plan(job, topology, name=name, files_dir=FILES_DIR, launcher_procs=False, native_controller=native)
    views: list[RoleView] = []
    for wiring in the_plan.roles:
        role, replicas = wiring.role, wiring.replicas
        settings = the_plan.settings[role]
        procs = the_plan.procs[role]
        env = dict(wiring.env)
        argv: tuple[str, ...] | None
        if len(wiring.processes) > 1:
            where = ("spec", "roles", role, "procsPerReplica") if spec.roles and role in spec.roles else (
                "spec", "procsPerReplica")
            problems.add(
                where,
                f"{spec.framework.value} starts {len(wiring.processes)} processes per replica, and on "
                "Kubernetes a replica (pod) runs one program",
                hint="use one process per replica and scale `replicas` instead",
            )
            argv = wiring.processes[0].argv
        elif wiring.processes:
            env.update(wiring.processes[0].env)
            argv = wiring.processes[0].argv
        else:
            argv = _own_program(spec, role)
        entrypoint = bool(wiring.processes) and wiring.processes[0].entrypoint
        views.append(RoleView(role, replicas, wiring, settings, env, argv, procs, hosting=not wiring.processes,
                              entrypoint=entrypoint, env_by_index=dict(wiring.env_by_index)))
    return topology, views, dict(the_plan.files), the_plan


def _own_program(spec: JobSpec, role: str) -> tuple[str, ...] | None:
    """A hosting replica (MPI worker) runs the program its role names itself, e.g. `sshd -D`, if any;
    a program inherited from the job is the launcher's, not the host's."""
    override = spec.roles.get(role) if spec.roles else None
    if override is not None and "run" in override.model_fields_set and override.run is not None:
        return tuple(program_argv(override.run))
    return None


def check_spec(ctx: Ctx) -> None:
    """kubetrain's own labels select the job's pods: a user label may not redefine them. Also the spec
    values that must be valid as Kubernetes names or labels, and start sizes that contradict each other."""
    for key in RESERVED_LABELS:
        if key in ctx.job.metadata.labels:
            ctx.problems.add(("metadata", "labels", key), "is set by kubetrain and cannot be given")
    for view in ctx.roles:
        for key in RESERVED_LABELS:
            if view.settings.labels and key in view.settings.labels:
                ctx.problems.add(ctx.where(view.role, "labels", key), "is set by kubetrain and cannot be given")
    queue = ctx.spec.scheduling.queue
    if queue is not None and ctx.flavor.features.kueue_queue and not is_label_value(queue):
        ctx.problems.add(("spec", "scheduling", "queue"), "must be a valid label value (it becomes the "
                         f"{KUEUE_QUEUE_LABEL} label)")


__all__ = [
    "FILES_DIR",
    "INDEX_LABEL",
    "JOB_LABEL",
    "KUEUE_QUEUE_LABEL",
    "MANAGED_BY",
    "ROLE_LABEL",
    "Ctx",
    "Engine",
    "Keys",
    "Layout",
    "Options",
    "RoleView",
    "Transport",
    "base_name",
    "check_spec",
    "room_for_base",
    "settings_for",
    "wire_roles",
]
