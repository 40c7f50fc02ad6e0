"""A TorchX AppDef as a TrainJob: `kubetrain.from_torchx(app)`. TorchX users keep their components.

The AppDef is read by its attributes (name, roles, each role's image, entrypoint, args, env, num_replicas,
min_replicas, max_retries, retry_policy, resource, port_map, metadata, mounts), so kubetrain needs no torchx to
convert one, and a missing or other version of torchx changes nothing here. The AppDef is first written as plain
data (`appdef_document`), then walked like a job file: every attribute is mapped, approximated or refused, with
its path (`roles[0].resource.memMB`).

The `dist.ddp` component's role (`bash -c "torchrun --nnodes N --nproc_per_node P ... script args"`) is
recognised and becomes a pytorch-framework job: N worker replicas of P processes (elastic when --nnodes is
MIN:MAX), the script as `run.python` (`-m` as `run.module`). kubetrain wires the rendezvous itself, so torchrun's
--rdzv_* options, the `c10d` port and TorchX's macros in them are not needed.
"""

from __future__ import annotations

import re
import shlex
import string
from collections.abc import Iterable, Mapping
from typing import Any, cast

from ..contract import env_names
from ..contract.frameworks import record_of
from ..jobspec.frameworks import Framework
from ..jobspec.model import TrainJob
from .conversion import Conversion, ForeignKind, SimpleKind, run_conversion
from .shapes import document, program_run
from .walker import FieldTree, SourceWalker

KIND = "AppDef"
API_VERSION = "torchx.pytorch.org/specs"
"""Not an API version TorchX has (an AppDef is a Python object): the name its conversion's notes carry."""

_DNS = re.compile(r"[^a-z0-9-]+")
_TORCHX_NAME = re.compile(r"[^a-z0-9-]")


def appdef_document(app: Any) -> dict[str, Any]:
    """A TorchX AppDef (or anything with its attributes) as plain data, in TorchX's attribute names."""
    out = {
        "name": getattr(app, "name", None),
        "roles": [_role_document(role) for role in getattr(app, "roles", [])],
        "metadata": dict(getattr(app, "metadata", None) or {}),
    }
    return {k: v for k, v in out.items() if v not in (None, [], {}, "")}


def _role_document(role: Any) -> dict[str, Any]:
    resource = getattr(role, "resource", None)
    retry = getattr(role, "retry_policy", None)
    out: dict[str, Any] = {
        "name": role.name,
        "image": getattr(role, "image", None),
        "base_image": getattr(role, "base_image", None),
        "entrypoint": getattr(role, "entrypoint", None),
        "args": [str(arg) for arg in getattr(role, "args", None) or []],
        "env": {str(k): str(v) for k, v in (getattr(role, "env", None) or {}).items()},
        "num_replicas": getattr(role, "num_replicas", 1),
        "min_replicas": getattr(role, "min_replicas", None),
        "max_retries": getattr(role, "max_retries", 0),
        "retry_policy": getattr(retry, "value", retry),
        "resource": None if resource is None else _resource_document(resource),
        "port_map": dict(getattr(role, "port_map", None) or {}),
        "metadata": dict(getattr(role, "metadata", None) or {}),
        "mounts": [_mount_document(mount) for mount in getattr(role, "mounts", None) or []],
    }
    # Unset optional attributes say nothing: leave them out rather than note them.
    return {k: v for k, v in out.items() if v not in (None, [], {}, "")}


def _resource_document(resource: Any) -> dict[str, Any]:
    out = {
        "cpu": getattr(resource, "cpu", -1),
        "gpu": getattr(resource, "gpu", -1),
        "memMB": getattr(resource, "memMB", -1),
        "capabilities": dict(getattr(resource, "capabilities", None) or {}),
        "devices": dict(getattr(resource, "devices", None) or {}),
    }
    return {k: v for k, v in out.items() if v != {}}


def _mount_document(mount: Any) -> dict[str, Any]:
    kind = type(mount).__name__
    if kind == "BindMount" or (hasattr(mount, "src_path") and hasattr(mount, "read_only")):
        return {
            "type": "bind",
            "src_path": mount.src_path,
            "dst_path": mount.dst_path,
            "read_only": bool(mount.read_only),
        }
    if kind == "VolumeMount" or hasattr(mount, "src"):
        return {"type": "volume", "src": mount.src, "dst_path": mount.dst_path, "read_only": bool(mount.read_only)}
    return {
        "type": "device",
        "src_path": mount.src_path,
        "dst_path": getattr(mount, "dst_path", None),
        "permissions": getattr(mount, "permissions", "rwm"),
    }


