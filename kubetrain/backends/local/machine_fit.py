"""This machine's verdict on a job: what a local run makes of the fields a process does not get through its env.

`plan()` wires a framework the same for every backend; a pod gets the rest (mounts, GPUs, a size the
cluster can hold, the run policy's preemption fields) from the cluster. A local run has only this machine,
so each such field is judged here before the job is created: honoured (a bind mount whose src is its dst;
each replica its own GPUs in `CUDA_VISIBLE_DEVICES`), approximated with a warning naming its field path, or
refused with its path (`Refusal`), so nothing is silently dropped and nothing is recorded that cannot run.
The verdict is a `MachineFit`; the launch record (`launch.LaunchRecord.from_plan`) takes its env from it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...contract.hostnames import name_pattern
from .pod_fields import pod_fields_of

if TYPE_CHECKING:
    from ...jobspec import JobSpec, ReplicaSettings
    from ...plan import Plan
    from .gpus import GpuInventory, GpuRequest

FieldPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Refusal:
    """A field this machine cannot give the job: the job is not created."""

    path: FieldPath
    """Where in the spec: `("spec", "mounts", 1)`."""
    message: str
    hint: str | None = None


@dataclass(frozen=True)
class MachineFit:
    """What a local run makes of the fields a replica does not get through the framework's env or the
    user's: what it refuses, how it approximates the rest (warnings naming the field), and what it adds to
    each replica's env (its GPUs)."""

    refusals: tuple[Refusal, ...] = ()
    warnings: tuple[str, ...] = ()
    replica_env: dict[str, dict[str, str]] = field(default_factory=dict)
    """Replica key (`worker-0`) → variables, under the user's env."""


MOUNTS_TABLE = "/proc/self/mounts"
"""Where a local run looks for an nfs export this machine has mounted already."""


def machine_fit(
    plan: Plan,
    *,
    base_dir: str,
    gpus: Callable[[], GpuInventory],
    mounts_table: str = MOUNTS_TABLE,
    folders: Mapping[str, str] | None = None,
) -> MachineFit:
    """Mounts, GPUs, cleanPodPolicy and the preemption fields of `plan`'s job on this machine. `gpus` is
    asked only when the job asks for GPUs; `base_dir` is where a relative bind mount src resolves; `folders`,
    where each role's processes start (None: `role_working_dirs(plan, base_dir)`).

    | field | locally |
    |---|---|
    | bind mount | honoured when src is dst; else the program sees src at its own path (warning) |
    | device mount | honoured at src (the device's own permissions apply); dst ≠ src, perm: warning |
    | nfs mount | honoured where this machine mounted the export (warning if not at dst); else refused |
    | emptyDir mount | warning: not created (the program makes its own scratch folder) |
    | volume, configMap, secret, s3, gitSync mount | refused: nothing on this machine holds them |
    | resources.gpu, migProfile, limits nvidia.com/gpu | each replica its own GPUs; too few: refused |
    | fractional gpu, gpuMemory, MIG without MIG devices | warning: shared or whole GPUs, no limits |
    | runPolicy.cleanPodPolicy None | warning: replicas still running at the end are stopped (as Running) |
    | scheduling.preemptionLimit, terminateAfterPreemption | warning: nothing preempts a local job |
    | replicas × procsPerReplica | past the open-file limit or 32 per core: refused, with the numbers |
    | run.python | a binary, a folder without __main__.py, an unreadable file, `python -m` alone: refused |
    | env names that are not shell names (`my.var`) | warning: the program gets them, a shell cannot |
    """
    spec = plan.job.spec
    refusals: list[Refusal] = []
    warnings: list[str] = []
    for where, mount in _mounts(spec):
        _mount_verdict(where, mount, base_dir, mounts_table, refusals, warnings)
    policy = spec.run_policy
    if policy.clean_pod_policy == "None":
        warnings.append(
            "spec.runPolicy.cleanPodPolicy: None is approximated locally as Running: replicas still running when "
            "the job ends are stopped, since a process cannot outlive its supervisor without becoming an orphan; "
            "every replica's log stays for `kubetrain logs`"
        )
    if spec.scheduling.preemption_limit is not None:
        warnings.append(
            "spec.scheduling.preemptionLimit: has no effect locally: nothing preempts a local job (a replica "
            "killed by a signal is a failure, under restartPolicy and runPolicy.backoffLimit)"
        )
    if spec.scheduling.terminate_after_preemption:
        warnings.append(
            "spec.scheduling.terminateAfterPreemption: has no effect locally: nothing preempts a local job"
        )
    size = _size_verdict(plan)
    if size is not None:
        refusals.append(size)
    _program_verdicts(plan, folders or role_working_dirs(plan, base_dir), refusals, warnings)
    _contract_verdicts(plan, refusals, warnings)
    requests, notes, paths = _gpu_requests(plan)
    warnings += notes
    replica_env: dict[str, dict[str, str]] = {}
    if any(r.whole or r.shared or r.mig for r in requests):
        from .gpus import assign_gpus

        assignment = assign_gpus(requests, gpus())
        refusals += [Refusal(paths[path], message, hint) for path, message, hint in assignment.problems]
        warnings += assignment.warnings
        replica_env = assignment.env
    return MachineFit(tuple(dict.fromkeys(refusals)), tuple(dict.fromkeys(warnings)), replica_env)


