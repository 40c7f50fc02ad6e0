"""Every fact kubetrain knows of a framework, in one record per framework.

The job model reads its roles and rules here, the planner its port and implied roles, the Kubernetes flavors its
training-operator kind and title, the local backend the modules it preloads, the CLI its name. Only the wiring
(env and argv of one role's replicas) is code, in `kubetrain/frameworks/<name>.py`, found by the framework's
name. Adding a framework is a member of `Framework`, its `FrameworkRecord` in `RECORDS`, and that module.

Standard library only, like the rest of `contract`: the CLI's parser offers the names without importing pydantic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from . import env_names


class Framework(StrEnum):
    PYTORCH = "pytorch"
    TENSORFLOW = "tensorflow"
    DEEPSPEED = "deepspeed"
    MPI = "mpi"
    JAX = "jax"
    GENERIC = "generic"


@dataclass(frozen=True)
class RoleRule:
    """A role a framework cannot run without: one of `needs_one_of` must be there (when `when` is)."""

    needs_one_of: tuple[str, ...]
    message: str
    when: str | None = None
    """Only when this role is present (TensorFlow's parameter servers need someone to serve)."""
    hint: str | None = None


@dataclass(frozen=True)
class KubeflowKind:
    """The Kubeflow training operator's kind for a framework (PyTorchJob, TFJob, ...)."""

    kind: str
    replica_specs: str
    """The spec field holding the replica specs, e.g. `pytorchReplicaSpecs`."""
    container: str
    """The container name the operator looks for."""
    port_name: str
    """The port name the operator looks for."""
    plural: str
    """The kind's resource name in the API (`pytorchjobs`)."""
    launcher_role: bool = True
    """Whether the kind can hold kubetrain's `launcher` role (PyTorchJob cannot host DeepSpeed's launcher)."""


@dataclass(frozen=True)
class FrameworkRecord:
    """One framework, as every layer of kubetrain sees it (its wiring aside: `kubetrain/frameworks/<name>.py`)."""

    name: Framework
    title: str
    """How people write its name in prose ("a PyTorch launcher role")."""
    roles: tuple[str, ...] | None
    """Roles the spec accepts, in the order replicas are numbered and shown. None: any DNS-1123 name."""
    default_port: int
    """The port the framework's rendezvous listens on (one per role on Kubernetes)."""
    single_roles: tuple[str, ...] = ()
    """Roles that exist at most once (a coordinator, not a pool)."""
    role_rules: tuple[RoleRule, ...] = ()
    """Roles the framework cannot run without, checked when the spec names its roles."""
    elastic: bool = False
    """Its jobs may be elastic (`spec.elastic`): the worker role grows and shrinks while the job runs."""
    takes_mpi: bool = False
    """Its jobs may carry `spec.mpi` (an MPIJob's settings)."""
    trials: bool = False
    """Its job may be trials (independent runs): the others wire replicas into one distributed job."""
    implied_roles: Mapping[str, int] = field(default_factory=dict)
    """Roles the framework adds when the spec has none of that name (MPI's `launcher`: 1), placed first."""
    kubeflow: KubeflowKind | None = None
    """The training operator's kind, if it has one for this framework."""
    ssh_launcher: bool = False
    """On Kubernetes its launcher (`program_role`) reaches the other roles' pods over ssh (MPI's mpirun): they
    serve ssh with a key pair of the job's (backends/kubernetes/manifests/mpi_ssh.py)."""
    program_role: str | None = None
    """The one role whose replica runs the user's program, when only one does (MPI's launcher: its mpirun
    starts the ranks on the other roles, which run no program of their own). None: every role runs it."""
    rank0_host: str | None = None
    """The variable holding the first replica's host, where the framework gives one (MASTER_ADDR): what a
    TorchX AppDef's ${rank0_env} names."""
    wraps: tuple[str, ...] = ()
    """Launchers the framework starts itself around the program (`frameworks.launchers`: MPI's mpirun): a
    `run` that is one of them would run inside it, and is refused."""
    torchrun: bool = False
    """A `run` that is torchrun runs as written, with torchrun's options as PET_* variables (pytorch's wiring)."""
    preload: tuple[str, ...] = ()
    """Modules the local backend imports once in a process that then forks the Python replicas. torch may
    be imported before a fork as long as CUDA is not initialised (its DataLoader workers are forked so);
    TensorFlow and JAX start threads when imported, so their replicas start the ordinary way."""
    cluster_roles: tuple[str, ...] | None = None
    """The roles the framework's own description of the cluster holds, in its order, where it leaves some out
    (TensorFlow's TF_CONFIG: chief, worker, ps; the evaluator runs beside the cluster). None: every role. The
    wiring writes it (`frameworks/tensorflow.py`), the resolver reads it back inside a replica."""

    def in_cluster(self, roles: Iterable[str]) -> list[str]:
        """The roles of `roles` that the framework's cluster holds (`cluster_roles`), in the framework's order."""
        present = list(roles)
        if self.cluster_roles is None:
            return present
        return [role for role in self.cluster_roles if role in present]


_PYTORCHJOB = KubeflowKind("PyTorchJob", "pytorchReplicaSpecs", "pytorch", "pytorchjob-port", "pytorchjobs",
                           launcher_role=False)

RECORDS: Mapping[Framework, FrameworkRecord] = MappingProxyType({record.name: record for record in (
    FrameworkRecord(
        Framework.PYTORCH, "PyTorch", ("master", "worker"), 29500, single_roles=("master",),
        role_rules=(RoleRule(("master", "worker"), "a PyTorch job needs a master or worker role"),),
        elastic=True, kubeflow=_PYTORCHJOB, rank0_host="MASTER_ADDR", torchrun=True, preload=("torch",),
    ),
    FrameworkRecord(
        Framework.TENSORFLOW, "TensorFlow", ("chief", "worker", "ps", "evaluator"), 2222,
        single_roles=("chief", "evaluator"),
        role_rules=(RoleRule(("worker", "chief"), "parameter servers need a worker or chief role to serve",
                             when="ps"),),
        kubeflow=KubeflowKind("TFJob", "tfReplicaSpecs", "tensorflow", "tfjob-port", "tfjobs"),
        cluster_roles=("chief", "worker", "ps"),
    ),
    # DeepSpeed reads torch's env contract: the same port, and a PyTorchJob on the training operator.
    FrameworkRecord(
        Framework.DEEPSPEED, "DeepSpeed", ("launcher", "worker"), 29500, single_roles=("launcher",), elastic=True,
        kubeflow=_PYTORCHJOB, rank0_host="MASTER_ADDR", wraps=("deepspeed",), torchrun=True,
    ),
    FrameworkRecord(
        Framework.MPI, "MPI", ("launcher", "worker"), 2222, single_roles=("launcher",),
        role_rules=(RoleRule(("worker",), "an MPI job needs a worker role", hint="roles: {worker: {replicas: 2}}"),),
        takes_mpi=True, implied_roles=MappingProxyType({"launcher": 1}),
        kubeflow=KubeflowKind("MPIJob", "mpiReplicaSpecs", "mpi", "mpijob-port", "mpijobs"),
        program_role="launcher", ssh_launcher=True, wraps=("mpirun", "horovodrun"),
    ),
    FrameworkRecord(
        Framework.JAX, "JAX", ("worker",), 1234,
        kubeflow=KubeflowKind("JAXJob", "jaxReplicaSpecs", "jax", "jaxjob-port", "jaxjobs"),
    ),
    FrameworkRecord(Framework.GENERIC, "generic", None, 29500, trials=True, rank0_host=env_names.RANK0_HOST),
)})
"""The framework registry, in the order the CLI offers the names."""


def record_of(framework: Framework | str) -> FrameworkRecord:
    """The record of a framework, by member or name (ValueError for a name that is none)."""
    return RECORDS[Framework(framework)]


def frameworks_where(has: Callable[[FrameworkRecord], bool]) -> tuple[Framework, ...]:
    """The frameworks whose record `has` a fact (`lambda r: r.elastic`), for messages that name them."""
    return tuple(name for name, record in RECORDS.items() if has(record))


__all__ = ["RECORDS", "Framework", "FrameworkRecord", "KubeflowKind", "RoleRule", "frameworks_where", "record_of"]
