"""What every controller contract shares: the table row, the contract, the context a contract wires a role in,
and the host names and values contracts build from the job's topology.

A contract is pure: from the job (its `spec.controller`, roles and replicas) and the topology (where replicas
are: 127.0.0.1 with a port each locally, stable DNS names on Kubernetes) it gives one role's `RoleWiring` —
the container's command as written, and every variable, file, label, annotation and host name the controller
gives that role's containers. Its `rows` are the same contract as a table (docs/foreign.md), each with the value
the contract's sample document gives, which a test holds to what the replicas actually see.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ...contract import env_names
from ...jobspec import SpecError
from ...jobspec.controller import Controller
from ...jobspec.errors import FieldError
from ..common import ProcessWiring, RoleWiring, WireContext, common_env, program_argv
from ..values import Value

What = Literal["env", "file", "label", "annotation", "host", "command"]

FILES_ROOT = env_names.FILES_ROOT
"""Locally, the folder that stands for `/` for the files a controller places (`$KUBETRAIN_FILES_ROOT/etc/...`);
unset on Kubernetes, where the files are at their own paths — so `$KUBETRAIN_FILES_ROOT/etc/volcano/ps.host`
names the file on every backend."""


@dataclass(frozen=True)
class Row:
    """One thing a controller gives a container: a row of the contract's table in docs/foreign.md."""

    what: What
    name: str
    """The variable, the file's absolute path, the label or annotation key, the host-name pattern."""
    who: str
    """Which replicas get it: `every replica`, `Master`, `worker 0`, `with elasticPolicy`, ..."""
    value: str
    """How the controller computes it, in the source's own terms."""
    local: str = ""
    """How kubetrain gives it on this machine, where that differs (a host name: 127.0.0.1; a port: a free one)."""
    example: Mapping[str, str | None] = field(default_factory=dict)
    """What each replica of the contract's sample document sees (replica key `worker-1`, or `*` for every one;
    None: not set). `{addr:ROLE-I}`, `{host:ROLE-I}` and `{port:ROLE-I}` stand for that replica's address,
    host and port on the backend that runs it."""
    sample: str = "main"
    """Which of the contract's samples the example is about."""
    local_only: bool = False
    """The example is what kubetrain gives on this machine, where that differs from the cluster (`local`)."""
    cluster_only: bool = False
    """The example is the controller's, which a local run gives otherwise (`local` says how)."""
    concrete: str = ""
    """The name this row takes in that sample, where `name` is a pattern (`VC_WORKER_HOSTS` for
    `VC_<TASK>_HOSTS`); "": `name` itself."""

    @property
    def checked_name(self) -> str:
        return self.concrete or self.name


@dataclass(frozen=True)
class ContractContext:
    """One role being wired under a controller's contract."""

    ctx: WireContext
    controller: Controller
    native: bool = False
    """The engine that runs the pods is this very controller (a PyTorchJob on the kubeflow flavor): it gives
    the variables and files itself, kubetrain adds only its own."""

    @property
    def role(self) -> str:
        return self.ctx.role

    @property
    def name(self) -> str:
        """The source object's name: what the controller derives host names and values from."""
        return self.controller.name or self.ctx.job_name

    @property
    def namespace(self) -> str:
        """The namespace in the names the controller builds (`<svc>.<ns>.svc`): the job's, else `default`."""
        return self.ctx.spec_namespace or "default"

    @property
    def roles(self) -> dict[str, int]:
        return self.ctx.roles

    def replicas(self, role: str | None = None) -> int:
        return self.ctx.topology.roles.get(role or self.role, 0)

    def source_name(self, role: str | None = None) -> str:
        """The role as the source names it (`Master`, the task `trainer`, the replicated Job `workers`)."""
        role = role or self.role
        found = self.controller.roles.get(role)
        return found.name if found is not None else role

    def role_of(self, source_name: str) -> str | None:
        """The job's role the source calls `source_name` (case-insensitively, as the operators do)."""
        for role in self.roles:
            if self.source_name(role).lower() == source_name.lower():
                return role
        return None

    def host(self, role: str, index: int) -> str:
        return self.ctx.topology.host(role, index)

    def port(self, role: str, index: int = 0) -> int:
        return self.ctx.topology.port(role, index)

    def address(self, role: str, index: int) -> str:
        return self.ctx.topology.address(role, index)

    def hosts(self, role: str) -> list[str]:
        return [self.host(role, i) for i in range(self.replicas(role))]

    def path(self, absolute: str) -> str:
        """Where a file the controller places at `absolute` is for the process: locally under the files root,
        on Kubernetes at its own path."""
        return f"{self.ctx.paths_root}{absolute}"


