"""Run:ai `TrainingWorkload` (`run.ai/v2alpha1`) → a TrainJob.

Every spec field is wrapped: a scalar as `{value: X}`, a collection as `{items: {KEY: {value: X}}}` (environment,
labels, annotations, pvcs, nfs, s3, gitSync, volumes, ports, tolerations, extendedResources). The converter
unwraps them field by field; an unwrapped scalar is accepted too (what a hand-written file often holds).
`usage: Template` marks a workload meant as the base of others: `baseWorkload` naming one, by its metadata.name
(as Run:ai does) or by its file, beside the workload or in a templates folder, merges it under the workload
(`kubetrain.foreign.loader`); a base that names a TrainJob template becomes `spec.base`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from ..contract.labels import JOB_LABEL
from ..jobspec.model import API_VERSION, KIND
from .conversion import SimpleKind
from .metadata import refuse_status, take_header, take_metadata_as_written
from .walker import ANY_KEY, FieldTree, SourceWalker

API_VERSIONS = ("run.ai/v2alpha1",)

RUNAI_BACKOFF_LIMIT = 6
"""A TrainingWorkload's backoffLimit when it gives none (seed 004: "Defaults to 6")."""

_VALUE: FieldTree = {"value": None}
_ITEMS: FieldTree = {"items": {ANY_KEY: {"value": None}}}

SCALARS = (
    "active", "allowPrivilegeEscalation", "arguments", "autoDeletionTimeAfterCompletionSeconds", "backoffLimit",
    "capabilities", "command", "completions", "cpu", "cpuLimit", "createHomeDir", "gpu", "gpuLimit", "gpuMemory",
    "hostIpc", "hostNetwork", "image", "imagePullPolicy", "ingressUrl", "largeShm", "memory", "memoryLimit",
    "migProfile", "mountPropagation", "mpi", "name", "namePrefix", "nodePool", "nodePools", "nodeType",
    "parallelism", "podAffinity", "podAffinitySchedulingRule", "podAffinityTopology", "preemptionLimit",
    "processes", "runAsGid", "runAsNonRoot", "runAsUid", "runAsUser", "seccompProfileType", "serviceType",
    "slotsPerWorker", "stdin", "supplementalGroups", "terminateAfterPreemption", "tty", "userId", "username",
    "workingDir",
)  # fmt: skip
COLLECTIONS = (
    "annotations", "environment", "exposedUrls", "extendedResources", "gitSync", "labels", "nfs", "ports", "pvcs",
    "s3", "tolerations", "volumes",
)  # fmt: skip
PLAIN = ("baseWorkload", "usage")
"""The two fields that are plain strings, not wrapped."""


def fields() -> FieldTree:
    spec: dict[str, FieldTree] = {name: _VALUE for name in SCALARS}
    spec.update({name: _ITEMS for name in COLLECTIONS})
    spec.update({name: None for name in PLAIN})
    return {"apiVersion": None, "kind": None, "metadata": None, "status": None, "spec": spec}


class _Spec:
    """Reads the wrapped fields of one workload's spec through the walker."""

    def __init__(self, w: SourceWalker) -> None:
        self.w = w

    def path(self, name: str) -> str:
        wrapped = self.w.get(f"spec.{name}")
        return f"spec.{name}.value" if isinstance(wrapped, Mapping) and "value" in wrapped else f"spec.{name}"

    def has(self, name: str) -> bool:
        return self.w.has(self.path(name)) and self.w.get(self.path(name)) is not None

    def get(self, name: str) -> Any:
        return self.w.get(self.path(name))

    def take(self, name: str, target: str | None) -> Any:
        return self.w.take(self.path(name), target)

    def approx(self, name: str, target: str | None, reason: str) -> Any:
        return self.w.approx(self.path(name), target, reason)

    def refuse(self, name: str, reason: str) -> None:
        self.w.refuse(f"spec.{name}", reason)

    def items(self, name: str) -> list[tuple[str, str, Any]]:
        """(key, source path of its value, value) of a collection field, without consuming."""
        items = self.w.get(f"spec.{name}.items")
        if not isinstance(items, Mapping):
            return []
        out = []
        for key, item in items.items():
            at = f'spec.{name}.items."{key}"'
            if isinstance(item, Mapping) and "value" in item:
                out.append((str(key), f"{at}.value", item["value"]))
            else:
                out.append((str(key), at, item))
        return out


