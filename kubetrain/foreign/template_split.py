"""A Kubernetes PodTemplateSpec in a foreign job → the typed settings kubetrain models, plus the remainder.

Foreign kinds (DeepSpeedJob's `worker.template`, Kubeflow's `replicaSpecs.*.template`, JobSet's and Volcano's
templates) carry full PodTemplateSpecs. What kubetrain models (image, command/args, env, resources, the volume
types it knows, placement, the security context fields it has) becomes typed TrainJob settings, so the job runs
locally and renders for every flavor; everything else (imagePullSecrets, sidecars, init containers, probes,
volume types kubetrain does not model) stays a PodTemplateSpec for the TrainJob's `podTemplate` field, which
kubetrain's render goes on top of: carried, not dropped.

The main container is the one named `main_container` when given and present, else `containers[0]`; in the
remainder it comes first and keeps its name, so a merge can find it.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping
from typing import Any

from ..jobspec.errors import Path, format_path
from ..jobspec.pod_template import MAIN_CONTAINER_NAMES
from .walker import ANY_KEY, FieldTree, SourceWalker, parse_path

JOB_LEVEL_KEYS = ("scheduling", "serviceAccount", "tty", "stdin")
"""Keys `split_pod_template` may return that belong on the job (`spec`), not on a role: lift them with
`lift_job_level`."""

_MOUNT_KEYS = {"name", "mountPath", "readOnly", "subPath"}
_VOLUME_SOURCES: dict[str, set[str]] = {
    "hostPath": {"path"},
    "persistentVolumeClaim": {"claimName", "readOnly"},
    "nfs": {"server", "path", "readOnly"},
    "emptyDir": {"medium", "sizeLimit"},
    "configMap": {"name", "items", "defaultMode"},
    "secret": {"secretName", "items", "defaultMode"},
}
_SECURITY_FIELDS = {  # container securityContext → kubetrain security
    "runAsUser": "runAsUid",
    "runAsGroup": "runAsGid",
    "runAsNonRoot": "runAsNonRoot",
    "allowPrivilegeEscalation": "allowPrivilegeEscalation",
    "privileged": "privileged",
    "readOnlyRootFilesystem": "readOnlyRootFilesystem",
}
_POD_SECURITY_FIELDS = {
    "runAsUser": "runAsUid",
    "runAsGroup": "runAsGid",
    "runAsNonRoot": "runAsNonRoot",
    "supplementalGroups": "supplementalGroups",
}


def split_pod_template(
    walker: SourceWalker,
    path: str | Path,
    *,
    role_target: str,
    main_container: str | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """PodTemplateSpec at `path` → (ReplicaSettings data kubetrain models, the remainder as a PodTemplateSpec for
    `podTemplate`, or None). `role_target` is where the settings go (`spec` or `spec.roles.worker`); notes name
    it. Fields the caller already consumed (say, the command of a kind that has its own `run`) are left alone.
    The settings may hold job-level keys (`JOB_LEVEL_KEYS`): lift them with `lift_job_level`."""
    base = parse_path(path)
    if not isinstance(walker.get(base), Mapping):
        return {}, None
    out: dict[str, Any] = {}
    meta, spec = (*base, "metadata"), (*base, "spec")

    def take(rel: Path, target: str, key: str | None = None, holder: dict[str, Any] | None = None) -> None:
        if walker.consumed(rel) or not walker.has(rel):
            return
        value = walker.take(rel, f"{role_target}.{target}")
        (holder if holder is not None else out)[key or target.split(".")[-1]] = copy.deepcopy(value)

    take((*meta, "labels"), "labels")
    take((*meta, "annotations"), "annotations")
    for key in walker.keys(meta):
        walker.refuse(
            (*meta, key),
            "kubetrain names and owns its pods: of a pod template's metadata it takes labels and annotations",
        )
    for name in ("nodeSelector", "affinity", "tolerations"):
        take((*spec, name), name)

    scheduling: dict[str, Any] = {}
    if walker.has((*spec, "schedulerName")) and not walker.consumed((*spec, "schedulerName")):
        scheduling["schedulerName"] = walker.take((*spec, "schedulerName"), "spec.scheduling.schedulerName")
    if walker.has((*spec, "priorityClassName")) and not walker.consumed((*spec, "priorityClassName")):
        scheduling["priorityClass"] = walker.take((*spec, "priorityClassName"), "spec.scheduling.priorityClass")
    if scheduling:
        out["scheduling"] = scheduling
    if walker.has((*spec, "serviceAccountName")) and not walker.consumed((*spec, "serviceAccountName")):
        out["serviceAccount"] = walker.take((*spec, "serviceAccountName"), "spec.serviceAccount")

    security: dict[str, Any] = {}
    pod_sec = (*spec, "securityContext")
    for src, dst in _POD_SECURITY_FIELDS.items():
        if walker.has((*pod_sec, src)) and not walker.consumed((*pod_sec, src)):
            security[dst] = walker.take((*pod_sec, src), f"{role_target}.security.{dst}")
    for src, dst in (("hostIPC", "hostIpc"), ("hostNetwork", "hostNetwork")):
        if walker.has((*spec, src)) and not walker.consumed((*spec, src)):
            security[dst] = walker.take((*spec, src), f"{role_target}.security.{dst}")
    _seccomp(walker, (*pod_sec, "seccompProfile"), role_target, security)

    index = _main_index(walker, (*spec, "containers"), main_container)
    if index is not None:
        _container(walker, (*spec, "containers", index), role_target, out, security)
        _volumes(walker, spec, index, role_target, out)
    if security:
        out["security"] = security

    remainder = _remainder(walker, base, (*spec, "containers"), index, role_target)
    return out, remainder


def lift_job_level(spec: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """Move the job-level keys of `settings` (from `split_pod_template`) into `spec` (the TrainJob spec data);
    the first role's value wins (kubetrain has one scheduler, priority class and service account per job).
    Returns the role settings without them."""
    rest = dict(settings)
    for key in JOB_LEVEL_KEYS:
        if key not in rest:
            continue
        value = rest.pop(key)
        if isinstance(value, dict):
            spec.setdefault(key, {})
            for name, item in value.items():
                spec[key].setdefault(name, item)
        else:
            spec.setdefault(key, value)
    return rest


def _main_index(walker: SourceWalker, containers: Path, name: str | None) -> int | None:
    items = walker.get(containers)
    if not isinstance(items, list) or not items:
        return None
    if name is not None:
        for i, item in enumerate(items):
            if isinstance(item, Mapping) and item.get("name") == name:
                return i
    return 0 if isinstance(items[0], Mapping) else None


def _container(walker: SourceWalker, c: Path, role_target: str, out: dict[str, Any], security: dict[str, Any]) -> None:
    def take(name: str, target: str | None = None) -> None:
        rel = (*c, name)
        if walker.has(rel) and not walker.consumed(rel):
            key = target or name
            out[key] = copy.deepcopy(walker.take(rel, f"{role_target}.{key}"))

    for name in ("image", "imagePullPolicy", "env", "envFrom", "workingDir"):
        take(name)

    command_path, args_path = (*c, "command"), (*c, "args")
    command = None if walker.consumed(command_path) else walker.get(command_path)
    args = None if walker.consumed(args_path) else walker.get(args_path)
    if command is not None:
        walker.take(command_path, f"{role_target}.run.exec")
        if args is not None:
            walker.take(args_path, f"{role_target}.run.exec")
        out["run"] = {"exec": [*command, *(args or [])]}
    elif args is not None:
        # Args alone go to the image's entrypoint, which is in the image, not the file: kubetrain cannot run
        # them locally nor render them faithfully behind its start-up script, so it asks for the command.
        walker.invalid(
            args_path,
            "args without a command go to the image's entrypoint, which kubetrain cannot know",
            hint="add the container's command: the image's entrypoint, e.g. command: [python, /app/train.py]",
        )

    res = (*c, "resources")
    for kind in ("requests", "limits"):
        if walker.has((*res, kind)) and not walker.consumed((*res, kind)):
            out[kind] = copy.deepcopy(walker.take((*res, kind), f"{role_target}.{kind}"))

    ports = walker.get((*c, "ports"))
    if isinstance(ports, list) and not walker.consumed((*c, "ports")):
        mapped = []
        for i, port in enumerate(ports):
            p = (*c, "ports", i)
            if not isinstance(port, Mapping) or set(port) - {"containerPort", "name", "protocol"}:
                continue  # hostPort, hostIP: the remainder carries it
            item: dict[str, Any] = {"container": walker.take((*p, "containerPort"), f"{role_target}.ports")}
            for src, dst in (("name", "name"), ("protocol", "protocol")):
                if walker.has((*p, src)):
                    item[dst] = walker.take((*p, src), f"{role_target}.ports")
            mapped.append(item)
        if mapped:
            out["ports"] = mapped

    sec = (*c, "securityContext")
    for src, dst in _SECURITY_FIELDS.items():
        # A field the pod's securityContext gave too stays in the container's (the remainder carries it, and
        # Kubernetes lets the container's win): typed, it would replace the pod's, and one of them, each a
        # setting of the file with its own line, would be lost.
        if walker.has((*sec, src)) and not walker.consumed((*sec, src)) and dst not in security:
            security[dst] = walker.take((*sec, src), f"{role_target}.security.{dst}")
    add = (*sec, "capabilities", "add")
    if walker.has(add) and not walker.consumed(add):
        security["capabilities"] = list(walker.take(add, f"{role_target}.security.capabilities"))
    drop = (*sec, "capabilities", "drop")
    if walker.has(drop) and not walker.consumed(drop):
        if walker.get(drop) == ["ALL"]:
            walker.take(drop, f"{role_target}.security")
        else:
            walker.approx(
                drop,
                f"{role_target}.security.capabilities",
                "kubetrain drops ALL capabilities and adds back only those listed in capabilities.add",
            )
    _seccomp(walker, (*sec, "seccompProfile"), role_target, security)
    for flag in ("tty", "stdin"):
        if walker.get((*c, flag)) is True and not walker.consumed((*c, flag)):
            out[flag] = walker.take((*c, flag), f"spec.{flag}")


def _seccomp(walker: SourceWalker, at: Path, role_target: str, security: dict[str, Any]) -> None:
    profile = walker.get(at)
    if walker.consumed(at) or not isinstance(profile, Mapping) or set(profile) - {"type", "localhostProfile"}:
        return
    if "seccompProfileType" in security:
        return  # the pod's is typed; the container's stays in the remainder, as a runAsUser given twice does
    if "type" in profile:
        security["seccompProfileType"] = walker.take((*at, "type"), f"{role_target}.security.seccompProfileType")
    if "localhostProfile" in profile:
        security["seccompLocalhostProfile"] = walker.take(
            (*at, "localhostProfile"), f"{role_target}.security.seccompLocalhostProfile"
        )


def _volumes(walker: SourceWalker, spec: Path, index: int, role_target: str, out: dict[str, Any]) -> None:
    """Each (volumeMount, volume) pair of the main container that kubetrain models → a mount; the rest stays in
    the remainder, both halves together."""
    mounts_path = (*spec, "containers", index, "volumeMounts")
    mounts = walker.get(mounts_path)
    volumes = walker.get((*spec, "volumes"))
    if not isinstance(mounts, list) or not isinstance(volumes, list):
        return
    by_name = {v.get("name"): i for i, v in enumerate(volumes) if isinstance(v, Mapping)}
    used_elsewhere = _mounted_by_others(walker.get(spec), index)
    plan: dict[int, list[int]] = {}  # volume index → the main container's mounts of it
    for j, mount in enumerate(mounts):
        if not isinstance(mount, Mapping) or set(mount) - _MOUNT_KEYS or walker.consumed((*mounts_path, j)):
            continue
        vi = by_name.get(mount.get("name"))
        if vi is None or mount.get("name") in used_elsewhere:
            continue
        plan.setdefault(vi, []).append(j)
    results: list[dict[str, Any]] = []
    shm: Any = None
    for vi, js in plan.items():
        volume = volumes[vi]
        converted = [_mount_of(volume, mounts[j]) for j in js]
        if any(c is None for c in converted) or walker.consumed((*spec, "volumes", vi)):
            continue
        first: int | None = None  # the first mount of this volume: the volume's own target
        for j, item in zip(js, converted, strict=True):
            assert item is not None
            if item.get("type") == "emptyDir" and item["dst"] == "/dev/shm" and item.get("medium") == "Memory":
                shm = item.get("sizeLimit", True)
                walker.take((*mounts_path, j), f"{role_target}.resources.shm")
            else:
                # Each mount at its own index, the volume at its first: what is said of `mounts[1].src` (a host
                # folder) is said of the volume that names it, at its line.
                first = len(results) if first is None else first
                walker.take((*mounts_path, j), f"{role_target}.mounts[{len(results)}].dst")
                results.append(item)
        target = f"{role_target}.resources.shm" if first is None else f"{role_target}.mounts[{first}]"
        walker.take((*spec, "volumes", vi), target)
    if results:
        out["mounts"] = results
    if shm is not None:
        out.setdefault("resources", {})["shm"] = shm


def _mounted_by_others(pod_spec: Any, main: int) -> set[str]:
    names: set[str] = set()
    if not isinstance(pod_spec, Mapping):
        return names
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for i, container in enumerate(pod_spec.get(key) or []):
            if (key == "containers" and i == main) or not isinstance(container, Mapping):
                continue
            for mount in container.get("volumeMounts") or []:
                if isinstance(mount, Mapping):
                    names.add(str(mount.get("name")))
    return names


def _mount_of(volume: Mapping[str, Any], mount: Mapping[str, Any]) -> dict[str, Any] | None:
    """A kubetrain mount for one volumeMount of one volume, or None when kubetrain does not model the pair."""
    kinds = [k for k in volume if k != "name"]
    if len(kinds) != 1 or kinds[0] not in _VOLUME_SOURCES:
        return None
    kind = kinds[0]
    source = volume[kind] or {}
    if not isinstance(source, Mapping) or set(source) - _VOLUME_SOURCES[kind]:
        return None
    if "subPath" in mount and kind != "persistentVolumeClaim":
        return None
    dst = mount.get("mountPath")
    readonly = bool(mount.get("readOnly") or source.get("readOnly"))
    if kind == "hostPath":
        return {"type": "bind", "src": source.get("path"), "dst": dst, "readonly": readonly}
    if kind == "persistentVolumeClaim":
        item = {"type": "volume", "src": source.get("claimName"), "dst": dst, "readonly": readonly}
        if "subPath" in mount:
            item["subPath"] = mount["subPath"]
        return item
    if kind == "nfs":
        return {
            "type": "nfs",
            "server": source.get("server"),
            "path": source.get("path"),
            "dst": dst,
            "readonly": readonly,
        }
    if kind == "emptyDir":
        if readonly:
            return None
        item = {"type": "emptyDir", "dst": dst}
        for key in ("medium", "sizeLimit"):
            if key in source:
                item[key] = source[key]
        return item
    if readonly is False and mount.get("readOnly") is False:
        return None  # a writable ConfigMap/Secret mount: kubetrain mounts them read-only
    name_key = "name" if kind == "configMap" else "secretName"
    items = source.get("items") or []
    if not all(isinstance(i, Mapping) and set(i) == {"key", "path"} for i in items):
        return None
    item = {"type": kind, "name": source.get(name_key), "dst": dst, "items": {i["key"]: i["path"] for i in items}}
    if "defaultMode" in source:
        item["defaultMode"] = source["defaultMode"]
    return item


_GONE = object()


def _remainder(
    walker: SourceWalker, base: Path, containers: Path, main: int | None, role_target: str
) -> dict[str, Any] | None:
    """What nothing took, as a PodTemplateSpec (the main container first, keeping its name); each part is noted
    "mapped" to its own path in `<role_target>.podTemplate` (`...podTemplate.spec.hostPID`), so that what is said
    of the converted job's template (a security relaxation, an error) is said of the source field and its line,
    even where the remainder's lists are shorter than the source's (items taken out, the main container first)."""
    name_path = (*containers, main, "name") if main is not None else None
    placed: dict[Path, Path] = {}  # source path → its path in the remainder
    rest = _rest(walker, walker.get(base), base, skip=name_path, at=(), placed=placed)
    target = f"{role_target}.podTemplate"
    if rest is _GONE:
        _note_main_name(walker, name_path, None)
        return None
    assert isinstance(rest, dict)
    spec = rest.get("spec")
    items = walker.get(containers)
    if main is not None and isinstance(items, list):
        # The containers again, at their places in the remainder: the main one first, then the others carried.
        out_at: Path = (*containers[len(base) :], 0)
        main_rest = _rest(walker, items[main], (*containers, main), skip=name_path, at=out_at, placed=placed)
        others: list[Any] = []
        for i, item in enumerate(items):
            if i == main:
                continue
            at = (*containers[len(base) :], len(others) + 1)
            part = _rest(walker, item, (*containers, i), skip=None, at=at, placed=placed)
            if part is not _GONE:
                others.append(part)
        # The main container stays first whenever anything of the template's containers is carried, even when
        # nothing of its own is left: the first container of a podTemplate is the one kubetrain's container is
        # merged into, so leaving it out would merge kubetrain's container into a sidecar and lose the sidecar.
        keep_main = main_rest is not _GONE or bool(others)
        main_part = {"name": items[main].get("name"), **(main_rest if main_rest is not _GONE else {})}
        out_containers = [main_part, *others] if keep_main else []
        if isinstance(spec, dict):
            if out_containers:
                spec["containers"] = out_containers
            else:
                spec.pop("containers", None)
        _note_main_name(walker, name_path, f"{target}.{format_path((*out_at, 'name'))}" if keep_main else None)
    for leftover in walker.leftovers(base):
        kept_at = placed.get(leftover)
        walker.take(leftover, f"{target}.{format_path(kept_at)}" if kept_at else target)
    return rest


def _note_main_name(walker: SourceWalker, name_path: Path | None, target: str | None) -> None:
    """The main container's name: kubetrain names the container it renders itself (`main`, or the training
    operator's name with the kubeflow flavor), so a name that is not one of those is approximated, said so."""
    if name_path is None or not walker.has(name_path) or walker.consumed(name_path):
        return
    if walker.get(name_path) in MAIN_CONTAINER_NAMES:
        walker.take(name_path, target)
    else:
        walker.approx(
            name_path,
            target,
            "kubetrain names the container it renders itself: `main`, or the training operator's name "
            f"({', '.join(n for n in MAIN_CONTAINER_NAMES if n != 'main')}) with the kubeflow flavor",
        )


