"""The settings that loosen kubetrain's security defaults on Kubernetes, each with why it matters: ONE list.

kubetrain's pods are locked down unless the job asks otherwise (no privilege escalation, every capability
dropped, RuntimeDefault seccomp, the pod's own namespaces, no host folder). A job can ask in two ways: the typed
settings (`security`, a `bind` mount) and a pod template (a TrainJob's `podTemplate`; the pod templates of a
foreign file, which a conversion splits between the two). Both are read against this one list
(`RELAXATIONS`), so a setting warned for one is warned for the other, with the same words: a converted file
says what a TrainJob with the same settings says, at its own path (`Conversion.to_source` takes it back to the
source file's line), and a new entry here is warned everywhere at once.

The list follows the Pod Security Standards' baseline and restricted profiles where they concern what a
container may reach: host namespaces and processes, privileged containers, capabilities, host folders and
ports, /proc, seccomp and AppArmor, root.

Pure data and pure functions: `template_relaxations` reads a PodTemplateSpec, `settings_relaxations` a role's
typed settings, `job_relaxations` a whole TrainJob (its spec paths, as the user wrote them); the render warns
per role (`backends/kubernetes/render/pod.py`), the CLI where no pod runs (`cli/options.py`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic.alias_generators import to_camel

from .errors import Path, format_path

if TYPE_CHECKING:
    from .model import TrainJob
    from .replica_settings import ReplicaSettings


@dataclass(frozen=True)
class Relaxation:
    """One setting that loosens a default, in words a user reads in a warning."""

    key: str
    """A stable name (`hostNetwork`, `hostPath:/`), for tests and docs."""
    what: str
    """What the setting gives the pod; `{detail}` is the setting's own value (a path, capabilities)."""
    why: str
    """Why it matters: what a process in the pod can then do to the node."""


RELAXATIONS: tuple[Relaxation, ...] = (
    Relaxation("privileged", "a PRIVILEGED container: full access to the host",
               "every device and capability, no seccomp: root in it is root on the node"),
    Relaxation("hostProcess", "a Windows host process", "it runs on the node itself, outside any container"),
    Relaxation("hostNetwork", "the host's network",
               "the pod binds the node's ports and reaches what listens only on the node"),
    Relaxation("hostPID", "the host's processes",
               "the pod sees every process of the node, with its command line and environment"),
    Relaxation("hostIPC", "the host's IPC", "the pod shares the node's shared memory and semaphores"),
    Relaxation("allowPrivilegeEscalation", "privilege escalation",
               "a setuid program gains more privileges than the process that started it"),
    Relaxation("capabilities", "capabilities {detail}",
               "kubetrain drops every capability by default: each added one is a power over the kernel"),
    Relaxation("runAsUser", "running as root (uid 0)", "a process that escapes the container is root on the node"),
    Relaxation("seccompProfile", "no seccomp profile (Unconfined)",
               "every system call is open to the program, the kernel's rarely used ones included"),
    Relaxation("appArmorProfile", "no AppArmor profile (Unconfined)", "the node's AppArmor confinement is off"),
    Relaxation("procMount", "an unmasked /proc (procMount Unmasked)",
               "what the runtime hides of the kernel in /proc is readable and writable"),
    Relaxation("hostPath:/", "the host's whole filesystem ({detail})",
               "every file of the node, writable unless mounted read-only"),
    Relaxation("hostPath:socket", "the container runtime's socket ({detail})",
               "whoever holds it starts containers of their choosing on the node: root there"),
    Relaxation("hostPath", "a folder of the host ({detail})", "the node's files, writable unless mounted read-only"),
    Relaxation("hostPort", "a port of the host ({detail})", "the pod takes the port on the node's own address"),
)
"""Every relaxation kubetrain warns of, in the order a warning list reads them (the loudest first)."""

BY_KEY = {relaxation.key: relaxation for relaxation in RELAXATIONS}

RUNTIME_SOCKETS = ("docker.sock", "containerd.sock", "crio.sock", "cri-dockerd.sock", "podman.sock")
"""Host files that control the node's containers: a mount of one is a way to root on the node."""

