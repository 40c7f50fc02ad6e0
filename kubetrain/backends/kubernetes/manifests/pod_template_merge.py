"""A role's podTemplate merged under the pod kubetrain renders. Pure: two dicts in, one out.

Precedence (the field's docs, `kubetrain explain spec.podTemplate`): the template is the base, kubetrain's pod
goes on top.

- metadata: labels and annotations merged, kubetrain's keys win.
- pod spec: fields kubetrain does not set are kept (imagePullSecrets, hostAliases, dnsConfig, ...); fields it
  sets replace the template's, except lists and maps, which merge by their Kubernetes merge keys with
  kubetrain's item winning on a clash: containers, initContainers and volumes by name, tolerations appended,
  nodeSelector and affinity (per kind) as maps.
- the MAIN container (`jobspec.pod_template.main_container_index`) is kubetrain's container merged over the
  template's, first in the list (logs and the training operator read the first container): kubetrain's name,
  image, command, args, env and workingDir (the planner already took the template's env, image and workingDir
  where the job set none, and its command and args as the program); ports by containerPort, volumeMounts by
  mountPath, envFrom appended, resources per name; what kubetrain does not set (probes, lifecycle, ...) kept.
  A template port named as one of kubetrain's on another number is renamed (`with_port_names_free`).
- security: kubetrain's defaults (no privilege escalation, every capability dropped, RuntimeDefault seccomp,
  no service account token) apply where the template sets nothing, on every container of the pod; a field
  the template sets is kept, unless the job's own `security` sets it too (`Fixed`). Capabilities merge: the
  template's `drop` replaces ALL only if it gives one, `add` is the union.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ....jobspec.pod_template import main_container_index

Manifest = dict[str, Any]

CONTAINER_DEFAULTS: Manifest = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
"""kubetrain's container securityContext when the job asks for nothing: what a template's own containers
(sidecars, init containers) get too, where they set nothing."""


@dataclass(frozen=True)
class Fixed:
    """The securityContext fields the job's `security` (or a device mount) sets: kubetrain's value stands
    over a template's. The others are defaults, which a template's value replaces."""

    pod: frozenset[str] = field(default_factory=frozenset)
    container: frozenset[str] = field(default_factory=frozenset)
    automount_token: bool = False
    """automountServiceAccountToken follows the job (serviceAccount, apiAccess, the flavor), not a default."""


def merge_pod_template(template: Mapping[str, Any], rendered: Mapping[str, Any], fixed: Fixed) -> Manifest:
    """`rendered` (kubetrain's pod template, its container first) over `template` (a PodTemplateSpec)."""
    out_meta: Manifest = {}
    t_meta, k_meta = template.get("metadata") or {}, rendered.get("metadata") or {}
    for key in ("labels", "annotations"):
        merged = {**(t_meta.get(key) or {}), **(k_meta.get(key) or {})}
        if merged:
            out_meta[key] = merged
    return {
        "metadata": out_meta,
        "spec": merge_pod_spec(template.get("spec") or {}, rendered["spec"], fixed, main_container_index(template)),
    }


def merge_pod_spec(
    t_spec: Mapping[str, Any], k_spec: Mapping[str, Any], fixed: Fixed, main_index: int | None
) -> Manifest:
    out: Manifest = copy.deepcopy(dict(t_spec))
    for key in ("initContainers", "ephemeralContainers"):
        if key in out:
            out[key] = [secure_container(c) for c in out[key]]
    for key, value in k_spec.items():
        theirs = t_spec.get(key)
        if key == "containers":
            out[key] = _containers(list(t_spec.get(key) or []), list(value), fixed, main_index)
        elif theirs is None:
            out[key] = copy.deepcopy(value)
        elif key in ("initContainers", "volumes"):
            out[key] = merge_by(out[key], value, "name")
        elif key == "tolerations":
            out[key] = [*theirs, *(item for item in value if item not in theirs)]
        elif key in ("nodeSelector", "affinity"):
            out[key] = {**theirs, **copy.deepcopy(value)}
        elif key == "securityContext":
            out[key] = merge_context(value, theirs, fixed.pod)
        elif key == "automountServiceAccountToken" and not fixed.automount_token:
            out[key] = theirs
        else:
            out[key] = copy.deepcopy(value)
    return out


def _containers(theirs: list[Manifest], ours: list[Manifest], fixed: Fixed, main_index: int | None) -> list[Manifest]:
    main, *rest = ours
    base = theirs[main_index] if main_index is not None else {}
    others = [secure_container(c) for i, c in enumerate(theirs) if i != main_index and c.get("name") != main["name"]]
    return [merge_container(base, main, fixed.container), *merge_by(others, rest, "name")]


def merge_container(theirs: Mapping[str, Any], ours: Mapping[str, Any], fixed: frozenset[str]) -> Manifest:
    """kubetrain's main container over the template's."""
    theirs = with_port_names_free(theirs, ours.get("ports") or [])
    out: Manifest = {}
    for key, value in ours.items():
        mine = theirs.get(key)
        if key in _FROM_THE_PLAN or mine is None:
            out[key] = copy.deepcopy(value)
        elif key == "ports":
            out[key] = merge_by(mine, value, "containerPort")
        elif key == "volumeMounts":
            out[key] = merge_by(mine, value, "mountPath")
        elif key == "envFrom":
            out[key] = [*mine, *(item for item in value if item not in mine)]
        elif key == "resources":
            out[key] = _resources(mine, value)
        elif key == "securityContext":
            out[key] = merge_context(value, mine, fixed)
        else:
            out[key] = copy.deepcopy(value)
    if "securityContext" not in ours:
        out["securityContext"] = merge_context(CONTAINER_DEFAULTS, theirs.get("securityContext") or {}, frozenset())
    for key, value in theirs.items():  # after kubetrain's, so the name and program read first
        if key not in out and key not in _FROM_THE_PLAN:
            out[key] = copy.deepcopy(value)
    return out


_FROM_THE_PLAN = ("name", "image", "command", "args", "env", "workingDir")
"""The main container's fields kubetrain always takes from the plan, which already holds the template's
where the job sets none: the template's values would only repeat or contradict it."""


# -- port names ----------------------------------------------------------------------------------------
#
# The API server refuses a container with two ports of one name. The main container holds kubetrain's ports
# (the framework's, named `kubetrain` or the training operator's `<kind>job-port`, and the job's `ports`)
# merged with the template's by containerPort, so a template port named as one of kubetrain's on another
# number would make the pod unacceptable. kubetrain RENAMES the template's port instead of refusing the
# job: which names kubetrain takes depends on the flavor (kubeflow's operator finds its port by its own
# name) and on the framework's port, neither of which a template knows when it is written (a base file, a
# template converted from another kind, one template for every flavor), so a check at load would refuse
# templates that render fine elsewhere. kubetrain's name stays: the training operator finds its port by
# it, and a name in the job's `ports` is the user's choice, written in the job itself. The template's port
# becomes `port-<containerPort>` (`-2`, `-3`... if that is taken too), and the template's own references
# to the old name in that container (probes', lifecycle hooks' port) follow it, as do references to a
# template port that kubetrain's item of the same number replaces: a name the template gave keeps
# pointing at the port it named.

_PORT_REFERENCES = (
    ("livenessProbe",),
    ("readinessProbe",),
    ("startupProbe",),
    ("lifecycle", "postStart"),
    ("lifecycle", "preStop"),
)
"""Where a container refers to one of its ports by name (each with `httpGet.port` or `tcpSocket.port`)."""


def with_port_names_free(theirs: Mapping[str, Any], ours: Sequence[Mapping[str, Any]]) -> Manifest:
    """The template's main container with no port named as one of kubetrain's `ours` on another number."""
    numbers = {port.get("containerPort"): port.get("name") for port in ours}
    taken = {port["name"] for port in ours if port.get("name")}
    used = taken | {port["name"] for port in theirs.get("ports") or [] if port.get("name")}
    renames: dict[str, str] = {}
    ports: list[Manifest] = []
    for port in theirs.get("ports") or []:
        name, number = port.get("name"), port.get("containerPort")
        item: Manifest = dict(port)
        if number in numbers:  # kubetrain's item replaces it: references follow kubetrain's name
            replaced_by = numbers[number]
            if name and replaced_by and replaced_by != name:
                renames[name] = str(replaced_by)
        elif name in taken:
            item["name"] = renames[name] = _free_port_name(number, used)
            used.add(item["name"])
        ports.append(item)
    if not renames:
        return dict(theirs)
    out = copy.deepcopy(dict(theirs))
    out["ports"] = ports
    for path in _PORT_REFERENCES:
        handler: Any = out
        for key in path:
            handler = handler.get(key) if isinstance(handler, Mapping) else None
        for action in ("httpGet", "tcpSocket"):
            target = handler.get(action) if isinstance(handler, Mapping) else None
            if isinstance(target, dict) and isinstance(target.get("port"), str) and target["port"] in renames:
                target["port"] = renames[target["port"]]
    return out


def _free_port_name(number: Any, used: set[str]) -> str:
    """`port-<number>`, else `port-<number>-2`, ...: an IANA service name (≤ 15 characters: a port number
    has at most 5 digits) that no port of the container has."""
    base = f"port-{number}" if isinstance(number, int) else "port"
    candidate, n = base, 1
    while candidate in used:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def secure_container(container: Mapping[str, Any]) -> Manifest:
    """A template's own container (sidecar, init container) with kubetrain's security defaults where it
    sets nothing."""
    out = copy.deepcopy(dict(container))
    out["securityContext"] = merge_context(CONTAINER_DEFAULTS, container.get("securityContext") or {}, frozenset())
    return out


def merge_context(ours: Mapping[str, Any], theirs: Mapping[str, Any], fixed: frozenset[str]) -> Manifest:
    """A securityContext: the template's fields over kubetrain's defaults, kubetrain's `fixed` fields over
    the template's; capabilities per list. Privileged (or CAP_SYS_ADMIN) with escalation refused only by
    kubetrain's default allows escalation: Kubernetes refuses the pair, and the template asked for it."""
    out: Manifest = copy.deepcopy(dict(ours))
    for key, value in theirs.items():
        if key == "capabilities" and isinstance(out.get(key), Mapping):
            out[key] = _capabilities(out[key], value or {})
        elif key not in fixed or key not in out:
            out[key] = copy.deepcopy(value)
    added = (out.get("capabilities") or {}).get("add") or []
    escalates = out.get("privileged") is True or "SYS_ADMIN" in added
    if escalates and out.get("allowPrivilegeEscalation") is False and "allowPrivilegeEscalation" not in theirs:
        out["allowPrivilegeEscalation"] = True
    return out


def _capabilities(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> Manifest:
    out: Manifest = {}
    drop = theirs.get("drop") if "drop" in theirs else ours.get("drop")
    if drop:
        out["drop"] = list(drop)
    add = [*(ours.get("add") or []), *(c for c in theirs.get("add") or [] if c not in (ours.get("add") or []))]
    if add:
        out["add"] = add
    return out


def _resources(theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> Manifest:
    out: Manifest = copy.deepcopy(dict(theirs))
    for key, value in ours.items():
        mine = theirs.get(key)
        out[key] = (
            {**mine, **value} if isinstance(mine, Mapping) and isinstance(value, Mapping) else (copy.deepcopy(value))
        )
    return out


def merge_by(theirs: Sequence[Manifest], ours: Sequence[Manifest], key: str) -> list[Manifest]:
    """A list merged by `key`, Kubernetes' strategic merge: the template's items in their order, each
    replaced by kubetrain's of the same key, then kubetrain's others."""
    mine = {item.get(key): item for item in ours}
    out = [copy.deepcopy(mine.pop(item.get(key), item)) for item in theirs]
    return out + [copy.deepcopy(item) for item in ours if item.get(key) in mine]


__all__ = [
    "CONTAINER_DEFAULTS",
    "Fixed",
    "merge_by",
    "merge_container",
    "merge_context",
    "merge_pod_template",
    "secure_container",
    "with_port_names_free",
]
