"""What the Kubernetes-shaped converters (Kubeflow's operator jobs, JobSet, Volcano's Job) share: a container's
argv as kubetrain's program, a pod template as a role's typed settings, and telling kubetrain's own rendering
(a job it rendered converts back to the job it was) from a stranger's (its metadata: `metadata.py`).

Apart from any one converter so that none imports another's module for its helpers.
"""

from __future__ import annotations

import copy
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..contract import labels as kt_labels
from ..frameworks.mpi import sshd_argv
from ..jobspec.errors import Path
from ..plan import FILES_DIR_PLACEHOLDER
from .metadata import KUBETRAIN_OWN, METADATA_FIELDS, is_kubetrain_label, own_filtered
from .template_split import lift_job_level, split_pod_template
from .walker import FieldTree, SourceWalker

_PYTHONS = ("python", "python3")


def program_run(argv: Sequence[Any]) -> tuple[dict[str, Any], str | None]:
    """A container's command + args → a TrainJob `run`, and how it was approximated (None: as written).

    `python script ...` → run.python, `python -m module ...` → run.module, anything else → run.exec. kubetrain
    names the interpreter `python` (locally the one it runs on, in a container the image's)."""
    words = [str(word) for word in argv]
    if not words:
        return {"exec": words}, None
    program = posixpath.basename(words[0])
    if program in _PYTHONS or (program.startswith("python3.") and program[8:].isdigit()):
        how = (
            None
            if words[0] == "python"
            else (
                f"{words[0]} runs as kubetrain's `python`: locally the interpreter kubetrain runs on, in a "
                "container the image's `python`"
            )
        )
        if len(words) >= 3 and words[1] == "-m":
            return {"module": words[2:]}, how
        if len(words) >= 2 and not words[1].startswith("-"):
            return {"python": words[1:]}, how
    return {"exec": words}, None


KUBETRAIN_WIRED_ENV = frozenset(
    {
        "PYTHONUNBUFFERED",
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
        "NODE_RANK",
        "GROUP_RANK",
        "LOCAL_WORLD_SIZE",
        "NPROC_PER_NODE",
        "TF_CONFIG",
        "JAX_COORDINATOR_ADDRESS",
        "JAX_NUM_PROCESSES",
        "JAX_PROCESS_ID",
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE",
        "OMPI_ALLOW_RUN_AS_ROOT",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
        "OMPI_MCA_btl_vader_single_copy_mechanism",
        "OMPI_MCA_orte_keep_fqdn_hostnames",
        "OMPI_MCA_plm_rsh_args",
    }
)
"""Variables kubetrain's frameworks set on every replica (besides KUBETRAIN_* and torchrun's PET_*)."""


KUBETRAIN_VOLUMES = frozenset(
    {"kubetrain-files", "kubetrain-debug", "kubetrain-ssh-keys", "kubetrain-ssh-run", "kubetrain-ssh-auth"}
)
"""Volumes kubetrain's render adds itself (its files ConfigMap, the debug hold, an MPI job's ssh keys)."""


def _wired(name: str) -> bool:
    return name.startswith(("KUBETRAIN_", "PET_")) or name in KUBETRAIN_WIRED_ENV


def is_kubetrain_template(walker: SourceWalker, template: Path) -> bool:
    """The pod template was rendered by kubetrain (its managed-by label says so)."""
    labels = walker.get((*template, "metadata", "labels"))
    return isinstance(labels, Mapping) and labels.get(kt_labels.MANAGED_BY) == kt_labels.MANAGER


Transform = Callable[[dict[str, Any]], tuple[dict[str, Any], str | None]]
"""A kind's own reading of a program (MPI: the launcher's mpirun options): the run, and how it approximates."""


def take_program(
    walker: SourceWalker,
    container: Path,
    run_target: str,
    *,
    kubetrain_own: bool = False,
    transform: Transform | None = None,
    note: str | None = None,
    entrypoint: bool = False,
) -> dict[str, Any] | None:
    """Consume the container's command and args as a TrainJob `run` (noted at `run_target`, approximated with
    `note` when given). Without a command the image's ENTRYPOINT runs: `entrypoint` takes its args as
    `run.entrypoint` (what a Kubernetes render runs as is, and a local run refuses naming the image); else None
    (`split_pod_template` says how its args are taken).

    A container kubetrain rendered runs its start-up script (`/bin/sh -c <script> kubetrain`) with the
    program in args, every `$` written `$$`: the program is args, as the user wrote it."""
    command, args = walker.get((*container, "command")), walker.get((*container, "args"))
    if command is None:
        if not entrypoint:
            return None
        if args is not None:
            walker.take((*container, "args"), f"{run_target}.entrypoint")
        else:
            walker.note(container, f"{run_target}.entrypoint", "no command nor args: the image's own ENTRYPOINT")
        return {"entrypoint": [str(word) for word in args or []]}
    hows: list[str] = []
    if (
        kubetrain_own
        and isinstance(command, list)
        and command[:2] == ["/bin/sh", "-c"]
        and command[-1:] == ["kubetrain"]
    ):
        walker.approx(
            (*container, "command"),
            None,
            "kubetrain's start-up script (the framework's wiring), written again when the job is rendered",
        )
        parts: tuple[str, ...] = ("args",)
        argv = [str(word).replace("$$", "$") for word in args or []]
        if not argv or tuple(argv) == sshd_argv(FILES_DIR_PLACEHOLDER):
            # A replica that hosts a launcher's processes: it waits, or serves ssh with kubetrain's sshd.
            walker.approx((*container, "args"), None, KUBETRAIN_OWN)
            return None
        if argv[:1] == ["mpirun"]:
            argv = _without_forwarding(argv, walker.get((*container, "env")) or [])
    else:
        parts = ("command", "args")
        argv = [*command, *(args or [])]
    run, how = program_run(argv)
    if how:
        hows.append(how)
    if transform is not None:
        run, how = transform(run)
        if how:
            hows.append(how)
    if note:
        hows.append(note)
    for part in parts:
        if hows:
            walker.approx((*container, part), run_target, "; ".join(hows))
        else:
            walker.take((*container, part), run_target)
    return run