def _words(value: Any, sep: str | None = None) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return [part.strip() for part in str(value).split(sep) if part.strip()]


def convert(doc: Mapping[str, Any], w: SourceWalker) -> dict[str, Any]:
    take_header(w)
    refuse_status(w)
    metadata = take_metadata_as_written(w)
    s = _Spec(w)
    spec: dict[str, Any] = {}
    if s.has("name"):
        if "name" in metadata:
            w.refuse("metadata.name", "spec.name names the job (Run:ai's created resource)")
        metadata.pop("namePrefix", None)
        metadata["name"] = s.take("name", "metadata.name")
        s.refuse("namePrefix", "spec.name is given too: Run:ai takes one of them, and so does kubetrain")
    elif s.has("namePrefix"):
        metadata.pop("name", None)
        metadata["namePrefix"] = s.take("namePrefix", "metadata.namePrefix")
    _program(s, spec)
    _resources(s, spec)
    _mounts(s, spec)
    _security(s, spec)
    _placement(s, spec, metadata)
    _policies(s, spec)
    _distribution(s, spec)
    _records(s, spec)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}


def _program(s: _Spec, spec: dict[str, Any]) -> None:
    for name, target in (("image", "image"), ("workingDir", "workingDir")):
        if s.has(name):
            spec[target] = s.take(name, f"spec.{target}")
    if s.has("imagePullPolicy"):
        raw = str(s.get("imagePullPolicy"))
        spec["imagePullPolicy"] = {"always": "Always", "ifnotpresent": "IfNotPresent", "never": "Never"}.get(
            raw.lower(), raw
        )
        s.take("imagePullPolicy", "spec.imagePullPolicy")
    command = s.get("command") if s.has("command") else None
    arguments = s.get("arguments") if s.has("arguments") else None
    if command is not None:
        argv = shlex.split(command) if isinstance(command, str) else _words(command)
        s.take("command", "spec.run.exec")
        if arguments is not None:
            argv += shlex.split(arguments) if isinstance(arguments, str) else _words(arguments)
            s.take("arguments", "spec.run.exec")
        spec["run"] = {"exec": argv}
    elif arguments is not None:
        s.approx(
            "arguments",
            "spec.run.exec",
            "arguments without a command follow the image's entry point; kubetrain runs them as the program itself",
        )
        spec["run"] = {"exec": shlex.split(arguments) if isinstance(arguments, str) else _words(arguments)}
    env = {}
    for key, at, value in s.items("environment"):
        env[key] = "" if value is None else str(value)
        s.w.take(at, "spec.env")
    if env:
        spec["env"] = env
    for flag in ("tty", "stdin"):
        if s.has(flag):
            spec[flag] = s.take(flag, f"spec.{flag}")


def _resources(s: _Spec, spec: dict[str, Any]) -> None:
    res: dict[str, Any] = {}
    for name in ("cpu", "cpuLimit", "memory", "memoryLimit", "gpuLimit", "migProfile", "gpuMemory"):
        if s.has(name):
            res[name] = s.take(name, f"spec.resources.{name}")
    if s.has("gpu"):
        res["gpu"] = float(s.get("gpu")) if not isinstance(s.get("gpu"), int) else s.get("gpu")
        s.take("gpu", "spec.resources.gpu")
    gpu = res.get("gpu")
    if "gpuMemory" in res or (isinstance(gpu, float) and 0 < gpu < 1):
        res["gpuSharing"] = "runai"  # a share of a GPU is Run:ai's own scheduling: said so for kubetrain
    if s.has("largeShm"):
        if s.get("largeShm") is True:
            res["shm"] = True
        s.take("largeShm", "spec.resources.shm")
    extended = {}
    for key, at, value in s.items("extendedResources"):
        if isinstance(value, Mapping):
            extended[str(value.get("resource", key))] = value.get("quantity")
        else:
            extended[key] = value
        s.w.take(at, "spec.resources.extendedResources")
    if extended:
        res["extendedResources"] = extended
    if res:
        spec["resources"] = res