PREFIX = "RELAXES kubetrain's security defaults"
"""How every relaxation warning reads after its path (`spec.podTemplate.spec.hostPID: RELAXES ...`)."""


@dataclass(frozen=True)
class Found:
    """A relaxation a job asks for: where (a path relative to what was read) and its own value."""

    path: Path
    relaxation: Relaxation
    detail: str = ""

    @property
    def what(self) -> str:
        """What it gives the pod and why that matters, as a warning says it."""
        return f"{self.relaxation.what.format(detail=self.detail)}; {self.relaxation.why}"


def warning(path: Path, found: Found, *, on_kubernetes: bool = False) -> str:
    """The one wording of a relaxation warning: `<path>: RELAXES kubetrain's security defaults: <what>; <why>`.
    `on_kubernetes` says where, for a warning given where no pod is made (`kubetrain validate`)."""
    where = " on Kubernetes" if on_kubernetes else ""
    return f"{format_path(path)}: {PREFIX}{where}: {found.what}"


# -- a pod template ---------------------------------------------------------------------------------------------


def template_relaxations(template: Mapping[str, Any] | None) -> Iterator[Found]:
    """Each relaxation a PodTemplateSpec asks for, at its path in the template (`spec.hostNetwork`,
    `spec.containers[0].securityContext.privileged`, `spec.volumes[1].hostPath`), pod-level first."""
    spec = (template or {}).get("spec") or {}
    if not isinstance(spec, Mapping):
        return
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key) is True:
            yield Found(("spec", key), BY_KEY[key])
    yield from _context(spec.get("securityContext"), ("spec", "securityContext"))
    for i, volume in enumerate(_items(spec.get("volumes"))):
        host = volume.get("hostPath")
        if host is not None:
            yield _host_path(("spec", "volumes", i, "hostPath"), (host or {}).get("path"))
    annotations = ((template or {}).get("metadata") or {}).get("annotations") or {}
    for list_key in ("initContainers", "containers", "ephemeralContainers"):
        for i, container in enumerate(_items(spec.get(list_key))):
            where: Path = ("spec", list_key, i, "securityContext")
            context = container.get("securityContext")
            if isinstance(context, Mapping):
                if context.get("privileged") is True:
                    yield Found((*where, "privileged"), BY_KEY["privileged"])
                if context.get("allowPrivilegeEscalation") is True:
                    yield Found((*where, "allowPrivilegeEscalation"), BY_KEY["allowPrivilegeEscalation"])
                added = (context.get("capabilities") or {}).get("add") or []
                if added:
                    yield _capabilities((*where, "capabilities", "add"), added)
                if context.get("procMount") == "Unmasked":
                    yield Found((*where, "procMount"), BY_KEY["procMount"])
            yield from _context(context, where)
            for j, port in enumerate(_items(container.get("ports"))):
                if port.get("hostPort"):
                    yield Found(("spec", list_key, i, "ports", j, "hostPort"), BY_KEY["hostPort"],
                                str(port["hostPort"]))
            name = container.get("name")
            if isinstance(annotations, Mapping) and isinstance(name, str):
                key = f"container.apparmor.security.beta.kubernetes.io/{name}"
                if annotations.get(key) == "unconfined":
                    yield Found(("metadata", "annotations", key), BY_KEY["appArmorProfile"])


def _context(context: Any, where: Path) -> Iterator[Found]:
    """What a pod's or a container's securityContext relaxes of the fields both have."""
    if not isinstance(context, Mapping):
        return
    if (context.get("windowsOptions") or {}).get("hostProcess") is True:
        yield Found((*where, "windowsOptions", "hostProcess"), BY_KEY["hostProcess"])
    if _is_root(context.get("runAsUser")):
        yield Found((*where, "runAsUser"), BY_KEY["runAsUser"])
    if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
        yield Found((*where, "seccompProfile", "type"), BY_KEY["seccompProfile"])
    if (context.get("appArmorProfile") or {}).get("type") == "Unconfined":
        yield Found((*where, "appArmorProfile", "type"), BY_KEY["appArmorProfile"])


def _is_root(uid: Any) -> bool:
    return uid == 0 and not isinstance(uid, bool)  # `runAsUser: false` is a mistake, not uid 0


