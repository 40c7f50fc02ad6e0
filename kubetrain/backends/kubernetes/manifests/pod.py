"""One role's pod template, shared by every flavor: container, env, resources, volumes, security, placement.

Env order in the container: the engine's index variable (where kubetrain adds it), the framework's
static variables, then the user's `env` (so the user wins on a name, and Kubernetes' `$(VAR)` expansion
sees the framework's values). Index-dependent variables are exported by the start-up script; a user
variable that refers to one of them (`$(RANK)`) is computed there too, with the same expansion rules,
so it gets the value it gets locally.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from ....contract.expansion import escape, references
from ....frameworks import Idx, is_static
from ....jobspec import Security
from ....jobspec.errors import format_path
from ....jobspec.kube_models import kube_to_dict
from ....jobspec.model import ReplicaSettings, Run
from ....jobspec.pod_template import (
    MAIN_CONTAINER_NAMES,
    has_args_only,
    main_container_index,
    template_program,
)
from ....jobspec.relaxations import settings_relaxations, template_relaxations, warning
from ....plan import expanded_args
from . import mpi_ssh
from .context import INDEX_LABEL, Ctx, RoleView
from .entrypoint import (
    DEBUG_DIR,
    DEBUG_DIR_ENV,
    Mode,
    is_shell_name,
    kube_value_expr,
    script,
    value_expr,
)
from .pod_template_merge import Fixed, merge_pod_template
from .resources import ResourcePlan, resource_plan
from .volumes import VolumePlan, volume_plan

PORT_NAME = "kubetrain"


@dataclass(frozen=True)
class PodStyle:
    """What differs between flavors in a pod template."""

    index_env: str
    """Variable with the replica's index (set by the engine, or by `index_field_ref`)."""
    index_field_ref: str | None = None
    """Downward-API field that holds the index, when the engine sets no variable for it."""
    index_value: str | None = None
    """The index itself, for a role of one replica whose engine labels it with none (the MPI Operator's
    launcher)."""
    engine_env: tuple[str, ...] = ()
    """Variables the engine adds to the container (user `$(VAR)` references may use them)."""
    engine_overrides: tuple[str, ...] = ()
    """Names (or `PREFIX*`) the engine appends to the container's env, overriding ours: the start-up
    script exports kubetrain's (or the user's) values for them again."""
    container_name: str = MAIN_CONTAINER_NAMES[0]
    port_name: str = PORT_NAME
    restart_policy: str | None = "Never"
    subdomain: str | None = None
    pod_scheduler: bool = True
    """Set the pod's schedulerName (Volcano sets it from the job's instead)."""
    automount_token: bool | None = None
    """Force automountServiceAccountToken (an operator that needs the API in the pod)."""
    index_source: str | None = None
    """A downward-API field that holds the replica's index (a pod whose image runs by its ENTRYPOINT has no
    start-up script to compute it from `index_env`)."""


