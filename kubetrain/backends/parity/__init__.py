"""The parity contract: what every field of a TrainJob does on every backend, in one table.

A field kubetrain accepts takes effect, or is refused with its path (naming the backends that can), or is
honoured approximately with a warning that says how. `ROWS` holds, for every field of the TrainJob JSON
Schema (`kubetrain.jobspec.schema.full_json_schema`), and for the values that change the verdict, one
`Cell` per backend (`BACKENDS`: local and the four Kubernetes flavors):

- `honoured` (✓): it takes effect (`same=True`: what it asks for is what the backend does anyway);
- `refused`: the backend raises a field-pathed problem (a render problem on Kubernetes);
- `approximated`: it takes effect approximately, and a warning says how;
- `ignored`: it has no meaning on that backend (an image or a node selector on this machine); the backend
  runs the job and warns, naming the fields and why (`unused_warnings`), as `kubetrain validate` does.

Each row carries a sample (assignments over `BASE`, a small job every backend runs) so the tests can hold
the table to the code: a refused cell must produce a problem at the row's path, an honoured one none and a
change of what would run (manifests, launch record) against the row's baseline, an approximated one a
warning naming the path. Cells the tests cannot check say why (`unchecked`).

`python -m kubetrain.backends.parity --markdown` writes docs/parity.md from this table.

This module imports neither backend (either may read the table); `observe.py` beside it runs them.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from typing import Any, Protocol

from ...contract.choices import FLAVORS


class Observation(Protocol):
    """What `observe.py` saw a backend make of a job (its `Observation`): declared here as a protocol, so
    this module imports no backend (the local backend reads the table)."""

    @property
    def backend(self) -> str: ...

    @property
    def problems(self) -> list[Any]: ...

    @property
    def warnings(self) -> list[str]: ...

    @property
    def output(self) -> Any: ...

KUBERNETES: tuple[str, ...] = FLAVORS
"""The Kubernetes flavors, in the registry's order."""
BACKENDS = ("local", *KUBERNETES)
"""Every backend a job can run on, as the table's columns: the local one, then each Kubernetes flavor."""

HONOURED = "honoured"
REFUSED = "refused"
APPROXIMATED = "approximated"
IGNORED = "ignored"
VERDICTS = (HONOURED, REFUSED, APPROXIMATED, IGNORED)


@dataclass(frozen=True)
class Cell:
    """One field on one backend."""

    verdict: str
    note: str = ""
    """refused: why, or what to use instead; approximated: how; ignored: why; honoured: how (optional)."""
    same: bool = False
    """Honoured without a trace: the field asks for what the backend does without it."""
    unchecked: str = ""
    """Why the consistency tests cannot check this cell (keep these few)."""
    warns: str = ""
    """Honoured, with a warning for a human's eye (a privileged pod): what it says."""
    mentions: str = ""
    """A warned cell whose warning does not name the field's path: text the warning holds instead."""

    def text(self) -> str:
        """The cell in docs/parity.md."""
        if self.verdict == HONOURED:
            if self.same:
                return f"✓ ({self.note})" if self.note else "✓ (the default)"
            notes = [n for n in (self.note, f"warns: {self.warns}" if self.warns else "") if n]
            return f"✓ ({'; '.join(notes)})" if notes else "✓"
        label = "not used (warned)" if self.verdict == IGNORED else self.verdict
        return f"{label}: {self.note}" if self.note else label


def ok(note: str = "", *, warns: str = "", unchecked: str = "") -> Cell:
    return Cell(HONOURED, note, unchecked=unchecked, warns=warns)


def same(note: str = "") -> Cell:
    """Honoured: it asks for what the backend does anyway, so nothing changes."""
    return Cell(HONOURED, note, same=True)


def refused(note: str = "") -> Cell:
    return Cell(REFUSED, note)


def approx(how: str, *, mentions: str = "") -> Cell:
    return Cell(APPROXIMATED, how, mentions=mentions)


def ignored(why: str) -> Cell:
    return Cell(IGNORED, why)


DELETE = object()
"""A sample's value that removes the key."""


@dataclass(frozen=True)
class Row:
    """One field (or one value of a field that changes the verdict) on every backend."""

    field: str
    """The schema path: `spec.runPolicy.backoffLimit`, `spec.ports[].name`, `spec.mounts[type=s3].bucket`.
    A role's setting (`spec.roles.<role>.image`) means what the job's does, at the role's path: the job's row."""
    cells: Mapping[str, Cell]
    sample: Mapping[str, Any]
    """Assignments over `BASE` (dotted paths → values) that set the field."""
    when: str = ""
    """The value (or case) this row is about, when the verdict depends on it: `All`, `valueFrom.secretKeyRef`."""
    baseline: Mapping[str, Any] | None = None
    """Assignments over `BASE` to compare with (None: `BASE` itself): what the sample changes must be the field."""
    at: str = ""
    """Where a refusal is reported, when not at the field's path (`spec.roles.launcher`)."""
    files: Mapping[str, str] = dataclass_field(default_factory=dict)
    """Files beside the sample job (a `spec.base` template)."""
    role: Mapping[str, Cell] = dataclass_field(default_factory=dict)
    """Backends where a role's setting of the field does not mean what the job's does: its cell there."""
    section: str = ""

    @property
    def key(self) -> str:
        return f"{self.field}={self.when}" if self.when else self.field

    @property
    def path(self) -> str:
        """The field's path in the sample job: list items as [0]."""
        if self.at:
            return self.at
        return re.sub(r"\[(type=[^\]]*)?\]", "[0]", self.field)

    def cell(self, backend: str) -> Cell:
        return self.cells[backend]

    def cell_at(self, backend: str, path: str) -> Cell:
        """The cell of the field set at `path`: a role's (`spec.roles.<role>....`) or the job's."""
        return self.role.get(backend, self.cells[backend]) if path.startswith("spec.roles.") else self.cells[backend]

    def matches(self, value: Any) -> bool:
        """Whether a job's value of the field is the case this row is about (`when`, else any)."""
        if not self.when:
            return True
        text = str(value).lower() if isinstance(value, bool) else str(value)
        return text == self.when


# -- the table -------------------------------------------------------------------------------------------------

BASE: dict[str, Any] = {
    "apiVersion": "kubetrain.dev/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "parity"},
    "spec": {"framework": "pytorch", "image": "registry.example.com/train:1", "replicas": 2,
             "run": {"python": ["train.py", "--steps", "5"]}},
}
"""The job every sample starts from: two PyTorch workers, which every backend runs."""