@dataclass(frozen=True)
class Contract:
    """One controller's contract: every variable, file and host name it gives a container, per replica."""

    api_version: str
    kind: str
    controller: str
    """Whose contract: `the Kubeflow training operator`."""
    source: str
    """Where in the controller's source it is written (files and functions), for the table."""
    wire: Callable[[ContractContext], RoleWiring]
    default_port: Callable[[Controller, str], int]
    """The port of a role's containers when the source names none (by the role's source name)."""
    rows: tuple[Row, ...]
    samples: Mapping[str, Mapping[str, Any]]
    """Source documents the table's examples are about (and the test runs), by name (`main`, ...)."""
    native_flavor: str | None = None
    """The kubetrain flavor whose engine is this controller (kubeflow, volcano, jobset), if any."""
    local_problems: Callable[[ContractContext], list[FieldError]] = lambda _: []
    """What this machine cannot run as the controller would, for the local backend to refuse up front."""
    notes: tuple[str, ...] = ()
    """What the table's reader should know beyond the rows (what kubetrain does not give, and why)."""

    @property
    def key(self) -> tuple[str, str]:
        return self.api_version, self.kind


# -- what every contract's wiring shares ----------------------------------------------------------------


def program(cctx: ContractContext) -> ProcessWiring:
    """The container's command as written: one process per replica, which the controller starts and nothing
    wraps (a `torchrun` stays the only launcher). `run.entrypoint` (no command): the image's ENTRYPOINT."""
    run = cctx.ctx.settings.run
    if run is None:
        raise SpecError([FieldError(("spec", "roles", cctx.role, "run"), "nothing to run")])
    if run.entrypoint is not None:
        return ProcessWiring(tuple(run.entrypoint), entrypoint=True)
    return ProcessWiring(tuple(program_argv(run)))


def kubetrain_env(cctx: ContractContext) -> dict[str, Value]:
    """kubetrain's own variables (KUBETRAIN_*), which every replica gets beside the controller's: not
    PYTHONUNBUFFERED, which is the controller's to set or not."""
    env = common_env(cctx.ctx)
    env.pop("PYTHONUNBUFFERED", None)
    return env


def service_names(name: str, namespace: str) -> list[str]:
    """The forms a Service (or a pod's host.subdomain) name resolves under from a pod of the namespace."""
    return [name, f"{name}.{namespace}", f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"]


def role_wiring(
    cctx: ContractContext,
    env: dict[str, Value],
    *,
    by_index: Mapping[int, Mapping[str, Value]] | None = None,
    paths: Mapping[str, str] | None = None,
    labels: Mapping[str, Value] | None = None,
    annotations: Mapping[str, Value] | None = None,
    pod_name: Value | None = None,
    names: Mapping[str, int] | None = None,
    process: ProcessWiring | None = None,
    hosting: bool = False,
) -> RoleWiring:
    """A role under a contract: kubetrain's variables and the controller's (none of the controller's where the
    engine is the controller itself: it gives them), the command as written (`hosting`: no program of its own
    locally, as an MPI worker whose ranks the launcher's mpirun starts here)."""
    own = kubetrain_env(cctx)
    given = {} if cctx.native else dict(env)
    processes: tuple[ProcessWiring, ...] = () if hosting else (process or program(cctx),)
    return RoleWiring(
        cctx.role,
        cctx.replicas(),
        {**own, **given},
        processes,
        port=cctx.port(cctx.role, 0) if cctx.replicas() else None,
        paths={} if cctx.native else dict(paths or {}),
        labels=dict(labels or {}),
        annotations=dict(annotations or {}),
        pod_name=pod_name,
        names=dict(names or {}),
        env_by_index={} if cctx.native else {i: dict(v) for i, v in (by_index or {}).items()},
    )


__all__ = [
    "FILES_ROOT",
    "Contract",
    "ContractContext",
    "Row",
    "kubetrain_env",
    "program",
    "role_wiring",
    "service_names",
]