def pod_template(ctx: Ctx, view: RoleView, style: PodStyle) -> dict[str, Any]:
    settings = view.settings
    debug = ctx.spec.run_mode == "Debug"
    resources = resource_plan(ctx, view)
    volumes = volume_plan(ctx, view, debug=debug)
    ssh = mpi_ssh.for_role(ctx, view)
    _add_ssh_volumes(ctx, view, volumes, ssh)
    if ssh.env:
        view = replace(view, env={**view.env, **ssh.env})
    env, exports = container_env(ctx, view, style, debug=debug)
    _unkept_names(ctx, view)
    # Debug holds the program; what a hosting replica runs (sshd) serves the launcher started by hand.
    mode: Mode = "wait" if view.argv is None else ("debug" if debug and not view.hosting else "exec")
    entry = script(index_env=style.index_env, exports=exports, mode=mode, lines=ssh.lines,
                   args=expanded_argv(ctx, view, style, env, exports), by_index=index_exports(ctx, view, style))

    container: dict[str, Any] = {"name": style.container_name, "image": settings.image or ""}
    if settings.image is None:
        ctx.problems.add(
            ctx.where(view.role, "image"), "is required on Kubernetes (the local backend runs on this machine)",
            hint="set spec.image, or the image of each role (spec.roles.<role>.image)",
        )
    if settings.image_pull_policy:
        container["imagePullPolicy"] = settings.image_pull_policy
    if view.entrypoint:
        # The image's own ENTRYPOINT runs (no command): kubetrain's start-up script cannot run before it.
        if view.argv:
            container["args"] = list(view.argv)
        if debug:
            ctx.problems.add(ctx.where(view.role, "run", "entrypoint"), "runMode Debug holds the program in "
                             "kubetrain's start-up script, which an image run by its ENTRYPOINT does not run",
                             hint="give the container its command")
    else:
        container["command"] = entry.command()
    if view.argv is not None and not view.entrypoint:
        # The program's argv exactly as given: the kubelet would otherwise expand `$(VAR)` and `$$` in it. A
        # container command under its controller's contract is the job file's, which the kubelet expands.
        controller = ctx.spec.controller is not None
        container["args"] = [arg if controller else escape(arg) for arg in view.argv]
    if settings.working_dir:
        container["workingDir"] = settings.working_dir
    container["env"] = env
    if settings.env_from:
        container["envFrom"] = kube_to_dict(settings.env_from)
    ports = container_ports(ctx, view, style)
    if ports:
        container["ports"] = ports
    if resources.requests or resources.limits:
        container["resources"] = resources.container_resources()
    if volumes.mounts:
        container["volumeMounts"] = volumes.mounts
    if ssh.readiness_probe is not None:
        container["readinessProbe"] = ssh.readiness_probe
    container["securityContext"] = container_security(ctx, view, volumes, ssh.capabilities)
    for found in settings_relaxations(settings):  # the same list, and words, as a pod template's
        head, *rest = found.path
        ctx.warn(warning(ctx.where(view.role, str(head), *rest), found))
    if ctx.spec.tty:
        container["tty"] = True
    if ctx.spec.stdin:
        container["stdin"] = True

    spec: dict[str, Any] = {}
    if style.restart_policy is not None:
        spec["restartPolicy"] = style.restart_policy
    if style.subdomain is not None:
        spec["subdomain"] = style.subdomain
    spec.update(placement(ctx, view, resources, style))
    if ctx.spec.service_account:
        spec["serviceAccountName"] = ctx.spec.service_account
    elif ctx.options.api_access:
        from .rbac import resolver_object_name

        spec["serviceAccountName"] = resolver_object_name(ctx.layout.base)
    automount = bool(ctx.spec.service_account) or ctx.options.api_access
    spec["automountServiceAccountToken"] = style.automount_token if style.automount_token is not None else automount
    spec["securityContext"] = pod_security(ctx, view)
    sec = settings.security or Security()
    if sec.host_ipc:
        spec["hostIPC"] = True
    if sec.host_network:
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"  # keep resolving the job's Service names
    if volumes.init_containers:
        spec["initContainers"] = volumes.init_containers
    spec["containers"] = [container]
    if volumes.volumes:
        spec["volumes"] = volumes.volumes

    metadata: dict[str, Any] = {"labels": {**controller_metadata(ctx, view, "labels"), **pod_labels(ctx, view)}}
    annotations = {**controller_metadata(ctx, view, "annotations"), **pod_annotations(ctx, view, resources)}
    if annotations:
        metadata["annotations"] = annotations
    rendered = {"metadata": metadata, "spec": spec}
    if settings.pod_template is not None:
        return with_pod_template(ctx, view, style, rendered, volumes)
    return rendered


def _add_ssh_volumes(ctx: Ctx, view: RoleView, volumes: VolumePlan, ssh: mpi_ssh.RoleSsh) -> None:
    """The ssh keys' volumes and mounts, at paths no other mount of the role uses."""
    taken = {m["mountPath"] for m in volumes.mounts}
    for mount in ssh.mounts:
        if mount["mountPath"] in taken:
            where = ("spec", "mpi", "sshAuthMountPath") if mount["name"] == mpi_ssh.AUTH_VOLUME else ("spec", "mounts")
            ctx.problems.add(where, f"{mount['mountPath']} holds the job's ssh keys in role {view.role}, and a mount "
                             "of the job uses it too")
    volumes.volumes += ssh.volumes
    volumes.mounts += ssh.mounts