# Run:ai's mount fields besides pvcs (which has rules of its own), in the order the mounts are listed: the
# field, kubetrain's mount type, and which of the field's keys becomes which key of the mount.
_MOUNT_KINDS: tuple[tuple[str, str, Mapping[str, str]], ...] = (
    ("nfs", "nfs", {"server": "server", "path": "path", "mountPath": "dst", "readOnly": "readonly"}),
    (
        "s3",
        "s3",
        {"bucket": "bucket", "path": "dst", "url": "url", "prefix": "prefix", "accessKeySecret": "accessKeySecret"},
    ),
    (
        "gitSync",
        "gitSync",
        {
            "repository": "repository",
            "branch": "branch",
            "revision": "revision",
            "path": "dst",
            "username": "username",
            "passwordSecret": "passwordSecret",
        },
    ),
    (
        "volumes",
        "bind",
        {"source": "src", "hostPath": "src", "target": "dst", "mountPath": "dst", "readOnly": "readonly"},
    ),
)


def _mounts(s: _Spec, spec: dict[str, Any]) -> None:
    mounts: list[dict[str, Any]] = []
    for _key, at, v in s.items("pvcs"):
        if not isinstance(v, Mapping):
            continue
        if v.get("claimInfo") is not None and not v.get("existingPvc"):
            s.w.refuse(at, "creating a claim (claimInfo) is not supported: kubetrain mounts an existing claim")
            continue
        s.w.refuse(f"{at}.claimInfo", "kubetrain mounts the existing claim; it does not create one")
        mounts.append(
            _mount(
                s, at, v, "volume", {"claimName": "src", "path": "dst", "readOnly": "readonly"}, skip=("existingPvc",)
            )
        )
    for field, kind, keys in _MOUNT_KINDS:
        for _key, at, v in s.items(field):
            if isinstance(v, Mapping):
                mounts.append(_mount(s, at, v, kind, keys))
    s.refuse("mountPropagation", "mount propagation between containers and pods is not supported by kubetrain")
    if mounts:
        spec["mounts"] = mounts


def _mount(
    s: _Spec, at: str, value: Mapping[str, Any], kind: str, keys: Mapping[str, str], skip: tuple[str, ...] = ()
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind}
    for src, dst in keys.items():
        if src in value:
            out[dst] = value[src]
            s.w.take(f"{at}.{src}", f"spec.mounts[].{dst}")
    for src in skip:
        s.w.take(f"{at}.{src}", "spec.mounts")
    return out


def _security(s: _Spec, spec: dict[str, Any]) -> None:
    sec: dict[str, Any] = {}
    for name in ("allowPrivilegeEscalation", "runAsNonRoot", "seccompProfileType", "hostIpc", "hostNetwork"):
        if s.has(name):
            sec[name] = s.take(name, f"spec.security.{name}")
    # "runAsUid ... will be used only if runAsUser is set to true" (and runAsGid alike): without runAsUser: true
    # the ids are not used, so they set nothing here either.
    run_as_user = s.has("runAsUser") and s.get("runAsUser") is True
    if run_as_user and s.has("runAsUid"):
        sec["runAsUid"] = s.take("runAsUid", "spec.security.runAsUid")
        s.take("runAsUser", "spec.security.runAsUid")
    elif run_as_user:
        sec["runAsUser"] = s.take("runAsUser", "spec.security.runAsUser")
    elif s.has("runAsUser"):
        s.take("runAsUser", None)  # false: the container runs as its image says
    if run_as_user and s.has("runAsGid"):
        sec["runAsGid"] = s.take("runAsGid", "spec.security.runAsGid")
    if not run_as_user:
        for name in ("runAsUid", "runAsGid"):
            s.refuse(name, "Run:ai uses it only if runAsUser is set to true: not used, as there")
    if s.has("capabilities"):
        sec["capabilities"] = _words(s.get("capabilities"), ",")
        s.take("capabilities", "spec.security.capabilities")
    if s.has("supplementalGroups"):
        raw = s.get("supplementalGroups")
        sec["supplementalGroups"] = [int(g) for g in _words(raw, ";")] if isinstance(raw, str) else raw
        s.take("supplementalGroups", "spec.security.supplementalGroups")
    s.refuse("createHomeDir", "kubetrain does not create a home directory; mount one (spec.mounts) if it is needed")
    if sec:
        spec["security"] = sec