# -- how many processes this machine can hold ------------------------------------------------------------

FDS_PER_PROCESS = 4
"""What one local process costs the supervisor in open files: its stdout and stderr pipes, its pidfd, its
log; and before it starts, its replica's port is held by a bound socket."""
FDS_RESERVED = 64
"""Open files the supervisor needs besides its processes' (the store, its wake pipe, Python's own)."""
PROCS_PER_CORE = 32
"""The most local processes per core: past that a training job thrashes rather than runs."""


def _size_verdict(plan: Plan) -> Refusal | None:
    """A refusal, with the numbers, for more processes than this machine can supervise: by the open-file
    limit (`ulimit -n`) or by its cores. Judged from the plan's counts, before any port is bound."""
    import resource

    processes = sum(w.replicas * len(w.processes) for w in plan.roles)
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    fit_files = processes if soft == resource.RLIM_INFINITY else max(0, (soft - FDS_RESERVED) // FDS_PER_PROCESS)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    fit_cores = cores * PROCS_PER_CORE
    if processes <= min(fit_files, fit_cores):
        return None
    spec = plan.job.spec
    counts = ", ".join(f"{w.role}: {w.replicas}×{len(w.processes)}" for w in plan.roles if w.processes)
    what = f"{processes} local processes ({counts} replicas×processes)"
    if processes > fit_files:
        return Refusal(
            ("spec", "replicas") if spec.roles is None else ("spec", "roles"),
            f"{what} need about {processes * FDS_PER_PROCESS + FDS_RESERVED} open files; this machine's limit "
            f"(ulimit -n) is {soft}, enough for {fit_files}",
            "raise the limit (ulimit -n), run fewer replicas or processes per replica, or run on Kubernetes",
        )
    return Refusal(
        ("spec", "replicas") if spec.roles is None else ("spec", "roles"),
        f"{what} are more than this machine's {cores} cores can run ({PROCS_PER_CORE} per core: {fit_cores})",
        "run fewer replicas or processes per replica locally, or run on Kubernetes",
    )


# -- what each replica runs: the program must be there, and be what `run` says it is ----------------------

_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PYTHON = re.compile(r"python[0-9.]*")
_HEAD_BYTES = 4096
_BINARY_KINDS = (
    (b"\x7fELF", "an ELF executable"),
    (b"\xcf\xfa\xed\xfe", "a Mach-O executable"),
    (b"MZ", "a Windows executable"),
)


def _program_verdicts(
    plan: Plan, folders: Mapping[str, str], refusals: list[Refusal], warnings: list[str]
) -> None:
    """Refused up front, with the field path: a `run.python` script that is unreadable or not Python
    source (a binary given as `python prog`), and `python -m` with no module after it. Warned: env names a
    shell cannot hold (`my.var`): the program gets them (as in a pod), but `export my.var=...` is no shell's."""
    spec = plan.job.spec
    for role, settings in plan.settings.items():
        run = settings.run
        if run is not None and run.python and not _skipped(run.python[0]):
            where = (*setting_path(spec, role, "run", "python"), 0)
            # Where Python looks for it: the folder the role's processes start in (`role_working_dirs`).
            verdict = _python_script(run.python[0], folders[role])
            if verdict is not None:
                refusals.append(Refusal(where, *verdict))
        # `kubetrain run -- python -m` (run: {python: [-m]}), or exec: [python3, -m]: Python would only print its usage.
        for name, argv in (("python", ["python", *(run.python or [])]), ("exec", run.exec or [])) if run else ():
            if len(argv) > 1 and _PYTHON.fullmatch(os.path.basename(argv[0])) and argv[-1] == "-m":
                refusals.append(
                    Refusal(
                        setting_path(spec, role, "run", name),
                        f"`{' '.join(argv)}` names no module after -m",
                        "python -m MODULE [args...], e.g. run: {module: [my_pkg.train]}",
                    )
                )
        for i, var in enumerate(settings.env or []):
            if not _SHELL_NAME.fullmatch(var.name):
                at = _show((*setting_path(spec, role, "env"), i, "name"))
                warnings.append(
                    f"{at}: {var.name!r} is not a shell variable name: the replicas' programs get it (as in a pod), "
                    "but no shell can export it, so `kubetrain attach` shells and `attach --print` lack it"
                )


def _contract_verdicts(plan: Plan, refusals: list[Refusal], warnings: list[str]) -> None:
    """What a local run cannot give as the controller (or the image) would, refused before anything starts:
    the image's ENTRYPOINT, a file the controller places at an absolute path that a command names literally,
    a contract's own cases (`Plan.local_problems`). Warned: a command naming a host name the controller makes
    resolvable on a cluster, a fieldRef no local replica answers."""
    spec = plan.job.spec
    refusals += [Refusal(p.path, p.message, p.hint) for p in plan.local_problems]
    kind = spec.controller.kind if spec.controller is not None else ""
    names = name_pattern(list(plan.names))
    literal = _paths_pattern(plan.paths)
    first = {r.role: r for r in reversed(plan.replicas)}
    for wiring in plan.roles:
        role, settings = wiring.role, plan.settings[wiring.role]
        run_at = setting_path(spec, role, "run")
        form = _run_form(settings)
        for proc in wiring.processes[:1]:
            if proc.entrypoint:
                image = settings.image or "its image"
                refusals.append(Refusal(
                    (*run_at, "entrypoint"),
                    f"runs the image's own ENTRYPOINT ({image}): the program is in the image, not on this machine",
                    "give the container its command, the program the ENTRYPOINT runs (docker image inspect "
                    f"{image} shows it as Entrypoint and Cmd), e.g. command: [python, /app/train.py]",
                ))
                continue
            text = " ".join(proc.argv)
            if literal is not None and (found := literal.search(text)) is not None:
                path = found.group(0)
                refusals.append(Refusal(
                    (*run_at, form),
                    f"names {path}, a file the {kind} controller places in the pod; kubetrain cannot place it at "
                    "that path on this machine (it would take root, or a mount namespace many machines do not "
                    f"give an unprivileged user) and gives it at $KUBETRAIN_FILES_ROOT{path} instead",
                    f'read "$KUBETRAIN_FILES_ROOT{path}" (unset on Kubernetes, so the same command works there), or '
                    "the variables the controller gives with the same content (docs/foreign.md)",
                ))
            for name in sorted({m.group(0) for m in names.finditer(text)} if names is not None else ()):
                warnings.append(
                    f"{_show((*run_at, form))}: names {name}, a host name the {kind} controller makes resolvable "
                    "on a cluster; locally nothing resolves it (the controller's variables, and env values that "
                    "name a replica, give this machine's address instead: pass it through the environment)"
                )
        replica = first.get(role)
        if replica is None:
            continue
        answered = pod_fields_of(replica, plan.name)
        for i, var in enumerate(settings.env or []):
            ref = var.value_from.field_ref if var.value_from is not None else None
            if ref is not None and ref.field_path not in answered:
                warnings.append(
                    f"{_show((*setting_path(spec, role, 'env'), i))}: {var.name} reads {ref.field_path} through "
                    "the downward API, which no local replica has: it is empty locally"
                )


def _run_form(settings: ReplicaSettings) -> str:
    run = settings.run
    if run is None:
        return "exec"
    return next((name for name, attr in (("python", "python"), ("module", "module"), ("exec", "exec"),
                                          ("customCommand", "custom_command")) if getattr(run, attr) is not None),
                "exec")


def _paths_pattern(paths: Mapping[str, str]) -> re.Pattern[str] | None:
    """An absolute path under any folder a controller places files in (`/etc/volcano/...`), as a command
    writes it."""
    folders = sorted({os.path.dirname(p) for p in paths}, key=len, reverse=True)
    if not folders:
        return None
    # Not `$KUBETRAIN_FILES_ROOT/etc/...` (nor any longer path ending so): only the absolute path itself.
    return re.compile(rf"(?<![\w}}.~/-])(?:{'|'.join(re.escape(f) for f in folders)})(?:/[^\s'\"`;|&)(<>$]*)?")


def missing_scripts(plan: Plan, folders: Mapping[str, str]) -> list[Refusal]:
    """A refusal per role whose `run.python` script is not there, with the path looked for: in the role's
    folder (`folders`, from `role_working_dirs`), where its processes start and Python looks. Only a real local
    run asks this: a dry run or a Kubernetes render must not need the file (in a pod, the script is in the
    image), so `machine_fit` leaves a missing script alone."""
    spec = plan.job.spec
    refusals = []
    for role, settings in plan.settings.items():
        run = settings.run
        if run is None or not run.python or _skipped(run.python[0]):
            continue
        script = run.python[0]
        looked = os.path.normpath(os.path.join(folders[role], script))
        if not os.path.exists(looked):
            where = (*setting_path(spec, role, "run", "python"), 0)
            # A job-level `run` is looked for in each role's folder: say which role's lacks it.
            whose = "" if where[:3] == ("spec", "roles", role) or spec.roles is None else f" (role {role})"
            refusals.append(Refusal(
                where,
                f"script {script} not found{whose}: there is no {looked}",
                "relative paths resolve against the role's workingDir, else the job's, else the job file's "
                "folder; fix the path or the folder",
            ))
    return refusals


def role_working_dirs(plan: Plan, base_dir: str) -> dict[str, str]:
    """Each role's folder, where its processes start and relative paths in its `run` resolve: its settings'
    workingDir (the role's, else the job's, else its podTemplate main container's: `plan.settings_for`) under
    `base_dir` (the job file's folder; an absolute workingDir stays as it is), else `base_dir` itself —
    so a job runs the same from any current directory, and each role where its pods would start."""
    return {
        role: os.path.realpath(os.path.join(base_dir, settings.working_dir or ""))
        for role, settings in plan.settings.items()
    }


def _skipped(arg: str) -> bool:
    # An option (`-c`, `-X dev`) or a value the kubelet's rules expand: not a file to look at up front.
    return arg.startswith("-") or "$(" in arg


def _python_script(script: str, folder: str) -> tuple[str, str | None] | None:
    """(message, hint) when Python cannot run `script` (relative to `folder`) as its program; None when it can
    (as far as a look at its first bytes tells)."""
    found = os.path.join(folder, script)
    if not os.path.exists(found):
        # Not refused: a dry run (and the parity harness) plans jobs whose scripts are not written yet, and a
        # missing script fails its replica at once with Python's own message.
        return None
    if os.path.isdir(found):
        if os.path.isfile(os.path.join(found, "__main__.py")):
            return None
        return f"{found} is a folder without __main__.py", "name the script inside it"
    try:
        with open(found, "rb") as handle:
            head = handle.read(_HEAD_BYTES)
    except OSError as exc:
        return f"script {found} cannot be read: {exc.strerror or exc}", None
    if b"\0" not in head or found.endswith((".pyc", ".pyz")) or head.startswith(b"PK\x03\x04"):
        return None  # source; or bytecode or a zip application, which Python runs too
    kind = next((name for magic, name in _BINARY_KINDS if head.startswith(magic)), "a binary file")
    return (
        f"{found} is {kind}, not Python source",
        f"run a program with exec: run: {{exec: [{script}, ...]}}",
    )


def setting_path(spec: JobSpec, role: str | None, *names: str) -> FieldPath:
    """Where a replica setting of `role` is written: in the role's overrides when the role sets it, else the
    job's (`("spec", "roles", "worker", "resources", "gpu")`). `names` are snake_case attributes or keys."""
    override = spec.roles.get(role) if spec.roles is not None and role is not None else None
    written: Any = override
    for name in names:
        if isinstance(written, dict):
            written = written.get(name)
        elif written is not None and name in getattr(written, "model_fields_set", ()):
            written = getattr(written, name)
        else:
            written = None
    camel = tuple(name if "/" in name else re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name) for name in names)
    return ("spec", "roles", role, *camel) if written is not None and role is not None else ("spec", *camel)