_ROLE: FieldTree = {
    "name": None,
    "image": None,
    "base_image": None,
    "entrypoint": None,
    "args": None,
    "env": None,
    "num_replicas": None,
    "min_replicas": None,
    "max_retries": None,
    "retry_policy": None,
    "resource": {"cpu": None, "gpu": None, "memMB": None, "capabilities": None, "devices": None},
    "port_map": None,
    "metadata": None,
    "mounts": None,
}


def _fields() -> FieldTree:
    return {"name": None, "roles": _ROLE, "metadata": None}


# -- TorchX's macros (torchx.specs.api.macros), substituted as TorchX does -----------------------------------

MACROS = ("app_id", "replica_id", "rank0_env", "img_root", "base_img_root")


class _Macros(string.Template):
    """TorchX substitutes macros with `string.Template(arg).safe_substitute(...)` in a role's args and env
    values: `${name}` and `$name`, `$$` is a `$`, anything else stays as written."""


def macro_values(framework: Framework) -> dict[str, str]:
    """What each macro becomes in a TrainJob, as TorchX's Kubernetes scheduler fills them in: its per-replica
    values as references to the replica's own variables, which every backend expands per replica (env values
    always, the program's arguments with run.expandEnv), as the kubelet expands a TorchX pod's args and env."""
    return {
        "replica_id": "$(KUBETRAIN_REPLICA_INDEX)",  # the replica's index in its role, kept by its replacement
        "app_id": "$(KUBETRAIN_JOB)",  # the job's name: what kubetrain calls the job, as TorchX's app id
        # The NAME of a variable holding the first replica's host, for a shell to read: MASTER_ADDR in a pytorch
        # job (TorchX's own TORCHX_RANK0_HOST / VC_<ROLE>_0_HOSTS are its schedulers'), KUBETRAIN_RANK0_HOST else.
        "rank0_env": record_of(framework).rank0_host or env_names.RANK0_HOST,
        "img_root": "",  # the image's root directory: "" on Kubernetes; locally this machine's own, "" too
        "base_img_root": "DEPRECATED",  # TorchX's own value for it
    }


def substitute(text: str, values: dict[str, str]) -> str:
    """`text` with TorchX's macros substituted as TorchX does (`_Macros`)."""
    return _Macros(text).safe_substitute(values)


def macro_names(texts: Iterable[str]) -> list[str]:
    """The macros `texts` use, in TorchX's spelling (`${replica_id}`), sorted."""
    found = {m.group("named") or m.group("braced") for text in texts for m in _Macros.pattern.finditer(text)}
    return sorted(f"${{{name}}}" for name in found if name in MACROS)


def macros_note(found: list[str], values: dict[str, str]) -> str:
    return (f"TorchX macros {', '.join(found)} substituted as TorchX's Kubernetes scheduler does, per replica: "
            "${replica_id} is the replica's index (KUBETRAIN_REPLICA_INDEX), ${app_id} the job's name "
            f"(KUBETRAIN_JOB), ${{rank0_env}} names {values['rank0_env']} (the first replica's host), ${{img_root}} "
            "is '' (the root of the pod's image; locally kubetrain runs no image: this machine's root)")


def dns_name(text: str, fallback: str) -> str:
    """TorchX names → Kubernetes names: lowercase, runs of other characters as '-', trimmed to 63."""
    name = _DNS.sub("-", text.lower()).strip("-")[:63].strip("-")
    return name or fallback


def torchx_name(text: str) -> str:
    """The name TorchX's Kubernetes scheduler makes of an app's (`normalize_str`, seed 003's `cleanup_str`):
    lowercase, every character outside [a-z0-9-] dropped, a leading '-' too."""
    return _TORCHX_NAME.sub("", text.lower().removeprefix("-"))