def _without_forwarding(argv: list[str], env: Sequence[Any]) -> list[str]:
    """kubetrain's mpirun without the `-x NAME` it writes for the variables a rank on another pod must get
    (frameworks/mpi.py: the container's and PATH), written again when the job is rendered."""
    names = {str(var.get("name")) for var in env if isinstance(var, Mapping)} | {"PATH"}
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "-x" and i + 1 < len(argv) and argv[i + 1] in names:
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def take_kubetrain_env(walker: SourceWalker, container: Path, target: str) -> list[Any] | None:
    """In a container kubetrain rendered: the env without kubetrain's own wiring (noted as such), taken to
    `target`; None when the container has no env."""
    env = walker.get((*container, "env"))
    if not isinstance(env, list) or walker.consumed((*container, "env")):
        return None
    wired = [i for i, var in enumerate(env) if isinstance(var, Mapping) and _wired(str(var.get("name", "")))]
    kept = [copy.deepcopy(var) for i, var in enumerate(env) if i not in wired]
    if not kept:
        walker.approx((*container, "env"), None, KUBETRAIN_OWN)
        return []
    for i in wired:
        walker.approx((*container, "env", i), None, KUBETRAIN_OWN)
    walker.take((*container, "env"), target)
    return kept


def take_kubetrain_pod(walker: SourceWalker, template: Path, target: str) -> dict[str, Any]:
    """In a pod template kubetrain rendered: its labels (without kubetrain's own, returned) and the defaults
    the next render writes again."""
    labels = own_filtered(walker, (*template, "metadata", "labels"), f"{target}.labels", is_kubetrain_label)
    spec = (*template, "spec")
    for i in walker.indexes((*spec, "volumes")):
        if (walker.get((*spec, "volumes", i)) or {}).get("name") in KUBETRAIN_VOLUMES:
            walker.approx((*spec, "volumes", i), None, KUBETRAIN_OWN + " (the job's files, the debug hold)")
    for c in walker.indexes((*spec, "containers")):
        for j in walker.indexes((*spec, "containers", c, "volumeMounts")):
            if (walker.get((*spec, "containers", c, "volumeMounts", j)) or {}).get("name") in KUBETRAIN_VOLUMES:
                walker.approx((*spec, "containers", c, "volumeMounts", j), None, KUBETRAIN_OWN)
    if walker.get((*spec, "automountServiceAccountToken")) is False:
        walker.approx(
            (*spec, "automountServiceAccountToken"),
            None,
            "kubetrain mounts no service account token unless the job asks for API access",
        )
    return labels


def main_container_index(walker: SourceWalker, template: Path, name: str | None) -> int | None:
    """The index of the program's container: the one named `name`, else the first."""
    containers = walker.get((*template, "spec", "containers"))
    if not isinstance(containers, list) or not containers:
        return None
    for i, container in enumerate(containers):
        if isinstance(container, Mapping) and name is not None and container.get("name") == name:
            return i
    return 0


@dataclass
class RoleTemplate:
    """What one pod template became: the role's settings (run, image, env, ...) and the remainder."""

    settings: dict[str, Any] = field(default_factory=dict)
    pod_template: dict[str, Any] | None = None
    run: dict[str, Any] | None = None
    port: int | None = None
    """The engine's rendezvous port the container names (its `pytorchjob-port`, ...), when it names one."""
    own: bool = False
    """kubetrain rendered the template itself (a job converted back)."""