_NO_CONTAINER = "no container locally: the program runs on this machine, as you"
_NO_SCHEDULER = "no scheduler locally: every replica runs on this machine"
_NO_K8S = "no Kubernetes objects locally"
_NO_LIMITS = "no resource requests or limits locally: replicas share this machine"
_NO_SERVICE = "no Service locally: replicas listen on this machine's ports"
_STORED = "kept with the job, in the job store"
_KUEUE = "jobset gangs through Kueue: needs scheduling.queue"
_SHARED_GPU = approx("replicas share whole GPUs; nothing limits their memory or compute")
_NO_PREEMPTION = approx("no effect: nothing preempts a local job")
_ONE_PROGRAM = "a pod runs one program: scale replicas instead"


def _cells(local: Cell, kube: Cell, flavors: Mapping[str, Cell]) -> dict[str, Cell]:
    out = {"local": local, **{f: kube for f in KUBERNETES}}
    out.update(flavors)
    return out


def row(field_: str, sample: Mapping[str, Any], *, when: str = "", baseline: Mapping[str, Any] | None = None,
        at: str = "", files: Mapping[str, str] | None = None, role: Mapping[str, Cell] | None = None,
        local: Cell | None = None, kube: Cell | None = None, **flavors: Cell) -> Row:
    """A row: `kube` for every flavor unless one is named; both default to honoured."""
    unknown = set(flavors) - set(KUBERNETES)
    if unknown:
        raise ValueError(f"{field_}: unknown backends {sorted(unknown)}")
    return Row(field_, _cells(local or ok(), kube or ok(), flavors), dict(sample), when, baseline, at,
               dict(files or {}), dict(role or {}))


def _section(title: str, rows: list[Row]) -> list[Row]:
    return [replace(r, section=title) for r in rows]


_ROLES = {"spec.replicas": DELETE, "spec.roles": {"master": {}, "worker": {"replicas": 2}}}
_HAMI = {"spec.resources": {"gpu": 0.5, "gpuSharing": "hami"}}
_RUNAI = {"spec.resources": {"gpu": 0.5, "gpuSharing": "runai"}}
_ELASTIC = {"spec.elastic": {"minReplicas": 1, "maxReplicas": 3}}
_EXIT_CODE = {"spec.restartPolicy": "ExitCode"}
_MPI = {"spec.framework": "mpi"}
_ONLY_KUBEFLOW_MPIJOB = "only the kubeflow flavor renders an MPIJob"
_TRIALS = {"spec.framework": "generic", "spec.replicas": DELETE, "spec.trials": {"completions": 2}}
_TOGETHER = refused("its engine starts a job's pods together and restarts them as one: use the job flavor")


def _controller(kind: str, api: str = "kubeflow.org/v1", **fields: Any) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, **fields}


_PT = {**_ROLES, "spec.controller": _controller("PyTorchJob")}
_PT_TORCHRUN = {**_PT, "spec.run": {"exec": ["torchrun", "train.py"]}}
_PT_ELASTIC = {"spec.run": {"exec": ["torchrun", "train.py"]},
               "spec.controller": _controller("PyTorchJob", elasticPolicy={})}
_TF = {"spec.framework": "tensorflow", "spec.replicas": DELETE, "spec.roles": {"chief": {}, "worker": {}},
       "spec.controller": _controller("TFJob")}
_PADDLE = {"spec.framework": "generic", "spec.controller": _controller("PaddleJob")}
_JOBSET = {"spec.controller": _controller("JobSet", "jobset.x-k8s.io/v1alpha2")}
_VOLCANO = {**_ROLES, "spec.controller": _controller("Job", "batch.volcano.sh/v1alpha1", plugins={"env": []})}
_MPI_CONTRACT: dict[str, Any] = {"spec.framework": "mpi",
                                 "spec.controller": _controller("MPIJob", "kubeflow.org/v2beta1")}
_NAMES_ONLY = same("it names hosts, and none of the job's values names one")
_FREE_PORT = same("each replica listens on a free port of this machine")


def _controller_rows() -> list[Row]:
    """`spec.controller`: the job runs under its controller's contract (what a converted foreign file records)."""
    rows = [
        row("spec.controller.apiVersion", _PT, baseline=_ROLES),
        row("spec.controller.kind", _PT, baseline=_ROLES),
        row("spec.controller.name", {**_PADDLE, "spec.controller": _controller("PaddleJob", name="other")},
            baseline=_PADDLE, kubeflow=same("the operator's values derive from the object's name, the job's")),
        row("spec.controller.roles.*", {**_TF, "spec.controller": _controller("TFJob", roles={
            "chief": {"name": "Master"}})}, baseline=_TF),
        row("spec.controller.roles.*.name", {**_TF, "spec.controller": _controller("TFJob", roles={
            "chief": {"name": "Master"}})}, baseline=_TF),
        row("spec.controller.roles.*.port", {**_PT, "spec.controller": _controller("PyTorchJob", roles={
            "master": {"name": "Master", "port": 29999}})}, baseline=_PT, local=_FREE_PORT),
        row("spec.controller.roles.*.jobs", {**_JOBSET, "spec.replicas": 4, "spec.controller": _controller(
            "JobSet", "jobset.x-k8s.io/v1alpha2", roles={"worker": {"name": "worker", "jobs": 2}})},
            baseline={**_JOBSET, "spec.replicas": 4}),
        row("spec.controller.nprocPerNode", {**_PT_TORCHRUN, "spec.controller": _controller(
            "PyTorchJob", nprocPerNode="4")}, baseline=_PT_TORCHRUN),
        row("spec.controller.plugins", {**_VOLCANO, "spec.controller": _controller(
            "Job", "batch.volcano.sh/v1alpha1", plugins={"env": [], "svc": []})}, baseline=_VOLCANO,
            volcano=same("the volcano flavor's job has the env and svc plugins already")),
        row("spec.controller.subdomain", {**_JOBSET, "spec.controller": _controller(
            "JobSet", "jobset.x-k8s.io/v1alpha2", subdomain="net")}, baseline=_JOBSET, local=_NAMES_ONLY,
            kube=_NAMES_ONLY, jobset=ok("the JobSet's own subdomain, kept")),
        row("spec.controller.slotsPerWorker", {**_MPI_CONTRACT, "spec.controller": _controller(
            "MPIJob", "kubeflow.org/v2beta1", slotsPerWorker=4)}, baseline=_MPI_CONTRACT),
        row("spec.controller.mpiImplementation", {**_MPI_CONTRACT, "spec.controller": _controller(
            "MPIJob", "kubeflow.org/v2beta1", mpiImplementation="Intel")}, baseline=_MPI_CONTRACT,
            kubeflow=approx("the MPI Operator gives its launcher that implementation's variables itself; "
                            "kubetrain's launcher runs Open MPI's mpirun")),
    ]
    elastic = {"rdzvBackend": "etcd-v2", "rdzvHost": "rendezvous.example.com", "rdzvPort": 2379, "rdzvId": "one",
               "rdzvConf": [{"key": "timeout", "value": "60"}], "standalone": True, "nProcPerNode": 2,
               "maxRestarts": 4, "minReplicas": 1, "maxReplicas": 3}
    for name, value in elastic.items():
        path = f"spec.controller.elasticPolicy.{name}"
        sample = {**_PT_ELASTIC, "spec.controller": _controller("PyTorchJob", elasticPolicy={name: value})}
        if name == "rdzvConf":
            rows += [row(f"{path}[].key", sample, baseline=_PT_ELASTIC),
                     row(f"{path}[].value", sample, baseline=_PT_ELASTIC)]
        else:
            rows.append(row(path, sample, baseline=_PT_ELASTIC))
    return rows