def _convert(doc: Mapping[str, Any], walker: SourceWalker) -> dict[str, Any]:
    raw = str(walker.get("name") or "")
    name = dns_name(raw, "torchx-app")
    if name == raw:
        walker.take("name", "metadata.name")
    else:
        how = f"{raw!r} as a Kubernetes name: {name!r}"
        torchx = torchx_name(raw)
        if torchx != name:
            # Kept on purpose (docs/design-decisions.md): the separators TorchX drops keep a name readable.
            how += (f" (TorchX's Kubernetes scheduler would make it {torchx!r}, dropping every character outside "
                    "[a-z0-9-]; kubetrain writes each run of them as '-', so the words stay apart)")
        walker.approx("name", "metadata.name", how)
    walker.refuse("metadata", "scheduler-specific settings TorchX hands its schedulers")
    spec: dict[str, Any] = {"framework": Framework.GENERIC.value}
    roles: dict[str, dict[str, Any]] = {}
    retries: list[int] = []
    ddp = any(_ddp(walker.get(("roles", i, "entrypoint")), walker.get(("roles", i, "args")) or []) is not None
              for i in walker.indexes("roles"))
    values = macro_values(Framework.PYTORCH if ddp else Framework.GENERIC)
    for i in walker.indexes("roles"):
        role_name, role = _role(walker, ("roles", i), spec, retries, values)
        roles[role_name] = role
    spec["roles"] = roles
    if retries and max(retries) > 0:
        spec["runPolicy"] = {"backoffLimit": min(retries)}
    return document({"name": name}, spec)


def _role(
    walker: SourceWalker, r: tuple[str | int, ...], spec: dict[str, Any], retries: list[int], values: dict[str, str]
) -> tuple[str, dict[str, Any]]:
    ddp = _ddp(walker.get((*r, "entrypoint")), walker.get((*r, "args")) or [])
    raw = str(walker.get((*r, "name")))
    name = "worker" if ddp is not None else dns_name(raw, f"role{r[-1]}")
    target = f"spec.roles.{name}"
    if name == raw:
        walker.take((*r, "name"), target)
    else:
        why = (
            "the dist.ddp component's role: a pytorch job's workers"
            if ddp is not None
            else f"{raw!r} as a Kubernetes name"
        )
        walker.approx((*r, "name"), target, why)
    role: dict[str, Any] = {"replicas": walker.take((*r, "num_replicas"), f"{target}.replicas", default=1)}
    image = walker.take((*r, "image"), f"{target}.image")
    if image:
        role["image"] = image
    walker.refuse((*r, "base_image"), "deprecated in TorchX; kubetrain runs one image per replica")
    if ddp is not None:
        _take_ddp(walker, r, target, ddp, role, spec, values)
    else:
        # TorchX substitutes macros in args, not in the entrypoint ("Macros used fields of Role other than the
        # ones mentioned above, are NOT substituted").
        args = [str(a) for a in walker.get((*r, "args")) or []]
        entrypoint = walker.get((*r, "entrypoint"))
        run, how = program_run([*([entrypoint] if entrypoint is not None else []), *args])
        found = macro_names(args)
        if found or any("$" in a for a in args):
            key = next(iter(run))
            # The run's last words are the args (`python -m` took the first of them as its own).
            n = min(len(args), len(run[key]))
            run[key] = [*run[key][: len(run[key]) - n], *(substitute(a, values) for a in args[len(args) - n:])]
            if any("$" in w for w in run[key]):
                run["expandEnv"] = True  # as the kubelet expands a TorchX pod's args
        if found:
            how = (how + "; " if how else "") + macros_note(found, values)
        for part in ("entrypoint", "args"):
            if how:
                walker.approx((*r, part), f"{target}.run", how)
            else:
                walker.take((*r, part), f"{target}.run")
        role["run"] = run
        minimum = walker.get((*r, "min_replicas"))
        if minimum is None or minimum == role["replicas"]:
            walker.take((*r, "min_replicas"), None)
        else:
            walker.refuse((*r, "min_replicas"), "elastic roles are pytorch's (dist.ddp with --nnodes MIN:MAX)")
    env = walker.get((*r, "env")) or {}
    found = macro_names(str(v) for v in env.values())
    if found:
        walker.approx((*r, "env"), f"{target}.env", macros_note(found, values))
    else:
        walker.take((*r, "env"), f"{target}.env")
    if env:
        # Env values keep Kubernetes' meaning on every backend, as in a TorchX pod: macros substituted first.
        role["env"] = {str(name): substitute(str(value), values) for name, value in env.items()}
    _retries(walker, r, retries)
    _resource(walker, (*r, "resource"), target, role)
    _ports(walker, r, target, role, ddp is not None)
    walker.refuse((*r, "metadata"), "scheduler-specific settings TorchX hands its schedulers")
    mounts = _mounts(walker, (*r, "mounts"), target)
    if mounts:
        role["mounts"] = mounts
    return name, role


