"""Mounts → pod volumes, container volumeMounts, and init containers (git-sync).

| mount      | pod volume                                    | notes |
|------------|-----------------------------------------------|-------|
| bind       | hostPath                                      | |
| volume     | persistentVolumeClaim (claimName = src)       | subPath, readOnly |
| device     | hostPath of the device                        | makes the pod privileged: a warning |
| nfs        | nfs                                           | |
| emptyDir   | emptyDir (medium, sizeLimit)                  | |
| configMap  | configMap (items, defaultMode)                | |
| secret     | secret (items, defaultMode)                   | |
| gitSync    | emptyDir filled once by a git-sync init container; the checkout is mounted at dst | |
| s3         | none: refused (mount a PVC of your S3 CSI driver as `type: volume`) | |
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ....contract.expansion import escape
from ....contract.naming import child_name
from ....jobspec import format_path
from ....jobspec.mounts import (
    BindMount,
    ConfigMapMount,
    DeviceMount,
    EmptyDirMount,
    GitSyncMount,
    NfsMount,
    S3Mount,
    SecretMount,
    VolumeMount,
)
from .context import FILES_DIR, Ctx, RoleView
from .entrypoint import DEBUG_DIR

SHM_VOLUME = "dshm"
FILES_VOLUME = "kubetrain-files"
DEBUG_VOLUME = "kubetrain-debug"
GIT_ROOT = "/git"
GIT_LINK = "checkout"
GIT_PASSWORD_KEY = "password"
"""Key of the password (or token) in a gitSync mount's passwordSecret."""


@dataclass
class VolumePlan:
    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)
    init_containers: list[dict[str, Any]] = field(default_factory=list)
    privileged_by: list[str] = field(default_factory=list)
    """Device mounts that make the pod privileged."""


def volume_plan(ctx: Ctx, view: RoleView, *, debug: bool) -> VolumePlan:
    out = VolumePlan()
    taken: dict[str, str] = {}  # mount path → what uses it, so two mounts never share a path

    def claim(path: str, what: str, where: tuple[str | int, ...]) -> bool:
        if path in taken:
            ctx.problems.add(where, f"mounts {path}, which {taken[path]} already uses")
            return False
        taken[path] = what
        return True

    res = view.settings.resources
    if res is not None and res.shm not in (None, False):
        claim("/dev/shm", "resources.shm", ctx.where(view.role, "resources", "shm"))
        empty: dict[str, Any] = {"medium": "Memory"}
        if isinstance(res.shm, str):
            empty["sizeLimit"] = res.shm
        out.volumes.append({"name": SHM_VOLUME, "emptyDir": empty})
        out.mounts.append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
    if view.wiring.files:
        claim(FILES_DIR, "the job's files (hostfile)", ("spec",))
        out.volumes.append({"name": FILES_VOLUME, "configMap": {"name": files_configmap_name(ctx)}})
        out.mounts.append({"name": FILES_VOLUME, "mountPath": FILES_DIR, "readOnly": True})
    _controller_files(ctx, view, out, claim)
    if debug:
        claim(DEBUG_DIR, "runMode Debug", ("spec", "runMode"))
        out.volumes.append({"name": DEBUG_VOLUME, "emptyDir": {}})
        out.mounts.append({"name": DEBUG_VOLUME, "mountPath": DEBUG_DIR})

    for i, mount in enumerate(view.settings.mounts or []):
        where = ctx.where(view.role, "mounts", i)
        name = f"mount-{i}"
        if isinstance(mount, S3Mount):
            ctx.problems.unsupported(
                where, "an s3 mount", ctx.flavor.name, (),
                hint="create a PersistentVolumeClaim with your S3 CSI driver and mount it as type: volume",
            )
            continue
        dst: str = (mount.dst or mount.src) if isinstance(mount, DeviceMount) else mount.dst
        if not claim(dst, f"mount {i}", where):
            continue
        volume, item = _volume(mount, name)
        if isinstance(mount, DeviceMount):
            out.privileged_by.append(f"device {mount.src} ({_show(where)})")
            if mount.perm != "rwm":
                ctx.warn(f"{_show(where)}: a privileged container can use {mount.src} with every permission; "
                         f"perm {mount.perm!r} is not enforced on Kubernetes")
        if isinstance(mount, GitSyncMount):
            out.init_containers.append(_git_sync(ctx, mount, name, len(out.init_containers)))
        out.volumes.append({"name": name, **volume})
        out.mounts.append({"name": name, "mountPath": dst, **item})
    return out


def path_key(path: str) -> str:
    """The files ConfigMap's key of a file a controller places at `path` (`/etc/volcano/ps.host` →
    `etc--volcano--ps.host`): a ConfigMap key has no slash."""
    return path.strip("/").replace("/", "--")