# -- podTemplate -------------------------------------------------------------------------------------------

# The securityContext fields each `security` field sets (pod level, container level).
_POD_SECURITY = {
    "seccomp_profile_type": ("seccompProfile",), "seccomp_localhost_profile": ("seccompProfile",),
    "run_as_user": ("runAsUser", "runAsGroup"), "run_as_uid": ("runAsUser",), "run_as_gid": ("runAsGroup",),
    "run_as_non_root": ("runAsNonRoot",), "supplemental_groups": ("supplementalGroups",),
}
_CONTAINER_SECURITY = {
    "privileged": ("privileged", "allowPrivilegeEscalation"),
    "allow_privilege_escalation": ("allowPrivilegeEscalation",),
    "capabilities": ("capabilities",), "read_only_root_filesystem": ("readOnlyRootFilesystem",),
}


def with_pod_template(
    ctx: Ctx, view: RoleView, style: PodStyle, rendered: dict[str, Any], volumes: VolumePlan
) -> dict[str, Any]:
    """The role's podTemplate under `rendered` (`pod_template_merge`), with a warning for each security
    default it relaxes and for a command or args of its main container that the job's `run` replaces."""
    template: dict[str, Any] = view.settings.pod_template or {}
    sec = view.settings.security
    given = set(sec.model_fields_set) if sec is not None else set()
    pod = {key for name in given & set(_POD_SECURITY) for key in _POD_SECURITY[name]}
    container = {key for name in given & set(_CONTAINER_SECURITY) for key in _CONTAINER_SECURITY[name]}
    if volumes.privileged_by:
        container |= {"privileged", "allowPrivilegeEscalation"}
    automount = bool(ctx.spec.service_account) or ctx.options.api_access or style.automount_token is not None
    fixed = Fixed(frozenset(pod), frozenset(container), automount)
    where = ctx.where(view.role, "pod_template")
    main = main_container_index(template)
    for found in template_relaxations(template):
        if not _kept_out(found.path, main, fixed):
            ctx.warn(warning((*where, *found.path), found))
    program = template_program(template)
    if main is not None and (program is not None or has_args_only(template)) and view.settings.run != (
            Run(exec=program) if program is not None else None):
        ctx.warn(f"{format_path((*where, 'spec', 'containers', main))}: its command and args are not used: "
                 f"{format_path(ctx.where(view.role, 'run'))} is the program (a job's run comes first)")
    return merge_pod_template(template, rendered, fixed)


def _kept_out(path: tuple[str | int, ...], main: int | None, fixed: Fixed) -> bool:
    """A template setting the job's own `security` overrides (so it does not take effect)."""
    if path[:2] == ("spec", "securityContext"):
        return path[2] in fixed.pod
    return path[:3] == ("spec", "containers", main) and path[3] == "securityContext" and path[4] in fixed.container


# -- env ---------------------------------------------------------------------------------------------


def env_path(ctx: Ctx, view: RoleView, name: str) -> tuple[str | int, ...]:
    """Spec path of the user variable `name` (env merges by name: the role's definition wins)."""
    spec = ctx.spec
    role = spec.roles.get(view.role) if spec.roles else None
    for owner, path in ((role, ("spec", "roles", view.role, "env")), (spec, ("spec", "env"))):
        for i, var in enumerate((owner.env or []) if owner is not None else []):
            if var.name == name:
                return (*path, i)
    return ("spec", "env")