def _ddp(entrypoint: Any, args: list[Any]) -> dict[str, Any] | None:
    """The dist.ddp component's torchrun line, parsed: {nnodes, nproc, program, options}; None if not it."""
    if entrypoint != "bash" or len(args) != 2 or args[0] != "-c":
        return None
    try:
        words = shlex.split(str(args[1]))
    except ValueError:
        return None
    if not words or words[0] != "torchrun":
        return None
    options: dict[str, str] = {}
    flags: list[str] = []
    i = 1
    while i < len(words) and words[i].startswith("--"):
        key, eq, value = words[i][2:].partition("=")
        key = key.replace("-", "_")
        if eq:
            options[key] = value
            i += 1
        elif key in ("standalone", "no_python", "module"):
            flags.append(key)
            i += 1
        else:
            options[key] = words[i + 1] if i + 1 < len(words) else ""
            i += 2
    program = words[i:]
    if "module" in flags or (program[:1] == ["-m"]):
        program = program[1:] if program[:1] == ["-m"] else program
        run = {"module": program}
    elif "no_python" in flags:
        run = {"exec": program}
    else:
        run = {"python": program}
    if not program:
        return None
    return {"options": options, "flags": flags, "run": run}


def _take_ddp(
    walker: SourceWalker,
    r: tuple[str | int, ...],
    target: str,
    ddp: dict[str, Any],
    role: dict[str, Any],
    spec: dict[str, Any],
    values: dict[str, str],
) -> None:
    options: dict[str, str] = ddp["options"]
    spec["framework"] = Framework.PYTORCH.value
    role["run"] = ddp["run"]
    nnodes = options.pop("nnodes", "")
    nproc = options.pop("nproc_per_node", "")
    notes = ["dist.ddp's torchrun: kubetrain runs torchrun itself (one per replica) with the rendezvous it wires"]
    if nproc.isdigit():
        role["procsPerReplica"] = int(nproc)
    elif nproc:
        role["procsPerReplica"] = "auto"
        notes.append(f"--nproc_per_node {nproc} as procsPerReplica auto (one per GPU)")
    low, _, high = nnodes.partition(":")
    if high and low.isdigit() and high.isdigit() and low != high:
        spec["elastic"] = {"minReplicas": int(low), "maxReplicas": int(high)}
        walker.take((*r, "min_replicas"), "spec.elastic.minReplicas")
    else:
        walker.take((*r, "min_replicas"), None)
    dropped = sorted(
        k for k in options if k.startswith("rdzv") or k in ("tee", "role", "max_restarts", "master_addr", "master_port")
    )
    if "max_restarts" in options and "elastic" in spec:
        spec["elastic"]["maxRestarts"] = int(options["max_restarts"])
    if dropped:
        notes.append(f"--{', --'.join(dropped)} not needed (kubetrain keeps every replica's output in its log)")
    other = sorted(set(options) - set(dropped))
    if other:
        role["run"]["otherArgs"] = [w for k in other for w in (f"--{k}", options[k])]
    key = next(k for k in ("python", "module", "exec") if k in role["run"])
    found = macro_names(role["run"][key])
    if found:  # the program's own arguments in the torchrun line
        role["run"][key] = [substitute(w, values) for w in role["run"][key]]
        role["run"]["expandEnv"] = True
        notes.append(macros_note(found, values))
    walker.approx((*r, "entrypoint"), f"{target}.run", "; ".join(notes))
    walker.approx((*r, "args"), f"{target}.run", "; ".join(notes))