def _controller_files(ctx: Ctx, view: RoleView, out: VolumePlan, claim: Any) -> None:
    """The files the job's controller places at absolute paths (`/etc/volcano/<task>.host`, `/etc/mpi/hostfile`)
    on a flavor whose engine does not: each folder a volume of the files ConfigMap, with those files only."""
    folders: dict[str, list[str]] = {}
    for path in sorted(view.wiring.paths):
        folders.setdefault(path.rpartition("/")[0] or "/", []).append(path)
    for i, (folder, paths) in enumerate(sorted(folders.items())):
        name = f"kubetrain-controller-{i}"
        if not claim(folder, "the controller's files", ("spec", "controller")):
            continue
        items = [{"key": path_key(p), "path": p.rpartition("/")[2], **({"mode": 0o555} if p.endswith(".sh") else {})}
                 for p in paths]  # a script executable, as the MPI operator mounts discover_hosts.sh
        out.volumes.append({"name": name, "configMap": {"name": files_configmap_name(ctx), "items": items}})
        out.mounts.append({"name": name, "mountPath": folder, "readOnly": True})


def _show(path: tuple[str | int, ...]) -> str:
    return format_path(path)


def _volume(mount: Any, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod volume source, extra fields of the container's volumeMount)."""
    readonly: dict[str, Any] = {"readOnly": True} if getattr(mount, "readonly", False) else {}
    if isinstance(mount, BindMount):
        return {"hostPath": {"path": mount.src}}, readonly
    if isinstance(mount, VolumeMount):
        claim: dict[str, Any] = {"claimName": mount.src, **readonly}
        item = dict(readonly)
        if mount.sub_path:
            item["subPath"] = mount.sub_path
        return {"persistentVolumeClaim": claim}, item
    if isinstance(mount, DeviceMount):
        return {"hostPath": {"path": mount.src}}, {}
    if isinstance(mount, NfsMount):
        return {"nfs": {"server": mount.server, "path": mount.path, **readonly}}, readonly
    if isinstance(mount, EmptyDirMount):
        empty: dict[str, Any] = {}
        if mount.medium:
            empty["medium"] = mount.medium
        if mount.size_limit is not None:
            empty["sizeLimit"] = mount.size_limit
        return {"emptyDir": empty}, {}
    if isinstance(mount, ConfigMapMount | SecretMount):
        source: dict[str, Any] = (
            {"name": mount.name} if isinstance(mount, ConfigMapMount) else {"secretName": mount.name}
        )
        if mount.items:
            source["items"] = [{"key": k, "path": p} for k, p in mount.items.items()]
        if mount.default_mode is not None:
            source["defaultMode"] = mount.default_mode
        key = "configMap" if isinstance(mount, ConfigMapMount) else "secret"
        return {key: source}, {"readOnly": True}
    if isinstance(mount, GitSyncMount):
        # git-sync checks out into <root>/.worktrees/<hash> and points the link at it; mounting the
        # link (subPath) puts the checkout itself at dst.
        return {"emptyDir": {}}, {"subPath": GIT_LINK}
    raise TypeError(f"unknown mount {type(mount).__name__}")


def _git_sync(ctx: Ctx, mount: GitSyncMount, volume: str, n: int) -> dict[str, Any]:
    """A one-time git-sync (v4) init container: the checkout is in place before the program starts."""
    ref = mount.revision if mount.revision and mount.revision != "HEAD" else (mount.branch or "HEAD")
    args = [f"--repo={mount.repository}", f"--ref={ref}", f"--root={GIT_ROOT}", f"--link={GIT_LINK}",
            "--one-time"]
    env: list[dict[str, Any]] = []
    if mount.username is not None:
        args.append(f"--username={mount.username}")
    if mount.password_secret is not None:
        env.append({"name": "GITSYNC_PASSWORD",
                    "valueFrom": {"secretKeyRef": {"name": mount.password_secret, "key": GIT_PASSWORD_KEY}}})
    container: dict[str, Any] = {
        "name": f"git-sync-{n}",
        "image": ctx.options.git_sync_image,
        "args": [escape(arg) for arg in args],  # a URL's `$(...)` must not be expanded
        "volumeMounts": [{"name": volume, "mountPath": GIT_ROOT}],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    if env:
        container["env"] = env
    return container


def files_configmap_name(ctx: Ctx) -> str:
    return child_name(ctx.layout.base, "files")


def files_size(files: dict[str, str]) -> int:
    return sum(len(k.encode()) + len(v.encode()) for k, v in files.items())


__all__ = ["DEBUG_VOLUME", "FILES_VOLUME", "SHM_VOLUME", "VolumePlan", "files_configmap_name", "files_size",
           "path_key", "volume_plan"]