def container_env(
    ctx: Ctx, view: RoleView, style: PodStyle, *, debug: bool
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """(container env list, script exports)."""
    user = list(view.settings.env or [])
    controller = ctx.spec.controller is not None
    if controller:
        # A controller appends its variables after the container's own: on a name both set, its value is the
        # one the program sees.
        theirs = {name for name in view.env if not name.startswith("KUBETRAIN_")}
        for var in user:
            if var.name in theirs:
                ctx.warn(f"{format_path(env_path(ctx, view, var.name))}: {var.name} is set by the "
                         f"{ctx.spec.controller.kind if ctx.spec.controller else ''} controller too, whose value "
                         "the program sees")
        user = [var for var in user if var.name not in theirs]
        user = [_renamed(ctx, var) for var in user]
    user_names = {var.name for var in user}
    env: list[dict[str, Any]] = []
    exports: list[tuple[str, str]] = []
    if style.index_env in user_names:
        ctx.problems.add(env_path(ctx, view, style.index_env),
                         f"{style.index_env} holds the replica index in the {ctx.flavor.name} flavor; it cannot be set")
    if style.index_field_ref is not None:
        env.append({"name": style.index_env, "valueFrom": {"fieldRef": {"fieldPath": style.index_field_ref}}})
    elif style.index_value is not None:
        env.append({"name": style.index_env, "value": style.index_value})
    defined = {style.index_env, *style.engine_env}
    dynamic: set[str] = set()
    for name, value in view.env.items():
        if name in user_names:
            continue
        if is_static(value):
            text = value if isinstance(value, str) else "".join(str(p) for p in value)
            # `$$` is a literal `$` to Kubernetes: framework values are never expanded.
            env.append({"name": name, "value": text.replace("$", "$$")})
            if _overridden(style, name):
                exports.append((name, value_expr(text, style.index_env, ctx.topology)))
        elif view.entrypoint:
            # No start-up script runs before an image's ENTRYPOINT: the index comes from the downward API.
            if value == (Idx(),) and ctx.flavor.index_fields:
                env.append({"name": name, "valueFrom": {"fieldRef": {"fieldPath": ctx.flavor.index_fields[0]}}})
            elif name.startswith("KUBETRAIN_"):
                ctx.warn(f"role {view.role}: {name} is not set: the image runs by its ENTRYPOINT, with no "
                         "start-up script to compute it")
            else:
                ctx.problems.add(ctx.where(view.role, "run", "entrypoint"), f"the replicas need {name}, which "
                                 "differs per replica and is computed by kubetrain's start-up script, which an image "
                                 f"run by its ENTRYPOINT does not run on the {ctx.flavor.name} flavor",
                                 hint="give the container its command, or use the flavor whose engine gives it")
        else:
            exports.append((name, value_expr(value, style.index_env, ctx.topology)))
            dynamic.add(name)
        defined.add(name)
    if debug:
        env.append({"name": DEBUG_DIR_ENV, "value": DEBUG_DIR})
        defined.add(DEBUG_DIR_ENV)
    computed = set(dynamic)
    loose = bool(view.settings.env_from)  # envFrom may define names not known here
    for var in user:
        raw = var.value
        overridden = _overridden(style, var.name)
        if overridden and var.value_from is not None:
            ctx.problems.add(env_path(ctx, view, var.name),
                             f"is also set by the {ctx.flavor.name} flavor's operator, which would override a value "
                             "from valueFrom; give it a plain value (kubetrain then sets it at container start)")
        if var.value_from is None and (overridden or (raw and references(raw) & computed)):
            word = kube_value_expr(raw or "", defined, loose)
            if word is None or not is_shell_name(var.name):
                ctx.problems.add(
                    env_path(ctx, view, var.name),
                    f"refers to a per-replica variable ({', '.join(sorted(references(raw) & computed))}), so it "
                    "is computed at container start, and that needs shell names for it and what it refers to",
                )
            else:
                exports.append((var.name, word))
                computed.add(var.name)
        else:
            env.append(kube_to_dict(var))
        defined.add(var.name)
    return env, exports


def expanded_argv(ctx: Ctx, view: RoleView, style: PodStyle, env: list[dict[str, Any]],
                  exports: list[tuple[str, str]]) -> list[tuple[int, str]]:
    """run.expandEnv: the program's arguments with `$(NAME)`, as the shell words that compute them at container
    start (position counted from the last argument, word), as the kubelet would expand a container's args
    against its whole env. The kubelet cannot do it: it would see the `$$` the args are escaped with, and a
    per-replica value exists only once the script has exported it."""
    if view.argv is None:
        return []
    positions = expanded_args(view.argv, view.settings)
    if not positions:
        return []
    defined = {style.index_env, *style.engine_env, *(var["name"] for var in env), *(name for name, _ in exports)}
    loose = bool(view.settings.env_from)
    out = []
    for position in positions:
        word = kube_value_expr(view.argv[position], defined, loose)
        if word is None:
            ctx.problems.add(ctx.where(view.role, "run", "expandEnv"),
                             f"argument {view.argv[position]!r} refers to a variable whose name is not a shell name, "
                             "which the start-up script cannot expand")
            continue
        out.append((len(view.argv) - 1 - position, word))  # counted from the end (`entrypoint.args_lines`)
    return out


def _unkept_names(ctx: Ctx, view: RoleView) -> None:
    """A command naming a host the job's controller makes resolvable (`<job>-master-0`), on a flavor whose pods
    are named otherwise: said, with the exact name (the env values that name one get the flavor's names)."""
    if ctx.native or not ctx.names or view.argv is None:
        return
    from ....contract.hostnames import name_pattern

    pattern = name_pattern(list(ctx.names))
    found = sorted({m.group(0) for word in view.argv for m in pattern.finditer(word)}) if pattern else []
    controller = ctx.spec.controller
    for name in found:
        role, index = ctx.names[name]
        ctx.warn(f"role {view.role}: its command names {name}, which the {controller.kind if controller else ''} "
                 f"controller makes resolvable and the {ctx.flavor.name} flavor does not: that replica is "
                 f"{ctx.topology.host(role, index)} here (pass it through the environment, or use the flavor whose "
                 "engine is that controller)")


def _renamed(ctx: Ctx, var: Any) -> Any:
    """A user variable whose value names a host the job's controller makes resolvable (`<job>-master-0`), with
    the name this flavor gives that replica (the same on the controller's own flavor)."""
    if var.value is None or not ctx.names or ctx.native:
        return var
    from ....contract.hostnames import localize, name_pattern

    hosts = {name: ctx.topology.host(role, index) for name, (role, index) in ctx.names.items()}
    value = localize(var.value, hosts, name_pattern(list(hosts)))
    return var if value == var.value else var.model_copy(update={"value": value})


def index_exports(ctx: Ctx, view: RoleView, style: PodStyle) -> dict[int, list[tuple[str, str]]]:
    """The variables only some replicas get (a controller's rank 0), as script exports by replica index."""
    return {index: [(name, value_expr(value, style.index_env, ctx.topology)) for name, value in env.items()]
            for index, env in view.env_by_index.items()}


def controller_metadata(ctx: Ctx, view: RoleView, kind: str) -> dict[str, str]:
    """The labels or annotations the job's controller gives its pods (JobSet's `jobset.sigs.k8s.io/...`), on a
    flavor whose engine does not: those every replica shares. One a replica reads through the downward API that
    differs per replica cannot be in a pod template: refused, naming the flavor that gives it (the flavor's own
    index field stands for a per-replica index where the role is one Job of its replicas)."""
    controller = ctx.spec.controller
    if ctx.native or controller is None:
        return {}
    given = view.wiring.labels if kind == "labels" else view.wiring.annotations
    read = {var.value_from.field_ref.field_path: var.name for var in view.settings.env or []
            if var.value_from is not None and var.value_from.field_ref is not None}
    out: dict[str, str] = {}
    for key, value in given.items():
        if is_static(value):
            out[key] = value if isinstance(value, str) else "".join(str(p) for p in value)
            continue
        path = f"metadata.{kind}['{key}']"
        if path not in read or (path in ctx.flavor.index_fields and value == (Idx(mod=view.replicas),)):
            continue
        from ....frameworks.controllers import contract_of

        native = contract_of(controller).native_flavor
        ctx.problems.add(env_path(ctx, view, read[path]), f"reads {path}, which the {controller.kind} controller "
                         f"gives each pod its own value of; the {ctx.flavor.name} flavor's pods share one template",
                         hint=f"use the {native} flavor, whose engine is that controller" if native else None)
    return out


def _overridden(style: PodStyle, name: str) -> bool:
    return any(name == o or (o.endswith("*") and name.startswith(o[:-1])) for o in style.engine_overrides)


# -- ports -------------------------------------------------------------------------------------------


def container_ports(ctx: Ctx, view: RoleView, style: PodStyle) -> list[dict[str, Any]]:
    ports: list[dict[str, Any]] = []
    user = view.settings.ports or []
    framework = view.wiring.port
    if framework is not None and all(p.container != framework for p in user):
        ports.append({"name": style.port_name, "containerPort": framework, "protocol": "TCP"})
    names = {style.port_name} if ports else set()
    for i, port in enumerate(user):
        item: dict[str, Any] = {"containerPort": port.container, "protocol": port.protocol}
        if port.name is not None:
            if port.name in names:
                ctx.problems.add(ctx.where(view.role, "ports", i, "name"),
                                 f"port name {port.name!r} is already used in the pod")
            names.add(port.name)
            item = {"name": port.name, **item}
        ports.append(item)
    return ports


# -- placement ---------------------------------------------------------------------------------------


def placement(ctx: Ctx, view: RoleView, resources: ResourcePlan, style: PodStyle) -> dict[str, Any]:
    """priorityClassName, schedulerName, nodeSelector, affinity (with node pools), tolerations."""
    settings: ReplicaSettings = view.settings
    scheduling = ctx.spec.scheduling
    out: dict[str, Any] = {}
    if scheduling.priority_class:
        out["priorityClassName"] = scheduling.priority_class
    scheduler = scheduling.scheduler_name or resources.scheduler_name
    if style.pod_scheduler and scheduler:
        out["schedulerName"] = scheduler
    selector = dict(settings.node_selector or {})
    extra = dict(resources.node_selector)
    if scheduling.node_type is not None:
        extra[scheduling.node_type_label] = scheduling.node_type
    for key, value in extra.items():
        if key in selector and selector[key] != value:
            ctx.problems.add(ctx.where(view.role, "node_selector", key),
                             f"conflicts with {key}={value} required by the resources or scheduling.nodeType")
        selector[key] = value
    if selector:
        out["nodeSelector"] = selector
    affinity: dict[str, Any] = kube_to_dict(settings.affinity) if settings.affinity is not None else {}
    if scheduling.node_pools:
        _node_pools(ctx, view, affinity)
    if affinity:
        out["affinity"] = affinity
    if settings.tolerations:
        out["tolerations"] = kube_to_dict(settings.tolerations)
    return out


def _node_pools(ctx: Ctx, view: RoleView, affinity: dict[str, Any]) -> None:
    """Run:ai's nodePools: only nodes of the listed pools (a required node affinity), the first pool
    preferred, then the next (weights 100, 99, ...). The pool requirement is ANDed into each of the user's
    own required terms: terms are ORed, so a term of its own would admit any node another term admits."""
    scheduling = ctx.spec.scheduling
    pools, label = list(scheduling.node_pools), scheduling.node_pool_label
    if len(pools) > 100:
        ctx.problems.add(("spec", "scheduling", "nodePools"), "at most 100 pools (affinity weights 100..1)")
    node = affinity.setdefault("nodeAffinity", {})
    required = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({})
    for i, term in enumerate(terms):
        expressions = term.setdefault("matchExpressions", [])
        for expr in expressions:
            allowed = set(expr.get("values") or ())
            if expr.get("key") == label and expr.get("operator") == "In" and not allowed & set(pools):
                path: tuple[str | int, ...] = (*_node_affinity_path(ctx, view),
                                               "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", i)
                ctx.problems.add(path, f"requires {label} in {sorted(allowed)}: none of scheduling.nodePools "
                                       f"({', '.join(pools)}), so no node fits")
        # A list of its own per term: a shared one would be dumped as a YAML alias.
        expressions.append({"key": label, "operator": "In", "values": list(pools)})
    preferred = [
        {"weight": 100 - i, "preference": {"matchExpressions": [{"key": label, "operator": "In", "values": [pool]}]}}
        for i, pool in enumerate(pools[:100])
    ]
    node.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).extend(preferred)