def _mount(mount: dict[str, Any]) -> dict[str, Any]:
    return {"spec.mounts": [mount]}


_OTHER = {"src": "/mnt/other", "dst": "/other", "server": "nfs2.example.com", "path": "/exports/other",
          "name": "other", "bucket": "other", "repository": "https://example.com/other.git"}


def _mount_rows(kind: str, given: dict[str, Any], optional: Mapping[str, Any], *, local: Cell, kube: Cell,
                **cells: Cell) -> list[Row]:
    """A mount type's row, then one per field: a required field's sample changes its value, an optional
    field's adds it; either is compared with the mount as first given. `cells`: a field's own cell
    (`perm_job=...`: the field perm on the job flavor; `perm=...`: on every flavor)."""

    def cells_of(name: str) -> dict[str, Cell]:
        out = {f: cells.get(f"{name}_{f}", cells.get(name, kube)) for f in KUBERNETES}
        return {"local": cells.get(f"{name}_local", local), **out}

    rows = [Row(f"spec.mounts[type={kind}]", cells_of("mount"), _mount(given))]
    changes = {key: _OTHER[key] if (key, kind) != ("src", "device") else "/dev/null"
               for key in given if key != "type"}
    for key, value in [*changes.items(), *optional.items()]:
        rows.append(Row(f"spec.mounts[type={kind}].{key}", cells_of(key), _mount({**given, key: value}),
                        baseline=_mount(given)))
    return rows


_ONLY_ON_A_CLUSTER = refused("nothing on this machine holds it: mount a folder with its files as type: bind")
_PRIVILEGED = Cell(HONOURED, warns="the pod runs privileged", mentions="PRIVILEGED")
_RELAXES = ok(warns="relaxes a security default")
_RELAXING = {"capabilities", "allowPrivilegeEscalation", "seccompProfileType"}

