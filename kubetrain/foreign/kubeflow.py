"""Kubeflow training operator jobs (kubeflow.org) as TrainJobs: PyTorchJob, TFJob, MPIJob (v1 and the MPI
Operator's v2beta1), XGBoostJob, PaddleJob, JAXJob.

Each replica type becomes a role of the matching framework (Master → master, Chief → chief, PS → ps, ...), its
replicas and restartPolicy the role's, its pod template split into kubetrain's typed settings and a `podTemplate`
remainder. runPolicy maps field by field (schedulingPolicy to `spec.scheduling`), elasticPolicy to
`spec.elastic`, nprocPerNode / slotsPerWorker to `procsPerReplica`.

The operator's env conventions are kubetrain's frameworks' own: a PyTorchJob's replicas get MASTER_ADDR,
MASTER_PORT, WORLD_SIZE and RANK, a TFJob's TF_CONFIG, a JAXJob's JAX_* variables, from kubetrain as from the
operator. So the operator's container name (`pytorch`, `tensorflow`, ...) and its rendezvous port
(`pytorchjob-port`, ...) say which container is the program and which port the rendezvous uses; kubetrain renders
both again itself. XGBoostJob's variables are torch's (a pytorch-framework job); PaddleJob's PADDLE_* are not
kubetrain's (a generic job, said so).

A job kubetrain rendered itself (its pod templates carry `app.kubernetes.io/managed-by: kubetrain`) converts
back to the job it came from: the start-up script, the wiring env and kubetrain's labels are recognised as
kubetrain's own and left to the next render.

What the Kubernetes-shaped converters share (metadata, a program's argv, a pod template, kubetrain's own
rendering) is in `shapes`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..contract.frameworks import record_of
from ..jobspec.errors import Path
from ..jobspec.frameworks import Framework
from .conversion import SimpleKind
from .metadata import take_metadata_without_own
from .mpirun import mpirun_run
from .shapes import (
    HOSTING_PROGRAM,
    convert_template,
    document,
    is_kubetrain_template,
    object_fields,
    role_data,
)
from .walker import FieldTree, SourceWalker

# -- the operator's kinds --------------------------------------------------------------------------------


@dataclass(frozen=True)
class OperatorKind:
    """One kind of the training operator: its replica specs field, the framework it is, its conventions."""

    kind: str
    api_versions: tuple[str, ...]
    replica_specs: str
    framework: Framework
    container: str | None
    """The container name the operator looks for (the program's container)."""
    port_name: str | None
    """The rendezvous port's name, which the operator reads."""
    replica_types: Mapping[str, str]
    """Replica type → kubetrain role."""
    framework_note: str | None = None
    """Why the framework is an approximation (None: the kind is that framework)."""
    extra_fields: Mapping[str, FieldTree] = field(default_factory=dict)
    """The kind's own spec fields besides its replica specs and runPolicy."""


_REPLICA_SPEC: FieldTree = {"replicas": None, "restartPolicy": None, "template": None}
_SCHEDULING_POLICY: FieldTree = {
    "minAvailable": None,
    "queue": None,
    "priorityClass": None,
    "minResources": None,
    "scheduleTimeoutSeconds": None,
}
_RUN_POLICY: FieldTree = {
    "cleanPodPolicy": None,
    "ttlSecondsAfterFinished": None,
    "activeDeadlineSeconds": None,
    "backoffLimit": None,
    "schedulingPolicy": _SCHEDULING_POLICY,
    "suspend": None,
    "managedBy": None,
}
_ELASTIC_POLICY: FieldTree = {
    "minReplicas": None,
    "maxReplicas": None,
    "maxRestarts": None,
    "rdzvBackend": None,
    "rdzvHost": None,
    "rdzvPort": None,
    "rdzvId": None,
    "rdzvConf": None,
    "nProcPerNode": None,
    "standalone": None,
    "metrics": None,
}

_V1 = ("kubeflow.org/v1",)
_TORCH_LIKE = {"Master": "master", "Worker": "worker"}

PYTORCHJOB = OperatorKind(
    "PyTorchJob",
    _V1,
    "pytorchReplicaSpecs",
    Framework.PYTORCH,
    "pytorch",
    "pytorchjob-port",
    _TORCH_LIKE,
    extra_fields={"elasticPolicy": _ELASTIC_POLICY, "nprocPerNode": None},
)
TFJOB = OperatorKind(
    "TFJob",
    _V1,
    "tfReplicaSpecs",
    Framework.TENSORFLOW,
    "tensorflow",
    "tfjob-port",
    {"Chief": "chief", "Master": "chief", "Worker": "worker", "PS": "ps", "Evaluator": "evaluator"},
    extra_fields={"successPolicy": None, "enableDynamicWorker": None},
)
MPIJOB_V1 = OperatorKind(
    "MPIJob",
    _V1,
    "mpiReplicaSpecs",
    Framework.MPI,
    "mpi",
    None,
    {"Launcher": "launcher", "Worker": "worker"},
    extra_fields={"slotsPerWorker": None, "cleanPodPolicy": None, "mainContainer": None},
)
MPIJOB_V2 = OperatorKind(
    "MPIJob",
    ("kubeflow.org/v2beta1",),
    "mpiReplicaSpecs",
    Framework.MPI,
    None,
    None,
    {"Launcher": "launcher", "Worker": "worker"},
    extra_fields={
        "slotsPerWorker": None,
        "mpiImplementation": None,
        "sshAuthMountPath": None,
        "launcherCreationPolicy": None,
        "runLauncherAsWorker": None,
    },
)
XGBOOSTJOB = OperatorKind(
    "XGBoostJob",
    _V1,
    "xgbReplicaSpecs",
    Framework.PYTORCH,
    "xgboost",
    "xgboostjob-port",
    _TORCH_LIKE,
    framework_note="the operator gives XGBoost's replicas MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK, which "
    "kubetrain's pytorch framework sets the same way; WORKER_PORT and WORKER_ADDRS are not set",
)
PADDLEJOB = OperatorKind(
    "PaddleJob",
    _V1,
    "paddleReplicaSpecs",
    Framework.GENERIC,
    "paddle",
    "master",  # the port the operator reads for PADDLE_MASTER
    _TORCH_LIKE,
    framework_note="kubetrain has no Paddle framework: a generic job with the same roles (KUBETRAIN_CLUSTER "
    "lists every replica's address); the operator's PADDLE_* variables are not set",
    extra_fields={"elasticPolicy": _ELASTIC_POLICY},
)
JAXJOB = OperatorKind("JAXJob", _V1, "jaxReplicaSpecs", Framework.JAX, "jax", "jaxjob-port", {"Worker": "worker"})

OPERATOR_KINDS = (PYTORCHJOB, TFJOB, MPIJOB_V1, MPIJOB_V2, XGBOOSTJOB, PADDLEJOB, JAXJOB)


def _fields(op: OperatorKind) -> FieldTree:
    spec: dict[str, FieldTree] = {
        op.replica_specs: {name: _REPLICA_SPEC for name in op.replica_types},
        "runPolicy": _RUN_POLICY,
        **op.extra_fields,
    }
    return object_fields(spec)


# -- converting -------------------------------------------------------------------------------------------


def _convert(op: OperatorKind, doc: Mapping[str, Any], walker: SourceWalker) -> dict[str, Any]:
    # The MPI Operator's MPIJob stays one on the kubeflow flavor (`_kind_fields`).
    walker.take("apiVersion", "spec.mpi.mpiJobVersion" if op is MPIJOB_V2 else None)
    specs = ("spec", op.replica_specs)
    # A job kubetrain rendered itself converts back to the job it was; any other runs under its operator's
    # contract (spec.controller): the containers' commands as written, with the operator's variables.
    contract = not any(is_kubetrain_template(walker, (*specs, rtype, "template")) for rtype in walker.keys(specs))
    if contract:
        walker.take("kind", "spec.controller.kind")
    elif op.framework_note is None:
        walker.take("kind", "spec.framework")
    else:
        walker.approx("kind", "spec.framework", op.framework_note)
    metadata = take_metadata_without_own(walker)
    spec: dict[str, Any] = {"framework": op.framework.value}
    roles: dict[str, dict[str, Any]] = {}
    controller_roles: dict[str, dict[str, Any]] = {}
    main = walker.get(("spec", "mainContainer")) if op is MPIJOB_V1 else None
    if main is not None:
        walker.take(("spec", "mainContainer"), None)
    for rtype in walker.keys(specs):
        role = op.replica_types[rtype]
        base = (*specs, rtype)
        target = f"spec.roles.{role}"
        if role in roles:
            walker.refuse(base, f"a second {role} replica type: TFJob's Master and Chief are the same role")
            continue
        replicas = walker.take((*base, "replicas"), f"{target}.replicas", default=1)
        policy = walker.take((*base, "restartPolicy"), f"{target}.restartPolicy")
        program_role = record_of(op.framework).program_role
        hosts_only = program_role is not None and role != program_role
        launcher = program_role is not None and not hosts_only
        template = convert_template(
            walker,
            (*base, "template"),
            target,
            spec,
            container=main or op.container,
            run_target="spec.run" if launcher else None,
            port_name=op.port_name,
            program_note=HOSTING_PROGRAM if hosts_only else None,
            transform=mpirun_run if launcher else None,
            port_target=f"spec.controller.roles.{role}.port" if contract else None,
        )
        if launcher and template.run is not None:
            spec["run"] = template.run
            template.run = None
        roles[role] = role_data(replicas, template, policy)
        controller_roles[role] = {"name": rtype, **({"port": template.port} if template.port else {})}
    spec["roles"] = roles
    _run_policy(walker, spec)
    controller: dict[str, Any] | None = None
    if contract:
        controller = {"apiVersion": str(walker.get("apiVersion")), "kind": op.kind, "roles": controller_roles}
        if metadata.get("name"):
            controller["name"] = metadata["name"]
    _kind_fields(op, walker, spec, roles, controller)
    if controller is not None:
        spec["controller"] = controller
    return document(metadata, spec)


def _tf_success(walker: SourceWalker, s: tuple[str, ...], spec: dict[str, Any], roles: Mapping[str, Any]) -> None:
    """The TFJob operator's rule for success, as runPolicy.successRoles: the chief (Chief or Master) when there
    is one, else every worker (successPolicy AllWorkers) or worker 0 (the default, approximated as every
    worker). The other replicas (parameter servers, an evaluator) serve until stopped, as TensorFlow's do: a
    job waiting for them to exit would never end."""
    path = (*s, "successPolicy")
    policy = walker.get(path)
    deciding = "chief" if "chief" in roles else "worker"
    if deciding in roles and set(roles) != {deciding}:
        spec.setdefault("runPolicy", {}).setdefault("successRoles", [deciding])
    if deciding == "worker" and policy != "AllWorkers":
        walker.approx(path, "spec.runPolicy.successRoles", "TFJob succeeds when worker 0 has; a kubetrain job "
                      "when every worker has")
    elif walker.has(path):
        walker.take(path, "spec.runPolicy.successRoles")


def _run_policy(walker: SourceWalker, spec: dict[str, Any]) -> None:
    rp = ("spec", "runPolicy")
    policy: dict[str, Any] = {}
    for name in ("cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit", "suspend"):
        value = walker.take((*rp, name), f"spec.runPolicy.{name}")
        if value is not None:
            policy[name] = value
    sp = (*rp, "schedulingPolicy")
    scheduling: dict[str, Any] = spec.setdefault("scheduling", {})
    for src, dst in (("minAvailable", "minAvailable"), ("queue", "queue"), ("priorityClass", "priorityClass")):
        value = walker.take((*sp, src), f"spec.scheduling.{dst}")
        if value is not None:
            scheduling[dst] = value
    walker.refuse(
        (*sp, "minResources"),
        "kubetrain's gang needs the resources of its roles' replicas; a "
        "PodGroup's minResources of its own is not rendered",
    )
    walker.refuse((*sp, "scheduleTimeoutSeconds"), "kubetrain sets no time limit on placing the gang")
    managed = walker.get((*rp, "managedBy"))
    if managed in ("kubeflow.org/training-operator", "kubeflow.org/mpi-operator"):
        walker.approx((*rp, "managedBy"), None, "the operator's default: kubetrain renders for it")
    else:
        walker.refuse(
            (*rp, "managedBy"),
            "kubetrain renders jobs for the training operator itself (another "
            "controller, such as MultiKueue, is not rendered)",
        )
    if not scheduling:
        del spec["scheduling"]
    if policy:
        spec["runPolicy"] = policy


def _kind_fields(
    op: OperatorKind,
    walker: SourceWalker,
    spec: dict[str, Any],
    roles: dict[str, Any],
    controller: dict[str, Any] | None = None,
) -> None:
    """The fields only some kinds have; `controller`: the job runs under the operator's contract, which reads
    them as written."""
    s = ("spec",)
    if op is PYTORCHJOB:
        if controller is not None and walker.has((*s, "nprocPerNode")):
            controller["nprocPerNode"] = str(walker.take((*s, "nprocPerNode"), "spec.controller.nprocPerNode"))
        else:
            _nproc(walker, (*s, "nprocPerNode"), spec)
        _elastic(walker, spec, roles, controller)
    if op is PADDLEJOB:
        walker.refuse(
            (*s, "elasticPolicy"),
            "kubetrain's elastic training is torchrun's agent (pytorch, "
            "deepspeed); Paddle's elastic mode is not supported",
        )
    if op is TFJOB:
        _tf_success(walker, s, spec, roles)
        walker.refuse((*s, "enableDynamicWorker"), "kubetrain's TF_CONFIG lists a fixed set of workers")
    if op in (MPIJOB_V1, MPIJOB_V2):
        slots = walker.take((*s, "slotsPerWorker"), "spec.roles.worker.procsPerReplica")
        if slots is not None and "worker" in roles:
            roles["worker"]["procsPerReplica"] = slots
        if slots is not None and controller is not None:
            controller["slotsPerWorker"] = slots  # the hostfile's slots (the contract's)
        clean = walker.get((*s, "cleanPodPolicy"))
        if clean is not None:
            walker.take((*s, "cleanPodPolicy"), "spec.runPolicy.cleanPodPolicy")
            spec.setdefault("runPolicy", {}).setdefault("cleanPodPolicy", clean)
    if op is MPIJOB_V2:
        spec["mpi"] = {"mpiJobVersion": "v2beta1"}
        path = walker.take((*s, "sshAuthMountPath"), "spec.sshAuthMountPath")
        if path is not None:
            spec["sshAuthMountPath"] = path
        impl = walker.get((*s, "mpiImplementation"))
        if controller is not None and impl is not None:
            controller["mpiImplementation"] = impl  # which variables the contract gives the launcher
        if impl == "OpenMPI":
            walker.take((*s, "mpiImplementation"), None)
        else:
            walker.approx(
                (*s, "mpiImplementation"),
                None,
                "kubetrain's launcher runs mpirun with Open MPI's "
                "options (--hostfile, -np); Intel MPI and MPICH read other ones",
            )
        walker.approx(
            (*s, "launcherCreationPolicy"),
            None,
            "kubetrain's launcher starts with the workers and waits until each answers over ssh before mpirun",
        )
        if walker.get((*s, "runLauncherAsWorker")) is False:
            walker.take((*s, "runLauncherAsWorker"), None)
        else:
            walker.refuse((*s, "runLauncherAsWorker"), "kubetrain's launcher replica runs no rank of its own")


def _nproc(walker: SourceWalker, path: Path, spec: dict[str, Any]) -> None:
    value = walker.get(path)
    if value is None:
        return
    text = str(value)
    if text.isdigit():
        walker.take(path, "spec.procsPerReplica")
        spec["procsPerReplica"] = int(text)
    elif text == "gpu":
        walker.take(path, "spec.procsPerReplica")
        spec["procsPerReplica"] = "auto"
    elif text == "auto":
        walker.approx(
            path,
            "spec.procsPerReplica",
            "kubetrain's auto is one process per GPU; torchrun's falls back to one per CPU core on a node without GPUs",
        )
        spec["procsPerReplica"] = "auto"
    else:
        walker.refuse(path, f"{text}: kubetrain takes a number of processes per replica, or auto (one per GPU)")


_RDZV = ("rdzvBackend", "rdzvHost", "rdzvPort", "rdzvId", "rdzvConf", "standalone", "nProcPerNode")


def _elastic(
    walker: SourceWalker, spec: dict[str, Any], roles: dict[str, Any], controller: dict[str, Any] | None = None
) -> None:
    ep = ("spec", "elasticPolicy")
    if not isinstance(walker.get(ep), Mapping):
        return
    workers = int((roles.get("worker") or {}).get("replicas", 1))
    elastic: dict[str, Any] = {}
    given: dict[str, Any] = {}
    for name in ("minReplicas", "maxReplicas", "maxRestarts"):
        value = walker.take((*ep, name), f"spec.elastic.{name}")
        if value is not None:
            elastic[name] = value
            given[name] = value
    if controller is not None:
        # The operator reads the policy itself (PET_* for torchrun): the contract takes it as written.
        for name in _RDZV:
            value = walker.take((*ep, name), f"spec.controller.elasticPolicy.{name}")
            if value is not None:
                given[name] = copy.deepcopy(value)
        controller["elasticPolicy"] = given
    # The operator's defaults: both bounds are the worker replicas when not given.
    elastic.setdefault("minReplicas", workers)
    elastic.setdefault("maxReplicas", max(workers, elastic["minReplicas"]))
    spec["elastic"] = elastic
    backend = walker.get((*ep, "rdzvBackend"))
    if backend in (None, "c10d"):
        walker.take((*ep, "rdzvBackend"), None)
    else:
        walker.approx((*ep, "rdzvBackend"), None, f"{backend}: kubetrain's rendezvous is c10d on the first worker")
    for name in ("rdzvHost", "rdzvPort", "rdzvId", "rdzvConf"):
        walker.approx(
            (*ep, name), None, "kubetrain sets the rendezvous endpoint and id itself (PET_RDZV_ENDPOINT, PET_RDZV_ID)"
        )
    if controller is not None:
        pass  # read as written by the contract (above)
    elif walker.has((*ep, "nProcPerNode")) and "procsPerReplica" not in spec:
        _nproc(walker, (*ep, "nProcPerNode"), spec)
    else:
        walker.approx((*ep, "nProcPerNode"), "spec.procsPerReplica", "nprocPerNode, given too, wins")
    walker.approx((*ep, "standalone"), None, "kubetrain's elastic rendezvous always runs on the first worker")
    walker.refuse(
        (*ep, "metrics"),
        "kubetrain does not autoscale: an elastic job keeps the replicas it was "
        "given (no HorizontalPodAutoscaler is rendered)",
    )


def _kind(op: OperatorKind) -> SimpleKind:
    return SimpleKind(op.kind, op.api_versions, lambda: _fields(op), lambda doc, w: _convert(op, doc, w))


KINDS: tuple[SimpleKind, ...] = tuple(_kind(op) for op in OPERATOR_KINDS)

__all__ = [
    "KINDS",
    "OPERATOR_KINDS",
    "OperatorKind",
]
