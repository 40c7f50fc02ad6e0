"""Starting a local job: recording it, planned once, and handing it to a supervisor, attached or detached.

A job is recorded only once this machine has judged it (`prepare`), so a job that cannot run leaves no
record. Once recorded, someone owns it at every moment, and its state file says who (`supervisor_state`):
the process that created it, until a supervisor takes it over. So a creator that ends before starting it
leaves a job that the next look ends (`supervisor_liveness`, NotStarted), and a start that fails ends it
with the reason (`end_unstarted`), never a job Pending forever.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ...contract import env_names
from ...contract.logs import LogSink
from ...contract.pause import pause_point
from ...status import Condition, ConditionStatus, JobPhase
from ..base import RunEvents
from .errors import LocalError
from .launch import LaunchRecord
from .prepare import Prepared, base_dir_of, modules_to_preload, prepare_launch, working_dir
from .replica_env import save_environment
from .store import JobStore
from .store_jobs import JobIdTaken, new_job_id
from .supervisor_state import state_path, write_state

if TYPE_CHECKING:
    from ...jobspec import TrainJob
    from .gpus import GpuInventory

ID_DRAWS = 5
"""Times a job id is drawn (and the job planned under it) before giving up: two jobs drawing the same id at
the same moment is one chance in millions."""


def prepare_job(
    job: TrainJob,
    job_id: str,
    files_dir: Path,
    base_dir: Path,
    *,
    preload: Sequence[str] | None,
    gpus: Callable[[], GpuInventory] | None,
    check: bool = False,
) -> Prepared:
    """`job` planned once as `job_id` and judged by this machine (`prepare.prepare_launch`), in its folder
    under `base_dir`, with `preload` (None: the framework's modules)."""
    return prepare_launch(
        job,
        job_id,
        files_dir,
        base_dir=base_dir,
        cwd=working_dir(job, base_dir),
        preload=modules_to_preload(job, preload),
        gpus=gpus,
        check_programs=check,
    )


def create_job(
    store: JobStore,
    job: TrainJob,
    base_dir: Path | None = None,
    *,
    backend: str = "local",
    preload: Sequence[str] | None = None,
    gpus: Callable[[], GpuInventory] | None = None,
    check_programs: bool = False,
) -> tuple[str, LaunchRecord]:
    """Record the job and its launch record; start nothing. A paused job is recorded Suspended.
    `base_dir`: where relative paths resolve (None: `job.base_dir`, else the current folder).
    `LocalRefusal`, before anything is recorded, for a job this machine cannot run; with
    `check_programs` (a real run, not a dry run), also for a script that is not there. `backend`, `preload`
    and `gpus`: the backend's (`LocalBackend`)."""
    base_dir = base_dir_of(job) if base_dir is None else base_dir
    paused = job.spec.run_mode == "Pause" or bool(job.spec.run_policy.suspend)
    # A paused job's script may be written before it is resumed.
    check = check_programs and not paused
    # The job is planned under its id (its replicas' env names it), so the id is drawn first.
    for _ in range(ID_DRAWS):
        job_id = new_job_id(job.name)
        files_dir = store.log_dir(job_id) / "files"
        prepared = prepare_job(job, job_id, files_dir, base_dir, preload=preload, gpus=gpus, check=check)
        check_logs_writable(store)
        try:
            store.create_job(
                job.name,
                backend,
                json.dumps(job.to_dict()),
                prepared.record.to_json(),
                prepared.replicas,
                backoff_limit=job.spec.backoff_limit_of(),
                ttl_seconds_after_finished=job.spec.run_policy.ttl_seconds_after_finished,
                job_id=job_id,
            )
        except JobIdTaken:
            continue
        break
    else:
        raise LocalError(f"could not find a free job id for {job.name!r}")
    try:
        pause_point("local:recording")  # a test hook (env_names.PAUSE_AT): the job's row written, not the rest
        _record_start(store, job_id, paused)
    except BaseException as exc:  # a Ctrl-C or SIGTERM (the CLI's `Interrupted`), a full disk: not left Pending
        end_unstarted(store, job_id, exc)
        raise
    return job_id, prepared.record


def _record_start(store: JobStore, job_id: str, paused: bool) -> None:
    """The rest of `create_job` once the job's row (and its launch record) exists: its environment, its state
    file, and Suspended if it was created paused."""
    save_environment(store.log_dir(job_id), os.environ)  # what its replicas start from, even resumed
    # Until a supervisor takes over, the job is this process's to start: if it ends first, the job is
    # found Pending with nobody to start it, and ended (`supervisor_liveness.supervisor_lost`).
    write_state(state_path(store, job_id), os.getpid(), supervising=False, signals=False, detached=False)
    if paused:
        store.set_job_phase(
            job_id,
            JobPhase.SUSPENDED,
            reason="Paused",
            message="runMode Pause",
            condition=Condition(
                "Suspended", ConditionStatus.TRUE, "Paused", "created paused: kubetrain resume", time.time()
            ),
        )


def check_logs_writable(store: JobStore) -> None:
    """The folder every job's logs go in can be written: checked before a job is recorded, so an unwritable
    one is an error with its path, not a job left Pending."""
    folder = store.log_dir("x").parent
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        writable = os.access(folder, os.W_OK | os.X_OK)
    except OSError as exc:
        raise LocalError(
            f"{folder}: cannot create the log folder ({exc.strerror or exc}) — make it writable, or set "
            f"{env_names.HOME} to a folder you can write"
        ) from None
    if not writable:
        raise LocalError(
            f"{folder}: the log folder is not writable — make it writable (chmod u+rwx {folder}), or set "
            f"{env_names.HOME} to a folder you can write"
        )


def end_unstarted(
    store: JobStore, job_id: str, exc: BaseException, cancel: Callable[[str], object] | None = None
) -> None:
    """End a job still Pending because starting it failed with `exc` (nothing of it runs). `cancel`: how
    the backend cancels a job its own detached supervisor has taken over already."""
    with contextlib.suppress(Exception):
        supervisor = store.recorded_supervisor_pid(job_id)
        if supervisor is not None:  # a supervisor took it over: it records the outcome itself
            if isinstance(exc, KeyboardInterrupt) and supervisor != os.getpid() and cancel is not None:
                # `run --detach` interrupted once its own supervisor runs: the user never got the id, and
                # asked for nothing to run.
                cancel(job_id)
            return
        if isinstance(exc, KeyboardInterrupt):  # Ctrl-C, or SIGTERM under the CLI's handlers (`Interrupted`)
            by = "SIGTERM" if getattr(exc, "signum", signal.SIGINT) == signal.SIGTERM else "Ctrl-C"
            phase, reason, message = JobPhase.CANCELLED, "Cancelled", f"cancelled by {by} before it started"
        else:
            phase, reason = JobPhase.FAILED, "StartFailed"
            message = f"it could not be started: {type(exc).__name__}: {exc}"
        store.set_job_phase(
            job_id, phase, reason=reason, message=message,
            condition=Condition(phase.value, ConditionStatus.TRUE, reason, message, time.time()),
            expect=(JobPhase.PENDING,),
        )


def run_attached(store: JobStore, job_id: str, sink: LogSink | None, events: RunEvents | None = None) -> JobPhase:
    """Supervise the job in this process until it ends (or is suspended); Ctrl-C cancels it. The
    supervisor's messages and each status change it makes go to `events`."""
    from .supervisor import Supervisor

    if events is None:
        return Supervisor(store, job_id, sink=sink).run()
    on_status = events.status if events.wants_status else None
    return Supervisor(store, job_id, sink=sink, on_event=events.say, on_status=on_status).run()


def start_detached(store: JobStore, job_id: str) -> int:
    """A supervisor in its own session, outliving this process; its own output goes to a file. Its pid."""
    log = store.log_dir(job_id) / "supervisor.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env[env_names.HOME] = str(store.root)
    # Private to the user, as the store: the supervisor's messages can quote env values.
    with open(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600), "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubetrain.backends.local.supervisor", job_id],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            env=env,
        )
    # Taken over from the creator at once: a supervisor that dies before it records itself is seen as lost.
    write_state(state_path(store, job_id), proc.pid, supervising=True, signals=True, detached=True)
    return proc.pid