def _show(path: FieldPath) -> str:
    from ...jobspec import format_path

    return format_path(path)


def _mounts(spec: JobSpec) -> list[tuple[FieldPath, Any]]:
    """Each mount as written, with its path: the job's (every role has them), then each role's own."""
    out: list[tuple[FieldPath, Any]] = [(("spec", "mounts", i), m) for i, m in enumerate(spec.mounts or [])]
    for name, role in (spec.roles or {}).items():
        out += [(("spec", "roles", name, "mounts", i), m) for i, m in enumerate(role.mounts or [])]
    return out


def _mount_verdict(
    where: FieldPath, mount: Any, base_dir: str, mounts_table: str, refusals: list[Refusal], warnings: list[str]
) -> None:
    """Honoured (nothing said), approximated (a warning), or refused: one mount on this machine."""
    at = _show(where)
    kind = mount.type
    readonly = getattr(mount, "readonly", False)
    if kind == "bind":
        src = os.path.normpath(os.path.join(base_dir, mount.src))
        _at_own_path(at, f"bind mount dst {mount.dst} is not created locally; the program sees src {src}", src,
                     mount.dst, readonly, warnings)
    elif kind == "device":
        dst = mount.dst or mount.src
        notes = []
        if not os.path.exists(mount.src):
            notes.append(f"device {mount.src} does not exist on this machine")
        if os.path.normpath(dst) != os.path.normpath(mount.src):
            notes.append(f"device {mount.src} is not also at {dst} locally: the program finds it at {mount.src}")
        if mount.perm != "rwm":
            notes.append(f"perm {mount.perm} is not enforced locally: the device file's own permissions apply")
        if notes:
            warnings.append(f"{at}: {'; '.join(notes)}")
    elif kind == "nfs":
        export = f"{mount.server}:{mount.path}"
        mounted = _nfs_mountpoint(export, mounts_table)
        if mounted is None:
            refusals.append(Refusal(
                where,
                f"nfs export {export} is not mounted on this machine, and a local run cannot mount it",
                f"mount it (sudo mount -t nfs {export} <folder>) and run again, or mount a folder with the same "
                f"files instead: type=bind,src=<folder>,dst={mount.dst}",
            ))
        else:
            _at_own_path(at, f"nfs export {export} is mounted on this machine at {mounted}, not at {mount.dst}; "
                         f"the program sees it at {mounted}", mounted, mount.dst, readonly, warnings)
    elif kind == "emptyDir":
        warnings.append(
            f"{at}: emptyDir {mount.dst} is not created locally; write scratch files under a workingDir-relative "
            "folder or $TMPDIR instead"
        )
    else:
        what, instead = _MISSING.get(kind, ("a {m.type} mount exists only on a cluster", "a folder"))
        refusals.append(Refusal(
            where,
            f"{what.format(m=mount)}: a local run cannot provide it at {mount.dst}",
            f"to run locally, mount {instead.format(m=mount)} instead: type=bind,src=<folder>,dst={mount.dst}",
        ))


