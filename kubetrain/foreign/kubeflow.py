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

The helpers in the first part (metadata, a program's argv, kubetrain's own rendering) are shared with the
JobSet and Volcano converters.
"""

from __future__ import annotations

import copy
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..contract import labels as kt_labels
from ..frameworks import support_of
from ..frameworks.mpi import sshd_argv
from ..jobspec.errors import Path
from ..jobspec.frameworks import Framework
from ..plan import FILES_DIR_PLACEHOLDER
from .base import SERVER_METADATA, FieldTree, SimpleKind, SourceWalker
from .pod_template import lift_job_level, split_pod_template

# -- shared by the Kubernetes-shaped converters (kubeflow, jobset, volcano) --------------------------------

SERVER_SET = "set by the API server for the object it stored; a conversion describes a new job"
KUBETRAIN_OWN = "kubetrain's own rendering, produced again when the converted job is rendered"

METADATA_FIELDS: FieldTree = dict.fromkeys(
    ("name", "generateName", "namespace", "labels", "annotations", *SERVER_METADATA, "ownerReferences", "finalizers")
)
"""ObjectMeta's fields (a typo in `metadata` gets a did-you-mean from these)."""

_KUBECTL_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def is_kubetrain_label(key: str, value: Any) -> bool:
    """A label kubetrain puts on what it renders (and puts there again on the next render)."""
    return key.startswith("kubetrain.dev/") or (key == kt_labels.MANAGED_BY and value == kt_labels.MANAGER)


def take_metadata(walker: SourceWalker) -> dict[str, Any]:
    """The object's metadata → TrainJob metadata. kubetrain's own labels (a job it rendered) are left to the
    next render; what the API server set (uid, resourceVersion, ...) is refused with why."""
    out: dict[str, Any] = {}
    for src, dst in (("name", "name"), ("generateName", "namePrefix"), ("namespace", "namespace")):
        value = walker.take(("metadata", src), f"metadata.{dst}")
        if value is not None:
            out[dst] = value
    labels = _own_filtered(walker, ("metadata", "labels"), "metadata.labels", is_kubetrain_label)
    if labels:
        out["labels"] = labels
    annotations = _own_filtered(
        walker,
        ("metadata", "annotations"),
        "metadata.annotations",
        lambda key, _v: key.startswith("kubetrain.dev/") or key == _KUBECTL_LAST_APPLIED,
    )
    if annotations:
        out["annotations"] = annotations
    for name in SERVER_METADATA:
        walker.refuse(("metadata", name), SERVER_SET)
    walker.refuse(
        ("metadata", "ownerReferences"),
        "an owner is the object's creator's to set; kubetrain's job owns what it creates",
    )
    walker.refuse(("metadata", "finalizers"), "finalizers belong to the controllers of a stored object")
    walker.refuse(("status",), "the state of a job that ran; a conversion starts a new one")
    return out


def take_object_metadata(walker: SourceWalker) -> dict[str, Any]:
    """apiVersion and kind, read only (they chose the converter; the TrainJob has its own), then the metadata
    (`take_metadata`): the start of a kind whose kind says nothing about the job (JobSet, Volcano's Job)."""
    walker.take("apiVersion", None)
    walker.take("kind", None)
    return take_metadata(walker)


def _own_filtered(walker: SourceWalker, path: Path, target: str, own: Any) -> dict[str, Any]:
    """A string map at `path` without the entries `own(key, value)` says kubetrain (or kubectl) set: those
    are noted as kubetrain's own, the rest taken to `target` (the map is consumed either way)."""
    values = walker.get(path)
    if not isinstance(values, Mapping) or walker.consumed(path):
        return {}
    kept = {str(k): v for k, v in values.items() if not own(str(k), v)}
    if not kept:
        walker.approx(path, None, KUBETRAIN_OWN)
        return {}
    for key, value in values.items():
        if own(str(key), value) and not walker.consumed((*path, str(key))):
            walker.approx((*path, str(key)), None, KUBETRAIN_OWN)
    walker.take(path, target)
    return kept


_PYTHONS = ("python", "python3")