ROWS: list[Row] = [
    *_section("Metadata", [
        row("apiVersion", {"apiVersion": "kubetrain.dev/v1alpha1"}, local=same("the only value"),
            kube=same("the only value")),
        row("kind", {"kind": "TrainJob"}, local=same("the only value"), kube=same("the only value")),
        row("metadata.name", {"metadata.name": "parity-two"}),
        row("metadata.namePrefix", {"metadata.name": DELETE, "metadata.namePrefix": "trial-"}),
        row("metadata.namespace", {"metadata.namespace": "ml"}, local=ignored(_NO_K8S)),
        row("metadata.labels", {"metadata.labels": {"team": "vision"}}, local=ok(_STORED, unchecked=_STORED)),
        row("metadata.annotations", {"metadata.annotations": {"example.com/ticket": "ML-1"}},
            local=ok(_STORED, unchecked=_STORED)),
    ]),
    *_section("What runs", [
        row("spec.framework", {"spec.framework": "tensorflow"}, when="tensorflow"),
        row("spec.framework", {"spec.framework": "deepspeed"}, when="deepspeed"),
        row("spec.framework", {"spec.framework": "mpi"}, when="mpi"),
        row("spec.framework", {"spec.framework": "jax"}, when="jax"),
        row("spec.framework", {"spec.framework": "generic"}, when="generic",
            kubeflow=refused("the training operator has no kind for generic jobs")),
        row("spec.base", {"spec.base": "base.yaml"}, files={"base.yaml": "spec:\n  env: {FROM_BASE: '1'}\n"}),
        row("spec.run.python", {"spec.run.python": ["other.py"]}),
        row("spec.run.module", {"spec.run": {"module": ["pkg.train", "--steps", "5"]}}),
        row("spec.run.exec", {"spec.run": {"exec": ["./train", "--steps", "5"]}}),
        row("spec.run.customCommand", {"spec.run": {"customCommand": "python train.py && echo done"}}),
        row("spec.run.otherArgs", {"spec.run.otherArgs": ["--log-dir", "/logs"]}),
        row("spec.run.expandEnv", {"spec.run": {"python": ["train.py", "--rank", "$(RANK)"], "expandEnv": True}},
            baseline={"spec.run": {"python": ["train.py", "--rank", "$(RANK)"]}},
            kube=ok("computed by the start-up script, as the kubelet would expand a container's args")),
        row("spec.run.entrypoint", {"spec.run": {"entrypoint": ["--steps", "5"]}},
            local=refused("the image's ENTRYPOINT is in the image, not on this machine: give the command"),
            volcano=refused("RANK differs per replica, and an image run by its ENTRYPOINT runs no start-up script "
                            "to compute it (Volcano's pods carry no index field)")),
        row("spec.image", {"spec.image": "registry.example.com/train:2"}, local=ignored(_NO_CONTAINER)),
        row("spec.imagePullPolicy", {"spec.imagePullPolicy": "Always"}, local=ignored(_NO_CONTAINER)),
        row("spec.workingDir", {"spec.workingDir": "/workspace"},
            local=ok("under the job file's folder; a role's own workingDir is its processes' folder")),
        row("spec.procsPerReplica", {"spec.procsPerReplica": 2}),
        row("spec.procsPerReplica", {"spec.framework": "jax", "spec.procsPerReplica": 2}, when="2, jax",
            baseline={"spec.framework": "jax"}, kube=refused(_ONE_PROGRAM)),
        row("spec.localRank", {"spec.localRank": True}),
        row("spec.env", {"spec.env": [{"name": "A", "value": "1"}]}),
        row("spec.env", {"spec.env": [{"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]},
            when="valueFrom.fieldRef", local=ok("the local replica's name and address")),
        *[row("spec.env", {"spec.env": [{"name": "V", "valueFrom": {ref: source}}]}, when=f"valueFrom.{ref}",
              local=approx("not set locally", mentions="not set locally"))
          for ref, source in (("secretKeyRef", {"name": "db", "key": "pw"}),
                              ("configMapKeyRef", {"name": "c", "key": "k"}),
                              ("resourceFieldRef", {"resource": "limits.cpu"}))],
        row("spec.envFrom", {"spec.envFrom": [{"configMapRef": {"name": "defaults"}}]},
            local=approx("not set locally", mentions="envFrom")),
        row("spec.serviceAccount", {"spec.serviceAccount": "trainer"}, local=ignored(_NO_K8S)),
        row("spec.apiAccess", {"spec.apiAccess": True}, local=ignored("no Kubernetes API locally")),
        row("spec.podTemplate", {"spec.podTemplate": {"metadata": {"labels": {"team": "vision"}},
                                                      "spec": {"imagePullSecrets": [{"name": "registry"}]}}},
            local=ignored("a pod template is for Kubernetes pods: locally only its main container's command, "
                          "args, env and workingDir are used")),
        row("spec.tty", {"spec.tty": True}, local=ignored("output is piped; `kubetrain attach` gives a terminal")),
        row("spec.stdin", {"spec.stdin": True}, local=ignored("stdin is not connected")),
    ]),
    *_section("Roles", [
        row("spec.replicas", {"spec.replicas": 3}),
        row("spec.roles.*", _ROLES),
        row("spec.roles.*", {"spec.framework": "deepspeed", "spec.replicas": DELETE,
                             "spec.roles": {"launcher": {}, "worker": {"replicas": 2}}},
            when="launcher, deepspeed", baseline={"spec.framework": "deepspeed"}, at="spec.roles.launcher",
            kube=refused("the launcher reaches the workers over ssh, which pods do not serve: drop the role")),
        row("spec.roles.*.replicas", {**_ROLES, "spec.roles": {"master": {}, "worker": {"replicas": 3}}},
            baseline=_ROLES),
        row("spec.roles.*.restartPolicy", {**_ROLES, "spec.roles": {"master": {}, "worker": {
            "replicas": 2, "restartPolicy": "OnFailure"}}}, baseline=_ROLES),
    ]),
    *_section("Resources", [
        *[row(f"spec.resources.{name}", {f"spec.resources.{name}": value}, local=ignored(_NO_LIMITS))
          for name, value in (("cpu", 2), ("cpuLimit", 4), ("memory", "8Gi"), ("memoryLimit", "16Gi"))],
        row("spec.resources.gpu", {"spec.resources.gpu": 1},
            local=ok("each replica its own GPUs (CUDA_VISIBLE_DEVICES); refused where there are too few")),
        row("spec.resources.gpuSharing", _HAMI, when="hami", local=_SHARED_GPU),
        row("spec.resources.gpuSharing", _RUNAI, when="runai", local=_SHARED_GPU,
            volcano=refused("Volcano schedules its own pods")),
        row("spec.resources.gpuSharing", {"spec.resources": {"gpu": 0.5, "gpuMemory": "8Gi", "gpuSharing": "aliyun"}},
            when="aliyun", local=_SHARED_GPU, volcano=refused("Volcano schedules its own pods")),
        row("spec.resources.gpuMemory", {"spec.resources": {"gpu": 0.5, "gpuMemory": "8Gi", "gpuSharing": "hami"}},
            baseline=_HAMI, local=ignored("nothing limits GPU memory locally (the share's warning says so)")),
        row("spec.resources.gpuLimit", {"spec.resources": {"gpu": 0.5, "gpuLimit": 1, "gpuSharing": "runai"}},
            baseline=_RUNAI, at="spec.resources.gpuSharing",
            local=ignored("nothing limits GPU use locally (the share's warning says so)"),
            volcano=refused("with gpuSharing runai, which Volcano cannot schedule")),
        row("spec.resources.migProfile", {"spec.resources.migProfile": "1g.5gb"},
            local=approx("a MIG device of the profile where this machine lists one, else a whole GPU")),
        row("spec.resources.extendedResources", {"spec.resources.extendedResources": {"rdma/hca": 1}},
            local=ignored(_NO_LIMITS)),
        row("spec.resources.shm", {"spec.resources.shm": "4Gi"}, local=same("this machine's /dev/shm")),
        row("spec.resources.capabilities",
            {"spec.resources.capabilities": {"node.kubernetes.io/instance-type": "g5.12xlarge"}},
            local=ignored(_NO_SCHEDULER)),
        row("spec.requests", {"spec.requests": {"cpu": "1"}}, local=ignored(_NO_LIMITS)),
        row("spec.limits", {"spec.limits": {"cpu": "2"}}, local=ignored(_NO_LIMITS)),
    ]),
    *_section("Mounts", [
        *_mount_rows("bind", {"type": "bind", "src": "/mnt/data", "dst": "/data"}, {"readonly": True},
                     local=approx("dst is not created: the program sees src at its own path"), kube=ok(),
                     mount=_RELAXES, src=_RELAXES, readonly_local=approx("not enforced locally")),
        *_mount_rows("volume", {"type": "volume", "src": "datasets", "dst": "/data"},
                     {"readonly": True, "subPath": "imagenet"}, local=_ONLY_ON_A_CLUSTER, kube=ok()),
        *_mount_rows("device", {"type": "device", "src": "/dev/fuse"}, {"dst": "/dev/fuse0", "perm": "rw"},
                     local=same("the program opens the device at src"), kube=ok(), mount=_PRIVILEGED,
                     src=_PRIVILEGED, dst_local=approx("not also at dst: the program finds the device at src"),
                     perm=approx("a privileged container may use the device with every permission (rwm)"),
                     perm_local=approx("not enforced: the device file's own permissions apply")),
        *_mount_rows("nfs", {"type": "nfs", "server": "nfs.example.com", "path": "/exports", "dst": "/shared"},
                     {"readonly": True}, kube=ok(),
                     local=refused("unless this machine has mounted the export (then honoured)")),
        *_mount_rows("emptyDir", {"type": "emptyDir", "dst": "/scratch"}, {"medium": "Memory", "sizeLimit": "2Gi"},
                     local=approx("not created: the program makes its own scratch folder"), kube=ok(),
                     medium_local=ignored("the emptyDir is not created locally (warned)"),
                     sizeLimit_local=ignored("the emptyDir is not created locally (warned)")),
        *_mount_rows("configMap", {"type": "configMap", "name": "train-config", "dst": "/etc/train"},
                     {"items": {"a": "b"}, "defaultMode": 0o444}, local=_ONLY_ON_A_CLUSTER, kube=ok()),
        *_mount_rows("secret", {"type": "secret", "name": "keys", "dst": "/etc/keys"},
                     {"items": {"a": "b"}, "defaultMode": 0o400}, local=_ONLY_ON_A_CLUSTER, kube=ok()),
        *_mount_rows("s3", {"type": "s3", "bucket": "datasets", "dst": "/s3"},
                     {"prefix": "imagenet/", "url": "https://s3.example.com", "accessKeySecret": "s3"},
                     local=_ONLY_ON_A_CLUSTER, kube=refused("mount a PVC of your S3 CSI driver as type: volume")),
        *_mount_rows("gitSync", {"type": "gitSync", "repository": "https://example.com/code.git", "dst": "/code"},
                     {"branch": "main", "revision": "v1", "username": "ci", "passwordSecret": "git"},
                     local=_ONLY_ON_A_CLUSTER, kube=ok()),
    ]),
    *_section("Pod and container", [
        row("spec.labels", {"spec.labels": {"workload-class": "training"}}, local=ignored(_NO_K8S)),
        row("spec.annotations", {"spec.annotations": {"example.com/a": "b"}}, local=ignored(_NO_K8S)),
        row("spec.nodeSelector", {"spec.nodeSelector": {"kubernetes.io/arch": "amd64"}},
            local=ignored(_NO_SCHEDULER)),
        row("spec.affinity", {"spec.affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a"]}]}}]}}}, local=ignored(_NO_SCHEDULER)),
        row("spec.tolerations", {"spec.tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]},
            local=ignored(_NO_SCHEDULER)),
        row("spec.ports[].container", {"spec.ports": [{"container": 6006}]},
            local=same("the program listens on this machine")),
        *[row(f"spec.ports[].{key}", {"spec.ports": [{"container": 6006, key: value}]},
              baseline={"spec.ports": [{"container": 6006}]}, local=ignored(_NO_SERVICE))
          for key, value in (("external", 80), ("serviceType", "NodePort"), ("name", "tensorboard"),
                             ("protocol", "UDP"))],
    ]),
    *_section("Security", [
        row("spec.security.runAsUser", {"spec.security.runAsUser": True}, local=same("replicas run as you")),
        *[row(f"spec.security.{name}", {f"spec.security.{name}": value}, local=ignored(_NO_CONTAINER),
              kube=_RELAXES if name in _RELAXING else None)
          for name, value in (("runAsUid", 1000), ("runAsGid", 1000), ("runAsNonRoot", True),
                              ("supplementalGroups", [1000]), ("capabilities", ["IPC_LOCK"]),
                              ("allowPrivilegeEscalation", True), ("seccompProfileType", "Unconfined"),
                              ("readOnlyRootFilesystem", True))],
        row("spec.security.privileged", {"spec.security.privileged": True}, local=ignored(_NO_CONTAINER),
            kube=_PRIVILEGED),
        row("spec.security.seccompLocalhostProfile", {"spec.security": {
            "seccompProfileType": "Localhost", "seccompLocalhostProfile": "profiles/train.json"}},
            baseline={"spec.security": {"seccompProfileType": "Localhost",
                                        "seccompLocalhostProfile": "profiles/other.json"}},
            local=ignored(_NO_CONTAINER)),
        row("spec.security.hostIpc", {"spec.security.hostIpc": True}, local=same("processes share this host's IPC"),
            kube=_RELAXES),
        row("spec.security.hostNetwork", {"spec.security.hostNetwork": True},
            local=same("processes use this host's network"), kube=_RELAXES),
    ]),
    *_section("Scheduling", [
        *[row(f"spec.scheduling.{name}", {f"spec.scheduling.{name}": value}, local=ignored(_NO_SCHEDULER))
          for name, value in (("queue", "team-a"), ("priorityClass", "high"), ("nodePools", ["a100", "v100"]),
                              ("nodeType", "gpu-large"), ("schedulerName", "my-scheduler"))],
        row("spec.scheduling.nodePoolLabel", {"spec.scheduling.nodePools": ["a100"],
                                              "spec.scheduling.nodePoolLabel": "example.com/pool"},
            baseline={"spec.scheduling.nodePools": ["a100"]}, local=ignored(_NO_SCHEDULER)),
        row("spec.scheduling.nodeTypeLabel", {"spec.scheduling.nodeType": "gpu-large",
                                              "spec.scheduling.nodeTypeLabel": "example.com/type"},
            baseline={"spec.scheduling.nodeType": "gpu-large"}, local=ignored(_NO_SCHEDULER)),
        row("spec.scheduling.gang", {"spec.scheduling.gang": True}, when="true",
            local=same("every replica starts at once"), job=refused("Indexed Jobs are not ganged"),
            jobset=refused(_KUEUE), volcano=same("Volcano gangs every job")),
        row("spec.scheduling.gang", {"spec.scheduling.gang": True, "spec.scheduling.queue": "team-a"},
            when="true, with a queue", baseline={"spec.scheduling.queue": "team-a"},
            local=same("every replica starts at once"), job=refused("Indexed Jobs are not ganged"),
            jobset=same("Kueue admits the JobSet whole"), volcano=same("Volcano gangs every job")),
        row("spec.scheduling.gang", {"spec.scheduling.gang": False}, when="false", local=same("no gang"),
            kube=same("no gang"), volcano=ok()),
        row("spec.scheduling.minAvailable", {"spec.scheduling.minAvailable": 1},
            local=same("every replica starts at once"), job=refused("Indexed Jobs are not ganged"),
            jobset=refused("Kueue gangs the whole job")),
        row("spec.scheduling.preemptionLimit", {"spec.scheduling.preemptionLimit": 2},
            local=_NO_PREEMPTION,
            kube=refused("no engine counts preemptions; terminateAfterPreemption fails on the first")),
        row("spec.scheduling.terminateAfterPreemption", {"spec.scheduling.terminateAfterPreemption": True},
            local=_NO_PREEMPTION, kubeflow=refused("the operator restarts preempted pods")),
    ]),
    *_section("ssh between pods", [
        row("spec.sshAuthMountPath", {"spec.sshAuthMountPath": "/home/trainer/.ssh"},
            local=ignored("processes on this machine need no ssh"),
            kube=ok("a key pair of the job's mounted there as id_rsa, id_rsa.pub and authorized_keys"),
            volcano=ok("Volcano's ssh plugin, with that folder")),
        row("spec.mpi.mpiJobVersion", {**_MPI, "spec.mpi": {"mpiJobVersion": "v2beta1"}}, when="v2beta1",
            baseline=_MPI, local=same(_ONLY_KUBEFLOW_MPIJOB), kube=same(_ONLY_KUBEFLOW_MPIJOB),
            kubeflow=ok("the MPI Operator's MPIJob (kubeflow.org/v2beta1)")),
        row("spec.mpi.mpiJobVersion", {**_MPI, "spec.mpi": {"mpiJobVersion": "v1"}}, when="v1", baseline=_MPI,
            local=same(_ONLY_KUBEFLOW_MPIJOB), kube=same(_ONLY_KUBEFLOW_MPIJOB), kubeflow=same("the default")),
    ]),
    *_section("Policies", [
        row("spec.restartPolicy", {"spec.restartPolicy": "Never"}, when="Never", local=same(), kube=same()),
        row("spec.restartPolicy", {"spec.restartPolicy": "OnFailure"}, when="OnFailure"),
        row("spec.restartPolicy", {"spec.restartPolicy": "Always"}, when="Always"),
        row("spec.restartPolicy", _EXIT_CODE, when="ExitCode"),
        row("spec.exitCodes.retryable", {**_EXIT_CODE, "spec.exitCodes.retryable": [75]}, baseline=_EXIT_CODE,
            kubeflow=refused("the operator's ExitCode rule is fixed")),
        row("spec.exitCodes.permanent", {**_EXIT_CODE, "spec.exitCodes.permanent": [137]}, baseline=_EXIT_CODE,
            at="spec.exitCodes", kubeflow=refused("the operator's ExitCode rule is fixed")),
        row("spec.runPolicy.backoffLimit", {"spec.restartPolicy": "OnFailure", "spec.runPolicy.backoffLimit": 2},
            baseline={"spec.restartPolicy": "OnFailure"}),
        row("spec.runPolicy.activeDeadlineSeconds", {"spec.runPolicy.activeDeadlineSeconds": 3600},
            volcano=refused("Volcano has no deadline for a job")),
        row("spec.runPolicy.ttlSecondsAfterFinished", {"spec.runPolicy.ttlSecondsAfterFinished": 600},
            local=ok("a sweep deletes the finished job and its logs once it expires",
                     unchecked="acts after the job ended: tests/local/test_parity.py runs a 1 s TTL")),
        row("spec.runPolicy.cleanPodPolicy", {"spec.runPolicy.cleanPodPolicy": "Running"}, when="Running",
            local=same("replicas still running are stopped when the job ends"),
            kube=same("the controller stops a finished job's running pods"), kubeflow=ok()),
        row("spec.runPolicy.cleanPodPolicy", {"spec.runPolicy.cleanPodPolicy": "All"}, when="All",
            local=ignored("finished replicas' logs are kept"), kube=refused("the controller keeps finished pods"),
            kubeflow=ok()),
        row("spec.runPolicy.cleanPodPolicy", {"spec.runPolicy.cleanPodPolicy": "None"}, when="None",
            local=approx("as Running: replicas still running when the job ends are stopped"),
            kube=refused("the controller stops a finished job's running pods"), kubeflow=ok()),
        row("spec.runPolicy.suspend", {"spec.runPolicy.suspend": True},
            local=ok("recorded Suspended", unchecked="takes effect when the job is created, which a dry run "
                     "does not do (tests/local/test_backend.py)"),
            volcano=refused("a Volcano job cannot be created suspended")),
        row("spec.runMode", {"spec.runMode": "Pause"}, when="Pause",
            volcano=refused("a Volcano job cannot be created suspended")),
        row("spec.runMode", {"spec.runMode": "Debug"}, when="Debug"),
        row("spec.elastic.enabled", {"spec.elastic": {"enabled": False, "minReplicas": 1, "maxReplicas": 3}},
            when="false", baseline=_ELASTIC),
        row("spec.elastic.minReplicas", _ELASTIC),
        row("spec.elastic.maxReplicas", {"spec.elastic": {"minReplicas": 1, "maxReplicas": 4}}, baseline=_ELASTIC),
        row("spec.elastic.expectedReplicas", {"spec.replicas": DELETE, "spec.elastic": {
            "minReplicas": 1, "maxReplicas": 3, "expectedReplicas": 3}}, baseline=_ELASTIC),
        row("spec.elastic.maxRestarts", {"spec.elastic": {"minReplicas": 1, "maxReplicas": 3, "maxRestarts": 7}},
            baseline=_ELASTIC),
        row("spec.trials.completions", {**_TRIALS, "spec.trials": {"completions": 3}}, baseline=_TRIALS,
            at="spec.trials", local=ok("runs started at most parallelism at a time, each retried alone"),
            kube=_TOGETHER, job=ok("the Indexed Job's completions")),
        row("spec.trials.parallelism", {**_TRIALS, "spec.trials": {"completions": 2, "parallelism": 2}},
            baseline=_TRIALS, at="spec.trials", kube=_TOGETHER, job=ok("the Indexed Job's parallelism")),
        row("spec.runPolicy.successRoles", {**_ROLES, "spec.runPolicy.successRoles": ["master"]}, baseline=_ROLES,
            job=same("the first role's Job decides the job's end"),
            kubeflow=same("the operator's job completes when its master does")),
    ]),
    *_section("Controllers", _controller_rows()),
]