_MISSING = {
    "volume": ("PersistentVolumeClaim {m.src} exists only on a cluster", "a folder holding its data"),
    "configMap": ("ConfigMap {m.name} exists only on a cluster", "a folder holding its files"),
    "secret": ("Secret {m.name} exists only on a cluster", "a folder holding its files"),
    "s3": ("s3 bucket {m.bucket} is mounted by a CSI driver on a cluster",
           "the bucket where this machine has it (mountpoint-s3, s3fs or rclone mount it in a folder)"),
    "gitSync": ("gitSync of {m.repository} is cloned by an init container on a cluster",
                "a clone of it (git clone {m.repository} <folder>)"),
}
"""Mount type → why a local run has nothing for it, and what to mount in its place."""


def _at_own_path(at: str, moved: str, src: str, dst: str, readonly: bool, warnings: list[str]) -> None:
    """A mount whose files are on this machine at `src`: honoured if that is `dst`, else the program sees
    them at `src` (a warning); readonly is not enforced either way."""
    notes = []
    if os.path.normpath(src) != os.path.normpath(dst):
        notes.append(f"{moved} at its own path — use src paths, or a workingDir-relative path, in the program")
    if readonly:
        notes.append("readonly is not enforced locally")
    if notes:
        warnings.append(f"{at}: {'; '.join(notes)}")