def program_run(argv: Sequence[Any]) -> tuple[dict[str, Any], str | None]:
    """A container's command + args → a TrainJob `run`, and how it was approximated (None: as written).

    `python script ...` → run.python, `python -m module ...` → run.module, anything else → run.exec. kubetrain
    names the interpreter `python` (locally the one it runs on, in a container the image's)."""
    words = [str(word) for word in argv]
    if not words:
        return {"exec": words}, None
    program = posixpath.basename(words[0])
    if program in _PYTHONS or (program.startswith("python3.") and program[8:].isdigit()):
        how = (
            None
            if words[0] == "python"
            else (
                f"{words[0]} runs as kubetrain's `python`: locally the interpreter kubetrain runs on, in a "
                "container the image's `python`"
            )
        )
        if len(words) >= 3 and words[1] == "-m":
            return {"module": words[2:]}, how
        if len(words) >= 2 and not words[1].startswith("-"):
            return {"python": words[1:]}, how
    return {"exec": words}, None


KUBETRAIN_WIRED_ENV = frozenset(
    {
        "PYTHONUNBUFFERED",
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
        "NODE_RANK",
        "GROUP_RANK",
        "LOCAL_WORLD_SIZE",
        "NPROC_PER_NODE",
        "TF_CONFIG",
        "JAX_COORDINATOR_ADDRESS",
        "JAX_NUM_PROCESSES",
        "JAX_PROCESS_ID",
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE",
        "OMPI_ALLOW_RUN_AS_ROOT",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
        "OMPI_MCA_btl_vader_single_copy_mechanism",
        "OMPI_MCA_orte_keep_fqdn_hostnames",
        "OMPI_MCA_plm_rsh_args",
    }
)
"""Variables kubetrain's frameworks set on every replica (besides KUBETRAIN_* and torchrun's PET_*)."""


KUBETRAIN_VOLUMES = frozenset(
    {"kubetrain-files", "kubetrain-debug", "kubetrain-ssh-keys", "kubetrain-ssh-run", "kubetrain-ssh-auth"}
)
"""Volumes kubetrain's render adds itself (its files ConfigMap, the debug hold, an MPI job's ssh keys)."""


def _wired(name: str) -> bool:
    return name.startswith(("KUBETRAIN_", "PET_")) or name in KUBETRAIN_WIRED_ENV


def is_kubetrain_template(walker: SourceWalker, template: Path) -> bool:
    """The pod template was rendered by kubetrain (its managed-by label says so)."""
    labels = walker.get((*template, "metadata", "labels"))
    return isinstance(labels, Mapping) and labels.get(kt_labels.MANAGED_BY) == kt_labels.MANAGER


Transform = Callable[[dict[str, Any]], tuple[dict[str, Any], str | None]]
"""A kind's own reading of a program (MPI: the launcher's mpirun options): the run, and how it approximates."""


def take_program(
    walker: SourceWalker,
    container: Path,
    run_target: str,
    *,
    kubetrain_own: bool = False,
    transform: Transform | None = None,
    note: str | None = None,
    entrypoint: bool = False,
) -> dict[str, Any] | None:
    """Consume the container's command and args as a TrainJob `run` (noted at `run_target`, approximated with
    `note` when given). Without a command the image's ENTRYPOINT runs: `entrypoint` takes its args as
    `run.entrypoint` (what a Kubernetes render runs as is, and a local run refuses naming the image); else None
    (`split_pod_template` says how its args are taken).

    A container kubetrain rendered runs its start-up script (`/bin/sh -c <script> kubetrain`) with the
    program in args, every `$` written `$$`: the program is args, as the user wrote it."""
    command, args = walker.get((*container, "command")), walker.get((*container, "args"))
    if command is None:
        if not entrypoint:
            return None
        if args is not None:
            walker.take((*container, "args"), f"{run_target}.entrypoint")
        else:
            walker.note(container, f"{run_target}.entrypoint", "no command nor args: the image's own ENTRYPOINT")
        return {"entrypoint": [str(word) for word in args or []]}
    hows: list[str] = []
    if (
        kubetrain_own
        and isinstance(command, list)
        and command[:2] == ["/bin/sh", "-c"]
        and command[-1:] == ["kubetrain"]
    ):
        walker.approx(
            (*container, "command"),
            None,
            "kubetrain's start-up script (the framework's wiring), written again when the job is rendered",
        )
        parts: tuple[str, ...] = ("args",)
        argv = [str(word).replace("$$", "$") for word in args or []]
        if not argv or tuple(argv) == sshd_argv(FILES_DIR_PLACEHOLDER):
            # A replica that hosts a launcher's processes: it waits, or serves ssh with kubetrain's sshd.
            walker.approx((*container, "args"), None, KUBETRAIN_OWN)
            return None
        if argv[:1] == ["mpirun"]:
            argv = _without_forwarding(argv, walker.get((*container, "env")) or [])
    else:
        parts = ("command", "args")
        argv = [*command, *(args or [])]
    run, how = program_run(argv)
    if how:
        hows.append(how)
    if transform is not None:
        run, how = transform(run)
        if how:
            hows.append(how)
    if note:
        hows.append(note)
    for part in parts:
        if hows:
            walker.approx((*container, part), run_target, "; ".join(hows))
        else:
            walker.take((*container, part), run_target)
    return run