def _items(value: Any) -> list[Mapping[str, Any]]:
    """The mappings of a list (anything else: none), each at its own index."""
    if not isinstance(value, list):
        return []
    return [item if isinstance(item, Mapping) else {} for item in value]


def _host_path(path: Path, folder: Any) -> Found:
    text = str(folder) if folder is not None else ""
    if text.rstrip("/") == "" and text:
        return Found(path, BY_KEY["hostPath:/"], text)
    if text.rsplit("/", 1)[-1] in RUNTIME_SOCKETS:
        return Found(path, BY_KEY["hostPath:socket"], text)
    return Found(path, BY_KEY["hostPath"], text)


def _capabilities(path: Path, added: list[Any]) -> Found:
    """Added capabilities; SYS_ADMIN said to allow privilege escalation (Kubernetes refuses it without)."""
    named = [f"{cap} (which allows privilege escalation)" if cap == "SYS_ADMIN" else str(cap) for cap in added]
    return Found(path, BY_KEY["capabilities"], ", ".join(named))


# -- typed settings ---------------------------------------------------------------------------------------------


def settings_relaxations(settings: ReplicaSettings) -> Iterator[Found]:
    """Each relaxation a role's typed settings ask for, at a path of snake_case attributes (`("security",
    "host_network")`, `("mounts", 0, "src")`): the render's `Ctx.where` names the field the user wrote. The
    same entries as a pod template's: `security.hostNetwork` is warned as a template's `hostNetwork` is."""
    sec = settings.security
    if sec is not None:
        if sec.privileged:
            yield Found(("security", "privileged"), BY_KEY["privileged"])
        if sec.host_network:
            yield Found(("security", "host_network"), BY_KEY["hostNetwork"])
        if sec.host_ipc:
            yield Found(("security", "host_ipc"), BY_KEY["hostIPC"])
        if sec.allow_privilege_escalation:
            yield Found(("security", "allow_privilege_escalation"), BY_KEY["allowPrivilegeEscalation"])
        if sec.capabilities:
            yield _capabilities(("security", "capabilities"), list(sec.capabilities))
        if sec.run_as_uid == 0:
            yield Found(("security", "run_as_uid"), BY_KEY["runAsUser"])
        if sec.seccomp_profile_type == "Unconfined":
            yield Found(("security", "seccomp_profile_type"), BY_KEY["seccompProfile"])
    for i, mount in enumerate(settings.mounts or []):
        if getattr(mount, "type", None) == "bind":
            yield _host_path(("mounts", i, "src"), getattr(mount, "src", None))


def job_relaxations(job: TrainJob) -> list[tuple[Path, Found]]:
    """Every relaxation of `job` at the spec path the user wrote (`spec.security.hostNetwork`,
    `spec.roles.worker.podTemplate.spec.hostPID`, `spec.mounts[0].src`), each once: the job's own settings, then
    each role's own (what a role inherits is the job's, said at the job's path)."""
    out: list[tuple[Path, Found]] = []
    owners: list[tuple[Path, Any, set[str] | None]] = [(("spec",), job.spec, None)]
    for name, role in (job.spec.roles or {}).items():
        owners.append((("spec", "roles", name), role, set(role.model_fields_set)))
    for where, settings, given in owners:
        security = getattr(settings, "security", None)
        sec_given = set(security.model_fields_set) if security is not None else set()
        for found in settings_relaxations(settings):
            head = found.path[0]
            if given is not None and head not in given:
                continue  # inherited from the job: said there
            if given is not None and head == "security" and found.path[1] not in sec_given:
                continue
            path = tuple(to_camel(p) if isinstance(p, str) else p for p in found.path)
            out.append(((*where, *path), found))
        template = getattr(settings, "pod_template", None)
        if template and (given is None or "pod_template" in given):
            out += [((*where, "podTemplate", *found.path), found) for found in template_relaxations(template)]
    return out


__all__ = [
    "BY_KEY",
    "PREFIX",
    "RELAXATIONS",
    "RUNTIME_SOCKETS",
    "Found",
    "Relaxation",
    "job_relaxations",
    "settings_relaxations",
    "template_relaxations",
    "warning",
]