def _placement(s: _Spec, spec: dict[str, Any], metadata: Mapping[str, Any]) -> None:
    sched: dict[str, Any] = {}
    pools: list[str] = []
    if s.has("nodePools"):
        pools += _words(s.get("nodePools"))
        s.take("nodePools", "spec.scheduling.nodePools")
    if s.has("nodePool"):
        pools += [p for p in _words(s.get("nodePool")) if p not in pools]
        s.take("nodePool", "spec.scheduling.nodePools")
    if pools:
        sched["nodePools"] = pools
    for name in ("nodeType", "preemptionLimit", "terminateAfterPreemption"):
        if s.has(name):
            sched[name] = s.take(name, f"spec.scheduling.{name}")
    if sched:
        spec["scheduling"] = sched

    for name in ("labels", "annotations"):
        found = {}
        for key, at, value in s.items(name):
            found[key] = str(value)
            s.w.take(at, f"spec.{name}")
        if found:
            spec[name] = found

    tolerations = []
    for _key, at, value in s.items("tolerations"):
        if not isinstance(value, Mapping):
            continue
        item = {k: value[k] for k in ("key", "operator", "value", "effect") if k in value}
        if "seconds" in value:
            item["tolerationSeconds"] = value["seconds"]
        s.w.take(at, "spec.tolerations")
        tolerations.append(item)
    if tolerations:
        spec["tolerations"] = tolerations

    if s.has("podAffinity"):
        wanted = s.get("podAffinity") is True
        job_name = metadata.get("name")
        if wanted and job_name is None:
            s.refuse("podAffinity", "needs the job's name (metadata.name) to select its pods; a namePrefix has none")
            s.refuse("podAffinitySchedulingRule", "podAffinity was refused")
            s.refuse("podAffinityTopology", "podAffinity was refused")
        elif wanted:
            topology = s.get("podAffinityTopology") if s.has("podAffinityTopology") else "kubernetes.io/hostname"
            rule = str(s.get("podAffinitySchedulingRule") if s.has("podAffinitySchedulingRule") else "preferred")
            term = {"labelSelector": {"matchLabels": {JOB_LABEL: job_name}}, "topologyKey": topology}
            if rule.lower() == "required":
                affinity = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            else:
                affinity = {
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]
                }
            spec["affinity"] = {"podAffinity": affinity}
            reason = f"a pod affinity among the job's pods (label {JOB_LABEL}), {rule}, topology {topology}"
            s.approx("podAffinity", "spec.affinity.podAffinity", reason)
            for name in ("podAffinitySchedulingRule", "podAffinityTopology"):
                if s.has(name):
                    s.take(name, "spec.affinity.podAffinity")
        else:
            s.take("podAffinity", "spec.affinity")
            for name in ("podAffinitySchedulingRule", "podAffinityTopology"):
                s.refuse(name, "applies only with podAffinity: true")

    ports = []
    default_type = s.get("serviceType") if s.has("serviceType") else None
    for _key, at, value in s.items("ports"):
        if not isinstance(value, Mapping):
            continue
        item = {k: value[k] for k in ("container", "external", "name", "protocol") if k in value}
        service = value.get("serviceType", default_type)
        if service is not None:
            item["serviceType"] = service
        s.w.take(at, "spec.ports")
        ports.append(item)
    if default_type is not None:
        s.take("serviceType", "spec.ports[].serviceType")
    if ports:
        spec["ports"] = ports
    s.refuse("exposedUrls", "ingress URLs are not rendered by kubetrain: expose the port (spec.ports) instead")
    s.refuse("ingressUrl", "internal to Run:ai")