def _rest(walker: SourceWalker, node: Any, path: Path, *, skip: Path | None, at: Path, placed: dict[Path, Path]) -> Any:
    """What nothing consumed of `node` (at `path` in the source, at `at` in the remainder), noting in `placed`
    where each source path kept lands."""
    if walker.consumed(path) or path == skip:
        return _GONE
    placed[path] = at
    if isinstance(node, Mapping):
        out = {}
        for key, value in node.items():
            part = _rest(walker, value, (*path, str(key)), skip=skip, at=(*at, str(key)), placed=placed)
            if part is not _GONE:
                out[key] = part
        return out if out or not node else _GONE
    if isinstance(node, list):
        items: list[Any] = []
        for i, value in enumerate(node):
            part = _rest(walker, value, (*path, i), skip=skip, at=(*at, len(items)), placed=placed)
            if part is not _GONE:
                items.append(part)
        return items if items or not node else _GONE
    return copy.deepcopy(node)


# -- the field tree of a PodTemplateSpec (for did-you-mean on typos inside templates) ---------------------

_LIST = re.compile(r"[lL]ist\[(.+)\]")
_DICT = re.compile(r"[dD]ict[\(\[]str, (.+)[\)\]]")


@functools.cache
def pod_template_fields() -> FieldTree:
    """Every field of a PodTemplateSpec, from the official client's models (the API's own names), so a typo in
    a template (`imagePullSecret`) gets a did-you-mean like any other field of the kind."""
    return _tree("V1PodTemplateSpec", frozenset())


def _tree(type_name: str, open_types: frozenset[str]) -> FieldTree:
    if m := _LIST.fullmatch(type_name):
        return _tree(m.group(1), open_types)
    if m := _DICT.fullmatch(type_name):
        inner = _tree(m.group(1), open_types)
        return None if inner is None else {ANY_KEY: inner}
    if not type_name.startswith("V1") or type_name in open_types:
        return None
    import kubernetes.client.models as models

    cls = getattr(models, type_name, None)
    if cls is None:
        return None
    attribute_map: dict[str, str] = cls.attribute_map
    types: dict[str, str] = cls.openapi_types
    inner_open = open_types | {type_name}
    return {json_key: _tree(types[attr], inner_open) for attr, json_key in attribute_map.items()}


__all__ = ["JOB_LEVEL_KEYS", "lift_job_level", "pod_template_fields", "split_pod_template"]