# -- the schema's fields ---------------------------------------------------------------------------------------


def schema_fields(schema: Mapping[str, Any], shared: set[str] | None = None) -> list[str]:
    """Every field of a TrainJob JSON Schema, as the table names them: leaves (`spec.image`), list items'
    fields (`spec.ports[].name`), each mount type and its fields (`spec.mounts[type=s3]`, `...bucket`), the
    roles (`spec.roles.*`, `spec.roles.*.replicas`). Client models (`V1Affinity`, `V1EnvVar`) are leaves;
    the settings a role shares with the job (`shared`, default: `ReplicaSettings`' fields) are the job's."""
    if shared is None:
        from ...jobspec import ReplicaSettings

        shared = {f.alias or name for name, f in ReplicaSettings.model_fields.items()}
    defs: Mapping[str, Any] = schema.get("$defs", {})
    out: list[str] = []

    def deref(node: Mapping[str, Any]) -> Mapping[str, Any]:
        while "$ref" in node and not _is_kube(node):
            node = defs[node["$ref"].split("/")[-1]]
        return node

    def members(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        node = deref(node)
        for key in ("anyOf", "oneOf"):
            if key in node:
                return [m for sub in node[key] for m in members(sub)]
        return [] if node.get("type") == "null" else [node]

    def walk(node: Mapping[str, Any], path: str) -> None:
        found = members(node)
        kinds = [m for m in found if _is_kube(m) or m.get("type") in ("object", "array")]
        if any(_is_kube(m) for m in kinds) or not kinds:
            out.append(path)  # a scalar, a client model, or a list/map of them: one field
            return
        objects = [m for m in kinds if m.get("type") == "object" and "properties" in m]
        arrays = [m for m in kinds if m.get("type") == "array"]
        maps = [m for m in kinds if m.get("type") == "object" and isinstance(m.get("additionalProperties"), dict)
                and "properties" not in m]
        if objects:
            typed = len(objects) > 1 and all("const" in o["properties"].get("type", {}) for o in objects)
            for obj in objects:
                base = path
                if typed:
                    base = f"{path[:-2]}[type={obj['properties']['type']['const']}]"
                    out.append(base)
                for name, sub in obj["properties"].items():
                    if typed and name == "type":
                        continue
                    if base == "spec.roles.*" and name in shared:
                        continue
                    child = f"{base}.{name}" if base else name
                    walk(sub, child)
        elif arrays:
            items = [m for a in arrays for m in members(a.get("items", {}))]
            if any(m.get("type") == "object" and "properties" in m for m in items):
                walk({"anyOf": items}, path + "[]")
            else:
                out.append(path)
        elif maps and any(deref(m["additionalProperties"]).get("properties") for m in maps):
            out.append(path + ".*")
            walk(maps[0]["additionalProperties"], path + ".*")
        else:
            out.append(path)

    walk(schema, "")
    return [p for p in dict.fromkeys(out) if p]


def _is_kube(node: Mapping[str, Any]) -> bool:
    return "$ref" in node and node["$ref"].split("/")[-1].startswith("k8s.")


# -- samples ---------------------------------------------------------------------------------------------------


def assign(base: Mapping[str, Any], assignments: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `base` with each dotted path set to its value (`DELETE` removes the key)."""
    out = copy.deepcopy(dict(base))
    for path, value in assignments.items():
        *parents, last = path.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        if value is DELETE:
            node.pop(last, None)
        else:
            node[last] = copy.deepcopy(value)
    return out


def sample_document(row_: Row) -> dict[str, Any]:
    return assign(BASE, row_.sample)


def baseline_document(row_: Row) -> dict[str, Any]:
    return assign(BASE, row_.baseline or {})


# -- what a job sets -------------------------------------------------------------------------------------------


def set_fields(document: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(schema path, path in the document, value) of every field a job document sets, as the table names
    them: `spec.roles.worker.image` is the job's `spec.image` field at the role's path."""

    def walk(node: Any, schema_path: str, path: str) -> Iterator[tuple[str, str, Any]]:
        yield schema_path, path, node
        if isinstance(node, dict) and not _opaque(schema_path):
            for key, value in node.items():
                if schema_path == "spec.roles":
                    yield from walk(value, "spec.roles.*", f"{path}.{key}")
                elif schema_path == "spec.roles.*":
                    name = "spec.roles.*.replicas" if key == "replicas" else f"spec.{key}"
                    yield from walk(value, name, f"{path}.{key}")
                else:
                    yield from walk(value, f"{schema_path}.{key}" if schema_path else key,
                                    f"{path}.{key}" if path else key)
        elif isinstance(node, list) and schema_path.endswith(("mounts", "ports")):
            for i, item in enumerate(node):
                if not isinstance(item, dict):
                    continue
                item_path = f"{schema_path}[type={item.get('type')}]" if schema_path.endswith("mounts") else (
                    f"{schema_path}[]")
                if schema_path.endswith("mounts"):
                    yield item_path, f"{path}[{i}]", item
                for key, value in item.items():
                    if key != "type":
                        yield from walk(value, f"{item_path}.{key}", f"{path}[{i}].{key}")

    yield from walk(dict(document), "", "")


def _opaque(schema_path: str) -> bool:
    return schema_path.split(".")[-1] in _OPAQUE


_OPAQUE = {"labels", "annotations", "nodeSelector", "affinity", "requests", "limits", "extendedResources",
           "capabilities", "items", "env", "envFrom", "tolerations", "run", "podTemplate"}


def rows_for(document: Mapping[str, Any], backend: str, verdicts: tuple[str, ...] = VERDICTS) -> Iterator[
        tuple[Row, str]]:
    """(row, path in the document) of each field the document sets whose cell on `backend` has one of
    `verdicts`: the row of its value, else the field's row without a value. A value that asks for nothing
    (false, empty) sets nothing."""
    by_field: dict[str, list[Row]] = {}
    for r in ROWS:
        by_field.setdefault(r.field, []).append(r)
    for schema_path, path, value in set_fields(document):
        if value is False or value is None or value == {} or value == []:
            continue
        rows = by_field.get(schema_path, [])
        chosen = [r for r in rows if r.when and r.matches(value)] or [r for r in rows if not r.when]
        for r in chosen[:1]:
            if r.cell_at(backend, path).verdict in verdicts:
                yield r, path


def unused_warnings(document: Mapping[str, Any], backend: str) -> list[str]:
    """One warning per reason for the fields `document` sets that `backend` does not use (its `ignored`
    cells), each naming the fields: `not used locally (no scheduler locally: ...): spec.nodeSelector`."""
    dropped: dict[str, list[str]] = {}  # why → the fields, each once (not a mount's fields after the mount)
    for r, where in rows_for(document, backend, (IGNORED,)):
        paths = dropped.setdefault(r.cell_at(backend, where).note, [])
        if not any(where.startswith((p + ".", p + "[")) for p in paths):
            paths.append(where)
    on = "locally" if backend == "local" else f"by the {backend} flavor"
    return [f"not used {on} ({why}): {', '.join(paths)}" for why, paths in dropped.items()]


def row_of(key: str) -> Row:
    for r in ROWS:
        if r.key == key:
            return r
    raise KeyError(key)


# -- holding the table to the code -------------------------------------------------------------------------------


def discrepancies(row_: Row, backend: str, seen: Observation, before: Observation) -> list[str]:
    """How `backend`'s verdict on the row's sample (`seen`, against the baseline `before`) differs from the
    row's cell; empty when they agree. `observe.py` makes the observations."""
    cell = row_.cell(backend)
    if cell.unchecked:
        return []
    path = row_.path
    related = [p for p in seen.problems if related_paths(p.path, path)]
    # A problem the baseline has too is not the field's (trials are generic jobs: kubeflow refuses both).
    out = [f"refused at {p.path}, not {path}: {p.message}" for p in seen.problems
           if p not in related and not (cell.verdict == REFUSED and p in before.problems)]
    warned = [w for w in seen.warnings if w not in before.warnings and mentions(w, path, cell.mentions)]
    if cell.verdict == REFUSED:
        if not related:
            out.append(f"not refused at {path}")
        able = {f for f in KUBERNETES if row_.cell(f).verdict != REFUSED}
        for problem in related:
            named = able_flavors(problem.message)
            if named is not None and not able <= named:
                out.append(f"the refusal names {sorted(named)} as able, the table {sorted(able)}")
        return out
    if related:
        return out + [f"refused: {p}" for p in related]
    if before.problems:
        return out + [f"the baseline is refused: {p}" for p in before.problems]
    changed = seen.output != before.output
    if cell.verdict == APPROXIMATED:
        if not warned:
            out.append(f"no warning names {cell.mentions or path}")
    elif cell.verdict == IGNORED:
        if changed:
            out.append("it takes effect (what would run changes)")
        # The baseline may set the field too (every sample has an image): any warning naming it will do.
        if not any(mentions(w, path, cell.mentions) for w in seen.warnings):
            out.append(f"no warning says {path} is not used")
    elif cell.same and changed:
        out.append("it changes what would run, but the table says that is what happens without it")
    elif not cell.same and not changed:
        out.append("it changes nothing: dropped without a word?")
    elif cell.warns and not warned:
        out.append(f"no warning names {cell.mentions or path}")
    elif not cell.warns and warned:
        out.append(f"a warning names it (approximated?): {warned[0]}")
    return out


def _depth(path: str) -> int:
    return len(re.findall(r"[.\[]", path)) + 1


def related_paths(problem: str, path: str) -> bool:
    """A problem at `problem` is about the field at `path`: the same, or one contains the other (a
    problem at `spec.mounts[0]` is about `spec.mounts[0].bucket`), never the bare `spec`."""
    if _depth(problem) < 2:
        return False
    return problem == path or path.startswith((problem + ".", problem + "[")) or problem.startswith(
        (path + ".", path + "["))


def mentions(text: str, path: str, extra: str = "") -> bool:
    """A warning names the field at `path` (or a field containing it, or `extra`); `spec.` may be left out."""
    if extra:
        return extra in text
    parts = re.split(r"(?=[.\[])", path)
    candidates = ["".join(parts[:n]) for n in range(len(parts), 1, -1)]
    short = [c[len("spec."):] for c in candidates if c.startswith("spec.")]
    return any(c in text for c in candidates + [s for s in short if "." in s or "[" in s])


def able_flavors(message: str) -> set[str] | None:
    """The flavors a refusal names as able (`manifests.errors.flavors_phrase`), or None if it names none."""
    if "no Kubernetes flavor can express it" in message:
        return set()
    only = re.search(r"only the (\S+) flavor can express it", message)
    if only:
        return {only.group(1)}
    listed = re.search(r"flavors that can express it: ([a-z, ]+)", message)
    if listed:
        return {name.strip() for name in listed.group(1).split(",")}
    return None


# -- docs/parity.md -----------------------------------------------------------------------------------------


REGENERATE = "python -m kubetrain.backends.parity --markdown > docs/parity.md"


def markdown() -> str:
    """docs/parity.md: the table, by section."""
    lines = [
        "# Same meaning on every backend",
        "",
        f"<!-- generated from kubetrain/backends/parity/__init__.py: {REGENERATE} -->",
        "",
        "A field kubetrain accepts takes effect, or is refused with its path (naming the backends that can), or",
        "is honoured approximately with a warning that says how. This table is that contract, field by field;",
        "`tests/test_parity.py` holds it to the code (it renders every flavor and dry-runs the local backend for",
        "a sample of each row) and fails on a field of the JSON Schema that has no row. `kubetrain validate FILE",
        "--backend local|kubernetes [--flavor F]` reports, before anything runs, every refusal and warning a job",
        "meets.",
        "",
        "- ✓: honoured; ✓ (the default): what it asks for is what the backend does anyway.",
        "- refused: the backend refuses the job, naming the field's path and the backends that can run it.",
        "- approximated: it runs, with a warning that says how.",
        "- not used: it has no meaning on that backend; the job runs, and a warning names the field and why",
        "  (at run time and in `kubetrain validate`).",
        "",
        "A role's setting (`spec.roles.<role>.image`) means what the job's does, at the role's path.",
        "",
        _counts_table(),
    ]
    section = None
    for r in ROWS:
        if r.section != section:
            section = r.section
            lines += ["", f"## {section}", "", "| field | " + " | ".join(BACKENDS) + " |",
                      "|---|" + "---|" * len(BACKENDS)]
        name = f"`{r.field}`" + (f" = `{r.when}`" if r.when else "")
        cells = [_escape(r.cell(b).text() + (f"; a role's: {r.role[b].text()}" if b in r.role else ""))
                 for b in BACKENDS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    unchecked = [(r, b) for r in ROWS for b in BACKENDS if r.cell(b).unchecked]
    if unchecked:
        lines += ["", "## Cells the tests cannot check", ""]
        lines += [f"- `{r.key}` on {b}: {r.cell(b).unchecked}" for r, b in unchecked]
    return "\n".join(lines) + "\n"


def counts() -> dict[str, dict[str, int]]:
    """backend → verdict → rows."""
    return {b: {v: sum(1 for r in ROWS if r.cell(b).verdict == v) for v in VERDICTS} for b in BACKENDS}


def _counts_table() -> str:
    table = counts()
    lines = ["| rows | " + " | ".join(BACKENDS) + " |", "|---|" + "---|" * len(BACKENDS)]
    for verdict in VERDICTS:
        label = "not used (warned)" if verdict == IGNORED else verdict
        lines.append(f"| {label} | " + " | ".join(str(table[b][verdict]) for b in BACKENDS) + " |")
    return "\n".join(lines)


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


__all__ = [
    "APPROXIMATED",
    "BACKENDS",
    "BASE",
    "DELETE",
    "HONOURED",
    "IGNORED",
    "KUBERNETES",
    "REFUSED",
    "REGENERATE",
    "ROWS",
    "VERDICTS",
    "Cell",
    "Row",
    "able_flavors",
    "assign",
    "baseline_document",
    "counts",
    "discrepancies",
    "markdown",
    "mentions",
    "related_paths",
    "row_of",
    "rows_for",
    "sample_document",
    "schema_fields",
    "set_fields",
    "unused_warnings",
]

