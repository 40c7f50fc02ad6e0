"""`spec.controller`: the controller whose contract a job's replicas get — what a foreign file's own controller
(the Kubeflow training operator, Volcano, JobSet, T9k, the MPI operator) gives each container: variables,
files, host names, the command run as written.

A converted foreign file records it here (`kubetrain convert` prints it), so the job runs as its controller
runs it wherever kubetrain runs it itself: locally, and rendered into a flavor that lacks that controller. The
contracts themselves are `kubetrain.frameworks.controllers`; this module is only their parameters, read from the
source document as its controller reads them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .errors import FieldError, SpecError
from .types import INT32_MAX, MAX_REPLICAS, Arg, SpecModel

CONTROLLER_KINDS: dict[tuple[str, str], str] = {
    ("kubeflow.org/v1", "PyTorchJob"): "the Kubeflow training operator",
    ("kubeflow.org/v1", "TFJob"): "the Kubeflow training operator",
    ("kubeflow.org/v1", "JAXJob"): "the Kubeflow training operator",
    ("kubeflow.org/v1", "XGBoostJob"): "the Kubeflow training operator",
    ("kubeflow.org/v1", "PaddleJob"): "the Kubeflow training operator",
    ("kubeflow.org/v1", "MPIJob"): "the Kubeflow training operator",
    ("kubeflow.org/v2beta1", "MPIJob"): "the MPI operator",
    ("batch.volcano.sh/v1alpha1", "Job"): "Volcano's job controller and its plugins",
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): "the JobSet controller (and the Job controller under it)",
    ("batch.tensorstack.dev/v1beta1", "DeepSpeedJob"): "T9k's DeepSpeedJob controller",
}
"""(apiVersion, kind) → whose contract it is; `kubetrain.frameworks.controllers.CONTRACTS` has one contract per
entry (a test holds them equal)."""

ControllerKind = Literal["PyTorchJob", "TFJob", "JAXJob", "XGBoostJob", "PaddleJob", "MPIJob", "Job", "JobSet",
                         "DeepSpeedJob"]


class ControllerRole(SpecModel):
    """One role as the source names it, for the names and ports its controller derives from it."""

    name: str
    """The replica type (`Master`), task (`worker`) or replicated Job (`workers`) as written in the source."""
    port: int | None = Field(default=None, ge=1, le=65535)
    """The port the controller reads from the role's container (`pytorchjob-port`, ...); None: its default. On
    Kubernetes the replicas listen there; locally each replica gets a free port of this machine instead."""
    jobs: int | None = Field(default=None, ge=1, le=MAX_REPLICAS)
    """JobSet: the replicated Job's `replicas` (Jobs); the role's replicas are these Jobs' pods, indexed across
    them (`jobs` × `parallelism`)."""


class RendezvousOption(SpecModel):
    """One `elasticPolicy.rdzvConf` entry."""

    key: str
    value: str


class ControllerElastic(SpecModel):
    """A PyTorchJob's `elasticPolicy` as the training operator reads it for torchrun's PET_* variables."""

    rdzv_backend: str | None = None
    """PET_RDZV_BACKEND (the operator's default: c10d)."""
    rdzv_host: str | None = None
    """The rendezvous host (the operator's default: `<job>-worker-0`)."""
    rdzv_port: int | None = Field(default=None, ge=1, le=65535)
    """The rendezvous port (the operator's default: the worker's pytorchjob-port)."""
    rdzv_id: str | None = None
    """PET_RDZV_ID (not set when not given)."""
    rdzv_conf: list[RendezvousOption] | None = None
    """PET_RDZV_CONF, `key=value` pairs joined by commas."""
    standalone: bool | None = None
    """true: PET_STANDALONE is set."""
    n_proc_per_node: int | None = Field(default=None, ge=1, le=INT32_MAX)
    """PET_NPROC_PER_NODE from the elastic policy (deprecated upstream for spec.nprocPerNode)."""
    max_restarts: int | None = Field(default=None, ge=0, le=INT32_MAX)
    """PET_MAX_RESTARTS (not set when not given)."""
    min_replicas: int | None = Field(default=None, ge=1, le=MAX_REPLICAS)
    max_replicas: int | None = Field(default=None, ge=1, le=MAX_REPLICAS)
    """PET_NNODES is `min:max` when either is given (the other defaulting to it), else the worker replicas."""


class Controller(SpecModel):
    """The controller whose contract the replicas get: a foreign file (a PyTorchJob, a Volcano Job, a JobSet,
    ...) runs as its own controller would run it — each container's command as written, with every variable,
    file and host name that controller gives it (docs/foreign.md has the table per kind) — wherever kubetrain
    runs it itself: locally, and rendered into a flavor without that controller. `kubetrain convert` writes it;
    the framework's own wiring then does not apply. Locally every host name the controller would make
    resolvable stands for this machine's address, each replica gets a port of its own, and the files the
    controller places (`/etc/volcano/<task>.host`, `/etc/mpi/hostfile`) are under $KUBETRAIN_FILES_ROOT."""

    api_version: str = Field(alias="apiVersion")
    """The source's apiVersion (`kubeflow.org/v1`, `batch.volcano.sh/v1alpha1`, ...)."""
    kind: ControllerKind
    """The source's kind (`PyTorchJob`, `Job` for a Volcano Job, `JobSet`, ...)."""
    name: str | None = None
    """The source object's name, which the controller's host names and values derive from; None: the job's."""
    roles: dict[str, ControllerRole] = Field(default_factory=dict)
    """Each role of the job as the source names it (replica type, task, replicated Job) and its port."""
    nproc_per_node: str | None = None
    """PyTorchJob: `spec.nprocPerNode` as written (PET_NPROC_PER_NODE; the operator's default is `auto`)."""
    elastic_policy: ControllerElastic | None = None
    """PyTorchJob: `spec.elasticPolicy` as the operator reads it."""
    plugins: dict[str, list[Arg]] | None = None
    """Volcano Job: `spec.plugins` as written (env, svc, pytorch, tensorflow, mpi, ssh and their arguments)."""
    subdomain: str | None = None
    """JobSet: `spec.network.subdomain` (default: the JobSet's name)."""
    slots_per_worker: int | None = Field(default=None, ge=1, le=INT32_MAX)
    """MPIJob: `spec.slotsPerWorker` (the operator's default: 1)."""
    mpi_implementation: Literal["OpenMPI", "Intel", "MPICH"] | None = None
    """MPIJob v2beta1: `spec.mpiImplementation` (default OpenMPI): which launcher variables the operator sets."""

    @model_validator(mode="after")
    def _known(self) -> Controller:
        if (self.api_version, self.kind) not in CONTROLLER_KINDS:
            known = ", ".join(f"{kind} ({api})" for api, kind in CONTROLLER_KINDS)
            raise SpecError([FieldError(("kind",), f"kubetrain knows no controller for {self.kind} "
                                        f"({self.api_version})", hint=f"one of: {known}")])
        return self

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]


__all__ = ["CONTROLLER_KINDS", "Controller", "ControllerElastic", "ControllerKind", "ControllerRole",
           "RendezvousOption"]