def _node_affinity_path(ctx: Ctx, view: RoleView) -> tuple[str, ...]:
    """Where the role's nodeAffinity comes from: its own affinity when that sets one, else the job's."""
    role = ctx.spec.roles.get(view.role) if ctx.spec.roles else None
    if role is not None and role.affinity is not None and role.affinity.node_affinity is not None:
        return ("spec", "roles", view.role, "affinity", "nodeAffinity")
    return ("spec", "affinity", "nodeAffinity")


# -- security ----------------------------------------------------------------------------------------


def pod_security(ctx: Ctx, view: RoleView) -> dict[str, Any]:
    sec = view.settings.security or Security()
    seccomp: dict[str, Any] = {"type": sec.seccomp_profile_type}
    if sec.seccomp_localhost_profile is not None:
        seccomp["localhostProfile"] = sec.seccomp_localhost_profile
    out: dict[str, Any] = {"seccompProfile": seccomp}
    uid, gid = sec.run_as_uid, sec.run_as_gid
    if sec.run_as_user:
        uid = ctx.options.uid if ctx.options.uid is not None else os.getuid()
        gid = ctx.options.gid if ctx.options.gid is not None else os.getgid()
    if uid is not None:
        out["runAsUser"] = uid
    if gid is not None:
        out["runAsGroup"] = gid
    if sec.run_as_non_root is not None:
        out["runAsNonRoot"] = sec.run_as_non_root
    if sec.supplemental_groups:
        out["supplementalGroups"] = list(sec.supplemental_groups)
    return out