def _without_forwarding(argv: list[str], env: Sequence[Any]) -> list[str]:
    """kubetrain's mpirun without the `-x NAME` it writes for the variables a rank on another pod must get
    (frameworks/mpi.py: the container's and PATH), written again when the job is rendered."""
    names = {str(var.get("name")) for var in env if isinstance(var, Mapping)} | {"PATH"}
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "-x" and i + 1 < len(argv) and argv[i + 1] in names:
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def take_kubetrain_env(walker: SourceWalker, container: Path, target: str) -> list[Any] | None:
    """In a container kubetrain rendered: the env without kubetrain's own wiring (noted as such), taken to
    `target`; None when the container has no env."""
    env = walker.get((*container, "env"))
    if not isinstance(env, list) or walker.consumed((*container, "env")):
        return None
    wired = [i for i, var in enumerate(env) if isinstance(var, Mapping) and _wired(str(var.get("name", "")))]
    kept = [copy.deepcopy(var) for i, var in enumerate(env) if i not in wired]
    if not kept:
        walker.approx((*container, "env"), None, KUBETRAIN_OWN)
        return []
    for i in wired:
        walker.approx((*container, "env", i), None, KUBETRAIN_OWN)
    walker.take((*container, "env"), target)
    return kept


def take_kubetrain_pod(walker: SourceWalker, template: Path, target: str) -> dict[str, Any]:
    """In a pod template kubetrain rendered: its labels (without kubetrain's own, returned) and the defaults
    the next render writes again."""
    labels = _own_filtered(walker, (*template, "metadata", "labels"), f"{target}.labels", is_kubetrain_label)
    spec = (*template, "spec")
    for i in walker.indexes((*spec, "volumes")):
        if (walker.get((*spec, "volumes", i)) or {}).get("name") in KUBETRAIN_VOLUMES:
            walker.approx((*spec, "volumes", i), None, KUBETRAIN_OWN + " (the job's files, the debug hold)")
    for c in walker.indexes((*spec, "containers")):
        for j in walker.indexes((*spec, "containers", c, "volumeMounts")):
            if (walker.get((*spec, "containers", c, "volumeMounts", j)) or {}).get("name") in KUBETRAIN_VOLUMES:
                walker.approx((*spec, "containers", c, "volumeMounts", j), None, KUBETRAIN_OWN)
    if walker.get((*spec, "automountServiceAccountToken")) is False:
        walker.approx(
            (*spec, "automountServiceAccountToken"),
            None,
            "kubetrain mounts no service account token unless the job asks for API access",
        )
    return labels


def main_container_index(walker: SourceWalker, template: Path, name: str | None) -> int | None:
    """The index of the program's container: the one named `name`, else the first."""
    containers = walker.get((*template, "spec", "containers"))
    if not isinstance(containers, list) or not containers:
        return None
    for i, container in enumerate(containers):
        if isinstance(container, Mapping) and name is not None and container.get("name") == name:
            return i
    return 0


