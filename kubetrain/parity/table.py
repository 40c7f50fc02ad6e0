"""The parity table: for every field of the TrainJob JSON Schema (and each value that changes the verdict), its
`Cell` on every backend and the sample job that shows it (`ROWS`, by section, in docs/parity.md's order).

Data and pure functions over the contract: the local backend reads it (`lookup.unused_warnings`), and it imports
no backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..contract.features import FEATURES
from . import derived
from .cells import DELETE, HONOURED, KUBERNETES, Cell, Row, approx, ignored, ok, refused, same
from .derived import Records

_NO_CONTAINER = "no container locally: the program runs on this machine, as you"
_NO_SCHEDULER = "no scheduler locally: every replica runs on this machine"
_NO_K8S = "no Kubernetes objects locally"
_NO_LIMITS = "no resource requests or limits locally: replicas share this machine"
_NO_SERVICE = "no Service locally: replicas listen on this machine's ports"
_STORED = "kept with the job, in the job store"
_SHARED_GPU = approx("replicas share whole GPUs; nothing limits their memory or compute")
_NO_PREEMPTION = approx("no effect: nothing preempts a local job")
_ONE_PROGRAM = "a pod runs one program: scale replicas instead"


def _cells(local: Cell, kube: Cell, flavors: Mapping[str, Cell]) -> dict[str, Cell]:
    out = {"local": local, **{f: kube for f in KUBERNETES}}
    out.update(flavors)
    return out


def row(field_: str, sample: Mapping[str, Any], *, when: str = "", baseline: Mapping[str, Any] | None = None,
        at: str = "", files: Mapping[str, str] | None = None, role: Mapping[str, Cell] | None = None,
        local: Cell | None = None, kube: Cell | None = None, from_records: Mapping[str, Cell] | None = None,
        **flavors: Cell) -> Row:
    """A row: `kube` for every flavor unless one is named or `from_records` (each flavor's cell worked out from
    its `Features` record, `derived`) gives it; both default to honoured."""
    unknown = set(flavors) - set(KUBERNETES)
    if unknown:
        raise ValueError(f"{field_}: unknown backends {sorted(unknown)}")
    cells = _cells(local or ok(), kube or ok(), {**(from_records or {}), **flavors})
    return Row(field_, cells, dict(sample), when, baseline, at, dict(files or {}), dict(role or {}))


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

_VOLCANO_GANGS = same("Volcano gangs every job")
"""Not a `Features` fact but the volcano flavor's own render: a Volcano Job always has a gang (minAvailable), the
whole job unless the spec says gang: false, so gang: true asks for what it does anyway."""


def build_rows(records: Records) -> list[Row]:
    """The table, its cells for what a flavor can express worked out from each flavor's record (`derived`)."""
    if tuple(records) != KUBERNETES:
        raise ValueError(f"a record per flavor, in order: {', '.join(KUBERNETES)}; got {', '.join(records)}")
    return [
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
                from_records=derived.framework_generic(records)),
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
                from_records=derived.gpu_sharing_scheduler(records)),
            row("spec.resources.gpuSharing",
                {"spec.resources": {"gpu": 0.5, "gpuMemory": "8Gi", "gpuSharing": "aliyun"}},
                when="aliyun", local=_SHARED_GPU, from_records=derived.gpu_sharing_scheduler(records)),
            row("spec.resources.gpuMemory", {"spec.resources": {"gpu": 0.5, "gpuMemory": "8Gi", "gpuSharing": "hami"}},
                baseline=_HAMI, local=ignored("nothing limits GPU memory locally (the share's warning says so)")),
            row("spec.resources.gpuLimit", {"spec.resources": {"gpu": 0.5, "gpuLimit": 1, "gpuSharing": "runai"}},
                baseline=_RUNAI, at="spec.resources.gpuSharing",
                local=ignored("nothing limits GPU use locally (the share's warning says so)"),
                from_records=derived.gpu_sharing_scheduler(
                    records, "gpuSharing runai needs the Run:ai scheduler, and its engine schedules its own pods")),
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
            row("spec.affinity", {"spec.affinity": {"nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "preference": {"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a"]}]}}]}}}, local=ignored(_NO_SCHEDULER)),
            row("spec.tolerations",
                {"spec.tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]},
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
                local=same("every replica starts at once"),
                from_records=derived.gang(records, queue=False), volcano=_VOLCANO_GANGS),
            row("spec.scheduling.gang", {"spec.scheduling.gang": True, "spec.scheduling.queue": "team-a"},
                when="true, with a queue", baseline={"spec.scheduling.queue": "team-a"},
                local=same("every replica starts at once"),
                from_records=derived.gang(records, queue=True), volcano=_VOLCANO_GANGS),
            row("spec.scheduling.gang", {"spec.scheduling.gang": False}, when="false", local=same("no gang"),
                kube=same("no gang"), volcano=ok()),
            row("spec.scheduling.minAvailable", {"spec.scheduling.minAvailable": 1},
                local=same("every replica starts at once"), from_records=derived.min_available(records)),
            row("spec.scheduling.preemptionLimit", {"spec.scheduling.preemptionLimit": 2},
                local=_NO_PREEMPTION,
                kube=refused("no engine counts preemptions; terminateAfterPreemption fails on the first")),
            row("spec.scheduling.terminateAfterPreemption", {"spec.scheduling.terminateAfterPreemption": True},
                local=_NO_PREEMPTION, from_records=derived.terminate_after_preemption(records)),
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
                from_records=derived.exit_code_overrides(records)),
            row("spec.exitCodes.permanent", {**_EXIT_CODE, "spec.exitCodes.permanent": [137]}, baseline=_EXIT_CODE,
                at="spec.exitCodes", from_records=derived.exit_code_overrides(records)),
            row("spec.runPolicy.backoffLimit", {"spec.restartPolicy": "OnFailure", "spec.runPolicy.backoffLimit": 2},
                baseline={"spec.restartPolicy": "OnFailure"}),
            row("spec.runPolicy.activeDeadlineSeconds", {"spec.runPolicy.activeDeadlineSeconds": 3600},
                from_records=derived.deadline(records)),
            row("spec.runPolicy.ttlSecondsAfterFinished", {"spec.runPolicy.ttlSecondsAfterFinished": 600},
                local=ok("a sweep deletes the finished job and its logs once it expires",
                         unchecked="acts after the job ended: tests/local/test_parity.py runs a 1 s TTL")),
            row("spec.runPolicy.cleanPodPolicy", {"spec.runPolicy.cleanPodPolicy": "Running"}, when="Running",
                local=same("replicas still running are stopped when the job ends"),
                from_records=derived.clean_pod_policy(records, "Running")),
            row("spec.runPolicy.cleanPodPolicy", {"spec.runPolicy.cleanPodPolicy": "All"}, when="All",
                local=ignored("finished replicas' logs are kept"),
                from_records=derived.clean_pod_policy(records, "All")),
            row("spec.runPolicy.cleanPodPolicy", {"spec.runPolicy.cleanPodPolicy": "None"}, when="None",
                local=approx("as Running: replicas still running when the job ends are stopped"),
                from_records=derived.clean_pod_policy(records, "None")),
            row("spec.runPolicy.suspend", {"spec.runPolicy.suspend": True},
                local=ok("recorded Suspended", unchecked="takes effect when the job is created, which a dry run "
                         "does not do (tests/local/test_backend.py)"),
                from_records=derived.suspend(records)),
            row("spec.runMode", {"spec.runMode": "Pause"}, when="Pause",
                from_records=derived.suspend(records)),
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
                from_records=derived.trials(records, "each run retried alone")),
            row("spec.trials.parallelism", {**_TRIALS, "spec.trials": {"completions": 2, "parallelism": 2}},
                baseline=_TRIALS, at="spec.trials",
                from_records=derived.trials(records, "at most parallelism runs at a time")),
            row("spec.runPolicy.successRoles", {**_ROLES, "spec.runPolicy.successRoles": ["master"]}, baseline=_ROLES,
                from_records=derived.success_roles(records)),
        ]),
        *_section("Controllers", _controller_rows()),
    ]


ROWS: list[Row] = build_rows(FEATURES)
"""The table, from the flavors' records (`contract.features.FEATURES`)."""


def row_of(key: str) -> Row:
    for r in ROWS:
        if r.key == key:
            return r
    raise KeyError(key)


__all__ = ["ROWS", "build_rows", "row", "row_of"]