def container_security(ctx: Ctx, view: RoleView, volumes: VolumePlan, needed: tuple[str, ...] = ()) -> dict[str, Any]:
    """Locked down unless the spec asks otherwise: no privilege escalation, every capability dropped
    (some added back on request, or `needed` by what kubetrain runs there: sshd as root, said in a warning),
    RuntimeDefault seccomp (pod level)."""
    sec = view.settings.security or Security()
    if needed:
        sec = sec.model_copy(update={"capabilities": [*sec.capabilities, *needed]})
    privileged = sec.privileged or bool(volumes.privileged_by)
    out: dict[str, Any]
    if privileged:
        if volumes.privileged_by:  # `security.privileged` is warned at its path, as every relaxation is
            ctx.warn(f"role {view.role}: pods run PRIVILEGED ({', '.join(volumes.privileged_by)}): full access to "
                     "the host, privilege escalation allowed")
        # Kubernetes refuses privileged with allowPrivilegeEscalation false; privileged means both.
        out = {"privileged": True, "allowPrivilegeEscalation": True}
        if sec.capabilities:
            out["capabilities"] = {"add": list(sec.capabilities)}
    else:
        escalation = sec.allow_privilege_escalation
        if "SYS_ADMIN" in sec.capabilities and not escalation:
            # Kubernetes refuses CAP_SYS_ADMIN without privilege escalation: asking for it asks for both (the
            # capabilities' warning says so).
            escalation = True
        caps: dict[str, Any] = {"drop": ["ALL"]}
        if sec.capabilities:
            caps["add"] = list(sec.capabilities)
        out = {"allowPrivilegeEscalation": escalation, "capabilities": caps}
    if sec.read_only_root_filesystem:
        out["readOnlyRootFilesystem"] = True
    return out


# -- labels and annotations --------------------------------------------------------------------------


def pod_labels(ctx: Ctx, view: RoleView) -> dict[str, str]:
    labels = {**(view.settings.labels or {}), **ctx.labels(view.role)}
    if view.replicas == 1:
        labels[INDEX_LABEL] = "0"  # the only replica: its index is known before the engine runs it
    return labels


def pod_annotations(ctx: Ctx, view: RoleView, resources: ResourcePlan) -> dict[str, str]:
    annotations = dict(view.settings.annotations or {})
    for key, value in resources.annotations.items():
        if key in annotations and annotations[key] != value:
            ctx.problems.add(ctx.where(view.role, "annotations", key),
                             f"conflicts with {key}={value}, which gpuSharing sets")
        annotations[key] = value
    return annotations


__all__ = ["PORT_NAME", "PodStyle", "container_env", "pod_template", "with_pod_template"]