def _retries(walker: SourceWalker, r: tuple[str | int, ...], retries: list[int]) -> None:
    count = int(walker.get((*r, "max_retries")) or 0)
    if retries and count != min(retries):
        walker.approx(
            (*r, "max_retries"),
            "spec.runPolicy.backoffLimit",
            "one backoffLimit for the job: the smallest of the roles' (as TorchX's Kubernetes scheduler)",
        )
    else:
        walker.take((*r, "max_retries"), "spec.runPolicy.backoffLimit")
    retries.append(count)
    policy = walker.get((*r, "retry_policy"))
    if policy in (None, "APPLICATION"):
        walker.take((*r, "retry_policy"), None)
    else:
        walker.approx(
            (*r, "retry_policy"),
            None,
            f"{policy}: kubetrain restarts the whole replica group "
            "(locally, jobset, volcano) or the failed pod (job, kubeflow)",
        )


def _resource(walker: SourceWalker, res: tuple[str | int, ...], target: str, role: dict[str, Any]) -> None:
    resources: dict[str, Any] = {}
    cpu, gpu, mem = (walker.get((*res, k)) for k in ("cpu", "gpu", "memMB"))
    for key, value, dst in (("cpu", cpu, "cpu"), ("gpu", gpu, "gpu")):
        if value is None or value < 0:
            walker.take((*res, key), None)  # TorchX's "unset"
        elif value == 0 and key == "gpu":
            walker.take((*res, key), None)
        else:
            walker.take((*res, key), f"{target}.resources.{dst}")
            resources[dst] = value
    if mem is None or mem < 0:
        walker.take((*res, "memMB"), None)
    else:
        walker.take((*res, "memMB"), f"{target}.resources.memory")
        resources["memory"] = f"{int(mem)}Mi"
    caps = walker.take((*res, "capabilities"), f"{target}.resources.capabilities")
    if caps:
        resources["capabilities"] = {str(k): str(v) for k, v in caps.items()}
    devices = walker.take((*res, "devices"), f"{target}.resources.extendedResources")
    if devices:
        resources["extendedResources"] = dict(devices)
    if resources:
        role["resources"] = resources


def _ports(walker: SourceWalker, r: tuple[str | int, ...], target: str, role: dict[str, Any], ddp: bool) -> None:
    ports = []
    for name, port in (walker.get((*r, "port_map")) or {}).items():
        path = (*r, "port_map", str(name))
        if ddp and name == "c10d":
            walker.approx(
                path, None, "torchrun's rendezvous port: kubetrain wires its own (MASTER_PORT, PET_RDZV_ENDPOINT)"
            )
            continue
        walker.take(path, f"{target}.ports")
        item: dict[str, Any] = {"container": int(port)}
        label = dns_name(str(name), "")
        if label and len(label) <= 15:
            item["name"] = label
        ports.append(item)
    if ports:
        role["ports"] = ports


def _mounts(walker: SourceWalker, path: tuple[str | int, ...], target: str) -> list[dict[str, Any]]:
    out = []
    for i in walker.indexes(path):
        m = (*path, i)
        mount = walker.take(m, f"{target}.mounts")
        if mount["type"] == "bind":
            out.append(
                {"type": "bind", "src": mount["src_path"], "dst": mount["dst_path"], "readonly": mount["read_only"]}
            )
        elif mount["type"] == "volume":
            out.append(
                {"type": "volume", "src": mount["src"], "dst": mount["dst_path"], "readonly": mount["read_only"]}
            )
        else:
            device: dict[str, Any] = {"type": "device", "src": mount["src_path"], "perm": mount["permissions"]}
            if mount.get("dst_path"):
                device["dst"] = mount["dst_path"]
            out.append(device)
    return out


TORCHX_KIND = SimpleKind(KIND, (API_VERSION,), _fields, _convert)


def torchx_conversion(app: Any, *, strict: bool = False) -> Conversion:
    """The AppDef as a TrainJob, with where each of its attributes went (`Conversion.notes`)."""
    # ForeignKind declares settable attributes; SimpleKind is frozen (the protocol is read-only in practice).
    return run_conversion(cast("ForeignKind", TORCHX_KIND), appdef_document(app), strict=strict)


def from_torchx(app: Any, *, strict: bool = False) -> TrainJob:
    """A TorchX AppDef as a TrainJob: roles, image, entrypoint and args, env, replicas, retries, resources with
    capabilities, mounts and ports. `strict=True` raises `SpecError` for any attribute kubetrain does not map;
    otherwise `torchx_conversion(app).warnings()` lists them."""
    return torchx_conversion(app, strict=strict).job


__all__ = ["appdef_document", "from_torchx", "torchx_conversion"]