@dataclass
class RoleTemplate:
    """What one pod template became: the role's settings (run, image, env, ...) and the remainder."""

    settings: dict[str, Any] = field(default_factory=dict)
    pod_template: dict[str, Any] | None = None
    run: dict[str, Any] | None = None
    port: int | None = None
    """The engine's rendezvous port the container names (its `pytorchjob-port`, ...), when it names one."""
    own: bool = False
    """kubetrain rendered the template itself (a job converted back)."""


def convert_template(
    walker: SourceWalker,
    template: Path,
    target: str,
    spec: dict[str, Any],
    *,
    container: str | None = None,
    run_target: str | None = None,
    port_name: str | None = None,
    program_note: str | None = None,
    transform: Transform | None = None,
    port_target: str | None = None,
) -> RoleTemplate:
    """A pod template at `template` → a role's settings at `target` (job-level ones lifted into `spec`).

    `container`: the name of the program's container (the operator's convention), else the first.
    `run_target`: where its command goes (default `<target>.run`). `port_name`: the engine's rendezvous port,
    which kubetrain's framework wiring replaces. `program_note`: how the program is taken (MPI workers: kept for
    Kubernetes, not run locally). `port_target`: the job runs under its controller's contract (`spec.controller`),
    which reads the rendezvous port (mapped there), and a container without a command runs its image's entrypoint
    (`run.entrypoint`), but for a replica that only hosts a launcher's processes (`program_note`)."""
    out = RoleTemplate()
    if not isinstance(walker.get(template), Mapping):
        return out
    own = is_kubetrain_template(walker, template)
    out.own = own
    contract = port_target is not None and not own
    index = main_container_index(walker, template, container)
    rendezvous: list[Any] = []
    if own:
        labels = take_kubetrain_pod(walker, template, target)
        if labels:
            out.settings["labels"] = labels
    if index is not None:
        c = (*template, "spec", "containers", index)
        out.run = take_program(walker, c, run_target or f"{target}.run", kubetrain_own=own, transform=transform,
                               note=program_note, entrypoint=contract and program_note is None)
        if own:
            env = take_kubetrain_env(walker, c, f"{target}.env")
            if env:
                out.settings["env"] = env
        rendezvous = _take_rendezvous_ports(walker, c, port_name, own, port_target if contract else None)
        out.port = next((int(p) for p in rendezvous if isinstance(p, int)), None) if contract else None
    restart = walker.get((*template, "spec", "restartPolicy"))
    if restart is not None and not walker.consumed((*template, "spec", "restartPolicy")):
        out.settings["restartPolicy"] = walker.take((*template, "spec", "restartPolicy"), f"{target}.restartPolicy")
    settings, remainder = split_pod_template(walker, template, role_target=target, main_container=container)
    settings = lift_job_level(spec, settings)
    if rendezvous and "ports" in settings:
        # split_pod_template maps the container's ports list as a whole: leave out those noted above.
        settings["ports"] = [p for p in settings["ports"] if p.get("container") not in rendezvous]
        if not settings["ports"]:
            del settings["ports"]
    if out.run is not None:
        settings.pop("run", None)
    out.settings.update(settings)
    out.pod_template = remainder
    return out


def _take_rendezvous_ports(
    walker: SourceWalker, container: Path, port_name: str | None, own: bool, target: str | None = None
) -> list[Any]:
    """Note the engine's rendezvous port (by its name): read by the controller's contract (`target`), else
    replaced by kubetrain's wiring; its containerPorts."""
    found = []
    for i in walker.indexes((*container, "ports")):
        port = walker.get((*container, "ports", i))
        if not isinstance(port, Mapping):
            continue
        name = port.get("name")
        if target is not None and port_name is not None and name == port_name:
            walker.take((*container, "ports", i), target)
            found.append(port.get("containerPort"))
        elif (port_name is not None and name == port_name) or (own and name in ("kubetrain", port_name)):
            walker.approx(
                (*container, "ports", i),
                None,
                "the framework's rendezvous port: kubetrain wires its own and tells every replica "
                "through the framework's env (MASTER_PORT, TF_CONFIG, ...)",
            )
            found.append(port.get("containerPort"))
    return found