def _nfs_mountpoint(export: str, mounts_table: str) -> str | None:
    """Where this machine has `server:/path` mounted (an nfs or nfs4 mount), if it has."""
    try:
        with open(mounts_table, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) >= 3 and parts[2].startswith("nfs") and parts[0].rstrip("/") == export.rstrip("/"):
            return parts[1].replace("\\040", " ")
    return None


def _gpu_requests(plan: Plan) -> tuple[list[GpuRequest], list[str], dict[str, FieldPath]]:
    """What each replica asks for in GPUs, in replica order; the warnings about what is not applied; each
    request's path as written → as a field path."""
    from ...jobspec.types import parse_quantity
    from .gpus import GpuRequest

    spec = plan.job.spec
    requests: list[GpuRequest] = []
    notes: list[str] = []
    paths: dict[str, FieldPath] = {}
    for wiring in plan.roles:
        role = wiring.role
        settings = plan.settings[role]
        hosts = not wiring.processes
        res = settings.resources
        raw = next(((kind, v) for kind in ("limits", "requests") if (v := (getattr(settings, kind) or {}).get(
            "nvidia.com/gpu")) is not None), None)
        where: FieldPath = ("spec",)
        ask: dict[str, Any] = {}
        if raw is not None:
            where = setting_path(spec, role, raw[0], "nvidia.com/gpu")
            ask = {"whole": int(parse_quantity(raw[1]))}
        elif res is not None and res.mig_profile:
            where = setting_path(spec, role, "resources", "mig_profile")
            ask = {"whole": int(res.gpu or 1), "mig": res.mig_profile}
        elif res is not None and res.gpu is not None and res.gpu >= 1:
            where = setting_path(spec, role, "resources", "gpu")
            ask = {"whole": int(res.gpu)}
        elif res is not None and res.gpu:
            where = setting_path(spec, role, "resources", "gpu")
            ask = {"share": float(res.gpu), "shared": True}
        elif res is not None and res.gpu_memory is not None:
            where = setting_path(spec, role, "resources", "gpu_memory")
            ask = {"shared": True}
        if res is not None and ask.get("whole"):
            if res.gpu_memory is not None:
                notes.append(f"{_show(setting_path(spec, role, 'resources', 'gpu_memory'))}: is not reserved "
                             "locally: each replica has its whole GPUs")
            if res.gpu_limit is not None and res.gpu_limit > ask["whole"]:
                notes.append(f"{_show(setting_path(spec, role, 'resources', 'gpu_limit'))}: is not applied "
                             f"locally: each replica gets {ask['whole']} GPU{'s' if ask['whole'] != 1 else ''}, "
                             "its request")
        path = _show(where)
        paths[path] = where
        requests += [GpuRequest(f"{role}-{i}", role, path, hosts=hosts, **ask) for i in range(wiring.replicas)]
    return requests, notes, paths


__all__ = [
    "MOUNTS_TABLE",
    "FieldPath",
    "MachineFit",
    "Refusal",
    "machine_fit",
    "missing_scripts",
    "role_working_dirs",
    "setting_path",
]