def convert_template(
    walker: SourceWalker,
    template: Path,
    target: str,
    spec: dict[str, Any],
    *,
    container: str | None = None,
    run_target: str | None = None,
    port_name: str | None = None,
    program_note: str | None = None,
    transform: Transform | None = None,
    port_target: str | None = None,
) -> RoleTemplate:
    """A pod template at `template` → a role's settings at `target` (job-level ones lifted into `spec`).

    `container`: the name of the program's container (the operator's convention), else the first.
    `run_target`: where its command goes (default `<target>.run`). `port_name`: the engine's rendezvous port,
    which kubetrain's framework wiring replaces. `program_note`: how the program is taken (MPI workers: kept for
    Kubernetes, not run locally). `port_target`: the job runs under its controller's contract (`spec.controller`),
    which reads the rendezvous port (mapped there), and a container without a command runs its image's entrypoint
    (`run.entrypoint`), but for a replica that only hosts a launcher's processes (`program_note`)."""
    out = RoleTemplate()
    if not isinstance(walker.get(template), Mapping):
        return out
    own = is_kubetrain_template(walker, template)
    out.own = own
    contract = port_target is not None and not own
    index = main_container_index(walker, template, container)
    rendezvous: list[Any] = []
    if own:
        labels = take_kubetrain_pod(walker, template, target)
        if labels:
            out.settings["labels"] = labels
    if index is not None:
        c = (*template, "spec", "containers", index)
        out.run = take_program(walker, c, run_target or f"{target}.run", kubetrain_own=own, transform=transform,
                               note=program_note, entrypoint=contract and program_note is None)
        if own:
            env = take_kubetrain_env(walker, c, f"{target}.env")
            if env:
                out.settings["env"] = env
        rendezvous = _take_rendezvous_ports(walker, c, port_name, own, port_target if contract else None)
        out.port = next((int(p) for p in rendezvous if isinstance(p, int)), None) if contract else None
    restart = walker.get((*template, "spec", "restartPolicy"))
    if restart is not None and not walker.consumed((*template, "spec", "restartPolicy")):
        out.settings["restartPolicy"] = walker.take((*template, "spec", "restartPolicy"), f"{target}.restartPolicy")
    settings, remainder = split_pod_template(walker, template, role_target=target, main_container=container)
    settings = lift_job_level(spec, settings)
    if rendezvous and "ports" in settings:
        # split_pod_template maps the container's ports list as a whole: leave out those noted above.
        settings["ports"] = [p for p in settings["ports"] if p.get("container") not in rendezvous]
        if not settings["ports"]:
            del settings["ports"]
    if out.run is not None:
        settings.pop("run", None)
    out.settings.update(settings)
    out.pod_template = remainder
    return out


def _take_rendezvous_ports(
    walker: SourceWalker, container: Path, port_name: str | None, own: bool, target: str | None = None
) -> list[Any]:
    """Note the engine's rendezvous port (by its name): read by the controller's contract (`target`), else
    replaced by kubetrain's wiring; its containerPorts."""
    found = []
    for i in walker.indexes((*container, "ports")):
        port = walker.get((*container, "ports", i))
        if not isinstance(port, Mapping):
            continue
        name = port.get("name")
        if target is not None and port_name is not None and name == port_name:
            walker.take((*container, "ports", i), target)
            found.append(port.get("containerPort"))
        elif (port_name is not None and name == port_name) or (own and name in ("kubetrain", port_name)):
            walker.approx(
                (*container, "ports", i),
                None,
                "the framework's rendezvous port: kubetrain wires its own and tells every replica "
                "through the framework's env (MASTER_PORT, TF_CONFIG, ...)",
            )
            found.append(port.get("containerPort"))
    return found


def role_data(replicas: int | None, template: RoleTemplate, restart_policy: Any = None) -> dict[str, Any]:
    """A role of the TrainJob from its parts."""
    role: dict[str, Any] = {}
    if replicas is not None:
        role["replicas"] = replicas
    settings = dict(template.settings)
    from_template = settings.pop("restartPolicy", None)
    if restart_policy is not None or from_template is not None:
        role["restartPolicy"] = restart_policy if restart_policy is not None else from_template
    if template.run is not None:
        role["run"] = template.run
    role.update(settings)
    if template.pod_template:
        role["podTemplate"] = template.pod_template
    return role


def document(metadata: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": metadata, "spec": spec}


def object_fields(spec: FieldTree) -> FieldTree:
    """A Kubernetes object's field tree around its kind's `spec` tree (`status` is known, to be refused)."""
    return {"apiVersion": None, "kind": None, "metadata": METADATA_FIELDS, "spec": spec, "status": None}


HOSTING_PROGRAM = (
    "kept: on Kubernetes the workers run it (the sshd the launcher's mpirun reaches them through); locally "
    "kubetrain does not run it, since mpirun starts every rank on this machine"
)
"""How an MPI worker's own command (`sshd -De`) is taken (shared with the Volcano converter)."""


__all__ = [
    "HOSTING_PROGRAM",
    "KUBETRAIN_VOLUMES",
    "KUBETRAIN_WIRED_ENV",
    "RoleTemplate",
    "convert_template",
    "document",
    "is_kubetrain_template",
    "main_container_index",
    "object_fields",
    "program_run",
    "role_data",
    "take_kubetrain_env",
    "take_kubetrain_pod",
    "take_program",
]