def role_data(replicas: int | None, template: RoleTemplate, restart_policy: Any = None) -> dict[str, Any]:
    """A role of the TrainJob from its parts."""
    role: dict[str, Any] = {}
    if replicas is not None:
        role["replicas"] = replicas
    settings = dict(template.settings)
    from_template = settings.pop("restartPolicy", None)
    if restart_policy is not None or from_template is not None:
        role["restartPolicy"] = restart_policy if restart_policy is not None else from_template
    if template.run is not None:
        role["run"] = template.run
    role.update(settings)
    if template.pod_template:
        role["podTemplate"] = template.pod_template
    return role


def document(metadata: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": metadata, "spec": spec}


def object_fields(spec: FieldTree) -> FieldTree:
    """A Kubernetes object's field tree around its kind's `spec` tree (`status` is known, to be refused)."""
    return {"apiVersion": None, "kind": None, "metadata": METADATA_FIELDS, "spec": spec, "status": None}


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
    metadata = take_metadata(walker)
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
        program_role = support_of(op.framework).program_role
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


_MPIRUN_VALUE_OPTIONS = frozenset(
    {
        "-np",
        "-n",
        "--np",
        "-c",
        "-N",
        "--npernode",
        "-npernode",
        "--hostfile",
        "-hostfile",
        "--machinefile",
        "-machinefile",
        "-H",
        "--host",
        "-host",
        "-x",
        "--map-by",
        "-map-by",
        "--bind-to",
        "-bind-to",
        "--rank-by",
        "-rank-by",
        "-wdir",
        "--wdir",
        "--prefix",
        "-f",
        "-ppn",
        "--tag-output-with",
    }
)
_MPIRUN_TWO_VALUES = frozenset({"--mca", "-mca", "-gmca", "--gmca"})
_MPIRUN_PLACEMENT = frozenset(
    {
        "-np",
        "-n",
        "--np",
        "-c",
        "--hostfile",
        "-hostfile",
        "--machinefile",
        "-machinefile",
        "-H",
        "--host",
        "-host",
        "-f",
    }
)
_MPIRUN_ROOT = frozenset({"--allow-run-as-root", "-allow-run-as-root"})


def mpirun_run(run: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The launcher's `mpirun [options] program ...` → kubetrain's mpi run: the program, and the options other
    than those kubetrain writes itself (-np, the hostfile, running as root) in otherArgs."""
    argv = run.get("exec")
    if argv is None or posixpath.basename(argv[0]) not in ("mpirun", "mpiexec", "orterun"):
        return run, None
    options: list[str] = []
    dropped: list[str] = []
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        word = argv[i]
        flag, eq, _ = word.partition("=")
        width = 0 if eq else 2 if word in _MPIRUN_TWO_VALUES else 1 if word in _MPIRUN_VALUE_OPTIONS else 0
        taken = argv[i : i + 1 + width]
        if flag in _MPIRUN_PLACEMENT or flag in _MPIRUN_ROOT:
            dropped.append(" ".join(taken))
        else:
            options += taken
        i += 1 + width
    program, how = program_run(argv[i:])
    if options:
        program["otherArgs"] = options
    hows = [how] if how else []
    if dropped:
        hows.append(
            f"mpirun's {', '.join(dropped)}: kubetrain writes -np (worker replicas × slotsPerWorker), "
            "the hostfile and OMPI_ALLOW_RUN_AS_ROOT itself"
        )
    return program, "; ".join(hows) or None


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


HOSTING_PROGRAM = (
    "kept: on Kubernetes the workers run it (the sshd the launcher's mpirun reaches them through); locally "
    "kubetrain does not run it, since mpirun starts every rank on this machine"
)
"""How an MPI worker's own command (`sshd -De`) is taken (shared with the Volcano converter)."""


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
    "KUBETRAIN_OWN",
    "METADATA_FIELDS",
    "OPERATOR_KINDS",
    "OperatorKind",
    "RoleTemplate",
    "convert_template",
    "document",
    "mpirun_run",
    "object_fields",
    "program_run",
    "role_data",
    "take_metadata",
    "take_object_metadata",
    "take_program",
]
