"""A job made ready to run on this machine: planned once, judged, and turned into its launch record.

A local run, its dry run, a resume and a scale all need the same things of a job: where each role's
processes start, this machine's verdict on its fields (`machine_fit`), its `run.python` scripts in place, and
the launch record its supervisor runs. Each is read off one `plan()` over this machine's topology (every
replica on 127.0.0.1, on a port free right now), made once per run (`prepare_launch`): the planner wires
every framework and can be slow for large jobs, and a single plan means the verdict and the record can never
describe two different wirings. That plan is made under the job's id, which is drawn before the job is
recorded (`store_jobs.new_job_id`), since its replicas' env names it.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import LocalError, LocalRefusal
from .launch import LaunchRecord, files_root
from .machine_fit import machine_fit, missing_scripts, role_working_dirs

if TYPE_CHECKING:
    from ...jobspec import TrainJob
    from ...plan import Plan
    from .gpus import GpuInventory

DRY_RUN_FILES_DIR = Path("<job-dir>/files")
"""Where a dry run shows the job's files: the job's log folder, which has no name before the job exists."""
_NO_FILES = (errno.EMFILE, errno.ENFILE)


def free_ports(count: int) -> list[int]:
    """Ports the OS reports free right now (bound together so they differ). Like torchrun, there is a
    window before the replicas bind them; a clash shows as a rendezvous error and the retry policy applies."""
    with ExitStack() as stack:
        sockets = []
        for _ in range(count):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]


def local_plan(job: TrainJob, job_id: str, files_dir: Path) -> Plan:
    """`plan()` over this machine: every replica on 127.0.0.1, each on a port free right now."""
    planned, unbound = _plan_on_free_ports(job, job_id, files_dir)
    if unbound is not None:
        raise unbound
    return planned


def _plan_on_free_ports(job: TrainJob, job_id: str, files_dir: Path) -> tuple[Plan, OSError | None]:
    """`local_plan`, and the error binding the ports met when this process cannot hold a socket per replica
    open (its open-file limit): the plan then has the default topology's ports, so that the verdict on the
    job's size (`machine_fit`), which refuses such a job with the numbers, is still reached."""
    from ...frameworks import local_topology
    from ...plan import default_topology, plan, replica_counts

    counts = replica_counts(job.spec)
    # A controller's files (`spec.controller`) are under the files root, which its variables name.
    root = files_root(str(files_dir))
    try:
        topology = local_topology(counts, free_ports(sum(counts.values())))
    except OSError as exc:
        if exc.errno not in _NO_FILES:
            raise
        return plan(job, default_topology(job), name=job_id, files_dir=str(files_dir), launcher_procs=True,
                    paths_root=root), exc
    return plan(job, topology, name=job_id, files_dir=str(files_dir), launcher_procs=True, paths_root=root), None


def metrics_dir_of(files_dir: Path) -> str:
    """Where a job's processes write their metrics: beside its files, in the job's folder of the store (deleted
    with the job)."""
    return str(files_dir.parent / "metrics")


def working_dir(job: TrainJob, base_dir: Path) -> str:
    """Locally, relative paths in `run` resolve against workingDir (itself relative to the job file's
    folder), else against the job file's folder — so a job runs the same from any current directory.
    A job-level podTemplate's main container gives the workingDir when the job sets none. A role's own
    workingDir overrides this for its processes (`machine_fit.role_working_dirs`)."""
    from ...jobspec.pod_template import template_working_dir

    wd = job.spec.working_dir or template_working_dir(job.spec.pod_template)
    return str((base_dir / wd).resolve() if wd else base_dir.resolve())


def base_dir_of(job: TrainJob) -> Path:
    """The folder `job`'s relative paths resolve against: its file's (`TrainJob.base_dir`), else the current one."""
    return Path(job.base_dir) if job.base_dir is not None else Path.cwd()


def modules_to_preload(job: TrainJob, preload: Sequence[str] | None) -> tuple[str, ...]:
    """The modules Python replicas import once before they are forked: `preload`, else the framework's own."""
    from ...contract.frameworks import record_of

    return tuple(record_of(job.spec.framework).preload if preload is None else preload)


@dataclass(frozen=True)
class Prepared:
    """What running a job on this machine takes, from its one plan."""

    record: LaunchRecord
    """What its supervisor runs (stored with the job)."""
    replicas: list[tuple[str, int]]
    """(role, index) of each replica that runs processes, in plan order: an MPI worker only hosts the
    launcher's, and has no record of its own."""


def prepare_launch(
    job: TrainJob,
    job_id: str,
    files_dir: Path,
    *,
    base_dir: Path,
    cwd: str | None,
    preload: Sequence[str],
    gpus: Callable[[], GpuInventory] | None = None,
    folders: Callable[[Sequence[str]], Mapping[str, str]] | None = None,
    check_programs: bool = False,
) -> Prepared:
    """`job` planned once, as `job_id` with its files in `files_dir`, judged by this machine and made into its
    launch record. `base_dir`: where relative paths resolve; `cwd`: the job's folder; `preload`: the modules
    replicas are forked after (`modules_to_preload`); `gpus`: where this machine's GPUs come from (default
    `gpus.discover_gpus`); `folders`: each role's folder, given the roles (None: `role_working_dirs` under
    `base_dir`). `LocalRefusal` with every problem when this machine cannot run it; with `check_programs` (a
    real run, not a dry run) also for a `run.python` script that is not there."""
    from ...jobspec import FieldError
    from ...parity import unused_warnings
    from .gpus import discover_gpus

    planned, unbound = _plan_on_free_ports(job, job_id, files_dir)
    role_folders = dict(folders(list(planned.settings)) if folders else role_working_dirs(planned, str(base_dir)))
    fit = machine_fit(planned, base_dir=str(base_dir), gpus=gpus or discover_gpus, folders=role_folders)
    if fit.refusals:
        raise LocalRefusal([FieldError(r.path, r.message, hint=r.hint) for r in fit.refusals])
    if check_programs:
        missing = missing_scripts(planned, role_folders)
        if missing:
            raise LocalRefusal([FieldError(r.path, r.message, hint=r.hint) for r in missing])
    if unbound is not None:
        raise LocalError(
            f"cannot take a free port for each of the job's {sum(planned.topology.roles.values())} replicas: "
            f"{unbound.strerror} — "
            "raise the open-file limit (ulimit -n), or run fewer replicas"
        )
    # Fields with no meaning on this machine (an image, a node selector, ...) are said, never dropped silently.
    unused = unused_warnings(job.to_dict(), "local")
    fit = replace(fit, warnings=(*fit.warnings, *unused)) if unused else fit
    record = LaunchRecord.from_plan(
        planned, cwd=cwd, role_cwds=role_folders, preload=preload, fit=fit, metrics_dir=metrics_dir_of(files_dir)
    )
    replicas = [(w.role, index) for w in planned.roles if w.processes for index in range(w.replicas)]
    return Prepared(record, replicas)