def _policies(s: _Spec, spec: dict[str, Any]) -> None:
    # "Specifies the number of retries before marking a workload as failed. Defaults to 6": a workload without
    # it is retried 6 times (kubetrain's restartPolicy is then OnFailure, as a backoffLimit makes it).
    policy: dict[str, Any] = {"backoffLimit": s.take("backoffLimit", "spec.runPolicy.backoffLimit")
                              if s.has("backoffLimit") else RUNAI_BACKOFF_LIMIT}
    if s.has("autoDeletionTimeAfterCompletionSeconds"):
        policy["ttlSecondsAfterFinished"] = s.take(
            "autoDeletionTimeAfterCompletionSeconds", "spec.runPolicy.ttlSecondsAfterFinished"
        )
    if s.has("active"):
        if s.get("active") is False:
            policy["suspend"] = True
        s.take("active", "spec.runPolicy.suspend")
    if policy:
        spec["runPolicy"] = policy


def _distribution(s: _Spec, spec: dict[str, Any]) -> None:
    if s.has("mpi") and s.get("mpi") is True:
        spec["framework"] = "mpi"
        s.take("mpi", "spec.framework")
    elif s.has("mpi"):
        s.take("mpi", "spec.framework")
    if s.has("processes"):
        spec["replicas"] = s.take("processes", "spec.replicas")
    if s.has("slotsPerWorker"):
        spec["procsPerReplica"] = s.take("slotsPerWorker", "spec.procsPerReplica")
    if not (s.has("parallelism") or s.has("completions")):
        return
    if "replicas" in spec or "framework" in spec:  # processes, or mpi: true (the only framework it sets)
        for name in ("parallelism", "completions"):
            s.refuse(name, "processes sets the replicas (an MPI workload's): its pods form one distributed job, "
                     "not independent runs")
        return
    # "Used with Hyperparameter Optimization. Specifies the number of successful pods the job should reach to be
    # completed ... The default value for 'completions' is 1. The 'parallelism' flag should be smaller or equal
    # to 'completions'": independent runs of the program, kubetrain's trials.
    completions = int(s.take("completions", "spec.trials.completions")) if s.has("completions") else 1
    trials: dict[str, Any] = {"completions": completions}
    if s.has("parallelism"):
        parallelism = int(s.get("parallelism"))
        if parallelism > completions:
            s.approx("parallelism", "spec.trials.parallelism", f"{parallelism} as {completions}: no more pods run at "
                     f"once than there are completions to reach ({completions}; Run:ai's default completions is 1)")
            parallelism = completions
        else:
            s.take("parallelism", "spec.trials.parallelism")
        if parallelism != 1:
            trials["parallelism"] = parallelism
    spec["trials"] = trials


def _records(s: _Spec, spec: dict[str, Any]) -> None:
    base = s.w.get("spec.baseWorkload")
    if isinstance(base, str) and base:
        spec["base"] = s.w.take("spec.baseWorkload", "spec.base")
    usage = s.w.get("spec.usage")
    if usage == "Template":
        s.w.approx("spec.usage", "spec", "a template (the base of other workloads) run here as a job of its own")
    elif usage is not None:
        s.w.take("spec.usage", None)
    for name in ("userId", "username"):
        s.refuse(name, "Run:ai's record of who owns the workload; a kubetrain job belongs to who runs it")


KINDS = (SimpleKind("TrainingWorkload", API_VERSIONS, fields, convert),)

__all__ = ["API_VERSIONS", "KINDS", "convert", "fields"]
