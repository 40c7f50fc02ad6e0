"""What every framework's wiring shares: the wiring types, the program's argv, and the common env contract.

The facts of each framework (roles, port, Kubeflow kind, ...) are its record in `contract.frameworks`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..contract import env_names
from ..jobspec import JobSpec, ReplicaSettings, Run
from .topology import Topology
from .values import Idx, Value

PYTHON = "python"
"""Interpreter named in argv: the replica's own `python` (its image's, or the active environment's)."""


@dataclass(frozen=True)
class ProcessWiring:
    """One process kubetrain starts in each replica of a role."""

    argv: tuple[str, ...]
    env: dict[str, Value] = field(default_factory=dict)
    local_rank: int = 0
    entrypoint: bool = False
    """`argv` are the arguments of the image's own ENTRYPOINT (`run.entrypoint`), not a program kubetrain can
    start: a Kubernetes container without a command; refused locally."""


@dataclass(frozen=True)
class RoleWiring:
    """Env and processes for every replica of one role; values may depend on the replica's index."""

    role: str
    replicas: int
    env: dict[str, Value]
    processes: tuple[ProcessWiring, ...]
    files: dict[str, str] = field(default_factory=dict)
    """Files the replicas need (name → content), e.g. an MPI hostfile; their paths are in env."""
    env_by_index: dict[int, dict[str, Value]] = field(default_factory=dict)
    """Variables only some replicas of the role get (replica index → its own, over `env`): a controller that
    gives its rank 0 what it gives no other (a PaddleJob's POD_IP_DUMMY)."""
    port: int | None = None
    """The port this role's replicas listen on, when the framework uses one."""
    paths: dict[str, str] = field(default_factory=dict)
    """Files a controller places at absolute paths in the pod (`/etc/volcano/worker.host`): path → content.
    Locally they are under $KUBETRAIN_FILES_ROOT; on Kubernetes mounted at those paths."""
    labels: dict[str, Value] = field(default_factory=dict)
    """Pod labels a controller gives each replica (JobSet's `jobset.sigs.k8s.io/job-index`), for the downward
    API: a fieldRef on them reads these locally."""
    annotations: dict[str, Value] = field(default_factory=dict)
    """Pod annotations a controller gives each replica (the Job controller's completion index), likewise."""
    pod_name: Value | None = None
    """The pod's name as the controller makes it (fieldRef metadata.name); None: `<job>-<role>-<index>`."""
    names: dict[str, int] = field(default_factory=dict)
    """Host names the controller makes resolvable for this role's replicas (a Service per replica, a pod's
    hostname.subdomain), each → the index of the replica it names. Locally an env value naming one of them
    gets that replica's address instead, and a command naming one is warned of."""


@dataclass(frozen=True)
class WireContext:
    """Everything a framework needs to wire one role."""

    job_name: str
    spec: JobSpec
    role: str
    settings: ReplicaSettings
    topology: Topology
    procs: int
    """Processes per replica of this role, `auto` already resolved."""
    launcher_procs: bool
    """True: kubetrain starts each process itself (locally). False: one launcher per replica starts
    them (torchrun on Kubernetes, where kubetrain is not in the image)."""
    files_dir: str
    """Where files named in `RoleWiring.files` are found at run time."""
    role_procs: dict[str, int] = field(default_factory=dict)
    """Processes per replica of every role (roles may differ); this role's is `procs`."""
    spec_namespace: str | None = None
    """The job's namespace (metadata.namespace), for the names a controller builds with it."""
    annotations: Mapping[str, str] = field(default_factory=dict)
    """The job's annotations (metadata.annotations): a controller passes some on to its pods."""
    paths_root: str = ""
    """Where files a controller places at absolute paths are, as a prefix of those paths: the files root
    locally ($KUBETRAIN_FILES_ROOT), "" on Kubernetes (the files are at their own paths)."""

    def procs_of(self, role: str) -> int:
        return self.role_procs.get(role, self.procs) if role != self.role else self.procs

    @property
    def world_size(self) -> int:
        """Processes in the whole job, across roles."""
        return sum(n * self.procs_of(role) for role, n in self.topology.roles.items())

    def rank_offset(self, role: str | None = None) -> int:
        """Global rank of the first process of `role`'s first replica."""
        role = role or self.role
        offset = 0
        for name, n in self.topology.roles.items():
            if name == role:
                return offset
            offset += n * self.procs_of(name)
        raise KeyError(role)

    @property
    def roles(self) -> dict[str, int]:
        return dict(self.topology.roles)

    def role_offset(self, role: str | None = None) -> int:
        """Replicas of the roles numbered before `role` (global node rank of its first replica)."""
        role = role or self.role
        offset = 0
        for name, n in self.topology.roles.items():
            if name == role:
                return offset
            offset += n
        raise KeyError(role)


def program_argv(run: Run, *, local_rank_arg: str | None = None) -> list[str]:
    """The user's program as an argv list; never a shell string (customCommand strings are the user's own)."""
    extra = [local_rank_arg] if local_rank_arg else []
    if run.python is not None:
        return [PYTHON, *run.other_args, *run.python, *extra]
    if run.module is not None:
        return [PYTHON, *run.other_args, "-m", *run.module, *extra]
    if run.exec is not None:
        return [*run.exec, *run.other_args, *extra]
    if run.entrypoint is not None:
        return list(run.entrypoint)  # the image's ENTRYPOINT's arguments (`ProcessWiring.entrypoint`)
    assert run.custom_command is not None
    if isinstance(run.custom_command, str):
        return ["/bin/sh", "-c", run.custom_command]
    return list(run.custom_command)


def common_env(ctx: WireContext) -> dict[str, Value]:
    """The variables every replica of every framework gets (the env contract of docs/design.md)."""
    return {
        env_names.JOB: ctx.job_name,
        env_names.FRAMEWORK: ctx.spec.framework.value,
        env_names.ROLE: ctx.role,
        env_names.REPLICA_INDEX: (Idx(),),
        env_names.NUM_REPLICAS: str(ctx.topology.roles[ctx.role]),
        env_names.CLUSTER: ctx.topology.cluster_json(),
        "PYTHONUNBUFFERED": "1",
    }


def run_of(ctx: WireContext) -> Run:
    run = ctx.settings.run
    if run is None:  # the spec layer refuses a role with nothing to run
        raise ValueError(f"role {ctx.role} has nothing to run")
    return run


def single(ctx: WireContext, env: dict[str, Value], argv: list[str], port: int | None = None) -> RoleWiring:
    """A role whose replicas each run one process."""
    return RoleWiring(
        ctx.role, ctx.topology.roles[ctx.role], {**common_env(ctx), **env}, (ProcessWiring(tuple(argv)),), port=port
    )
