"""The local backend: a TrainJob's replicas as processes on this machine, managed through the job store.

Every command works across invocations: the store (SQLite) holds the jobs and their launch records, a
supervisor process (or the attached `run` itself) owns the replicas, and `cancel`/`suspend` reach it
through a request row plus a SIGTERM that wakes it. `LocalBackend` answers `backends.base.Backend` (its
`processes` are what `kubetrain attach` starts again; its change feed is `changes.StoreChanges`). Job ids
may be given as an unambiguous prefix everywhere.

Before a job is created it is planned once and judged by this machine (`prepare.prepare_launch`): what it
cannot provide is refused (`LocalRefusal`, every problem with its field path), what it approximates is said
as a warning, and each replica gets its own GPUs. A supervisor that died or is stopped is found out and
stood in for by `supervisor_liveness`. Finished jobs past their runPolicy.ttlSecondsAfterFinished are
deleted, logs included, by the next call that looks at jobs (`run`, `list`, and every call taking an id).
"""

from __future__ import annotations

import builtins
import contextlib
import json
import re
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...contract import env_names
from ...contract.errors import JobNotFound, UsageError
from ...contract.logs import GrepPattern, LogRecord, LogSink, LogStream, TimeBound, check_stream
from ...contract.pause import pause_point
from ...status import REASON_NOT_IN_STORE, JobPhase, JobStatus
from ..base import (
    DryRun,
    EventSink,
    JobProcesses,
    ReplicaProcess,
    RunEvents,
    RunEventSink,
    RunResult,
)
from . import job_control
from .changes import StoreChanges
from .errors import DeletedWhileFollowed, LocalError
from .job_start import create_job, end_unstarted, prepare_job, run_attached, start_detached
from .launch import LAYOUT, LaunchRecord
from .prepare import (
    DRY_RUN_FILES_DIR,
    base_dir_of,
    metrics_dir_of,
)
from .store import JobStore
from .store_requests import RequestKind
from .supervisor_core import BY_CTRL_C, BY_SIGTERM
from .unrecorded import UnrecordedJob, find_unrecorded, stop_unrecorded, unrecorded_jobs

if TYPE_CHECKING:
    from ...jobspec import TrainJob
    from ...metrics.sample import MetricSample
    from .gpus import GpuInventory


@dataclass
class LocalDescription:
    """`describe` of a local job: its status and its spec as submitted."""

    status: JobStatus
    spec: dict[str, Any]

    @property
    def diagnoses(self) -> builtins.list[Any]:
        """None: a local replica does not wait for a place to run."""
        return []

    def status_lines(self, wide: bool = False) -> list[str]:
        """The summary, the replicas (`status_text.replica_lines`), and the failure with the failed replica's
        last lines."""
        from ...status_text import replica_lines

        s = self.status
        lines = [s.summary_line(), *replica_lines(s, wide)]
        if s.first_failure is not None and s.phase is JobPhase.FAILED:
            lines += s.first_failure.explain(s.job_id).split("\n")
        return lines

    def text(self) -> str:
        from ...status_text import format_describe

        return format_describe(self.status)

    def to_dict(self) -> dict[str, Any]:
        data = self.status.to_dict()
        data["spec"] = self.spec
        return data


class LocalBackend:
    """Jobs as processes on this machine (`backends.base.Backend`)."""

    name = "local"
    metrics_in_output = False  # samples go to files of their own (KUBETRAIN_METRICS_FILE), read by `metrics`

    def __init__(
        self,
        *,
        store: JobStore | None = None,
        preload: Sequence[str] | None = None,
        gpus: Callable[[], GpuInventory] | None = None,
    ) -> None:
        """`preload`: modules Python replicas import once, in a process that then forks each of them
        (None: the framework's `FrameworkRecord.preload`; empty: none). `gpus`: this machine's GPUs, asked
        when a job asks for some (None: `gpus.discover_gpus`, nvidia-smi or the driver's /proc entries)."""
        self.store = store if store is not None else JobStore()
        self._refused_metrics: set[tuple[str, Path]] = set()
        self.preload: tuple[str, ...] | None = None if preload is None else tuple(preload)
        self.gpus = gpus

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> LocalBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- run --------------------------------------------------------------------------------------------

    def run(
        self,
        job: TrainJob,
        *,
        detach: bool = False,
        dry_run: DryRun | None = None,
        sink: LogSink | None = None,
        on_event: EventSink | None = None,
        on_status: RunEventSink | None = None,
    ) -> RunResult:
        """See `Backend.run`. A client dry run gives the launch record as data (`RunResult.plan`, in
        `launch.LAYOUT`: the env every process shares once, so its size is linear in the replica count; each
        process's whole env: `LaunchRecord.from_dict(result.plan).envs()`), its files folder shown as
        `<job-dir>/files`; nothing is stored."""
        if dry_run == "server":
            raise UsageError("--dry-run=server asks a Kubernetes API server: add --backend kubernetes")
        if dry_run not in (None, "client"):
            raise UsageError(f"unknown dry run {dry_run!r} (client or server)")
        base_dir = base_dir_of(job)
        if dry_run == "client":
            prepared = prepare_job(job, job.name, DRY_RUN_FILES_DIR, base_dir, preload=self.preload, gpus=self.gpus)
            record = prepared.record
            return RunResult(job.name, self.name, plan=record.to_dict(), warnings=list(record.warnings),
                             plan_notes=LAYOUT)
        events = RunEvents(on_event, on_status)
        self.sweep_expired()
        job_id, record = create_job(
            self.store, job, base_dir, backend=self.name, preload=self.preload, gpus=self.gpus, check_programs=True
        )
        try:
            pause_point("local:created")  # a test hook (env_names.PAUSE_AT): recorded, nothing started
            events.created(job_id, f"created job {job_id}", say=False)
            warnings = list(record.warnings)
            for warning in warnings:
                events.warning(warning)
            status = self._status(job_id)
            if status.phase is JobPhase.SUSPENDED:  # created paused
                return RunResult(job_id, self.name, status=status, warnings=warnings)
            if detach:
                start_detached(self.store, job_id)
                pause_point("local:detached")  # a test hook (env_names.PAUSE_AT): its supervisor started, id not said
                return RunResult(job_id, self.name, status=self._status(job_id), warnings=warnings, detached=True)
            count = len(record.processes)
            roles = ", ".join(f"{r.role}×{r.replicas}" for r in record.roles)
            events.message(f"job {job_id}: {count} process{'es' if count != 1 else ''} ({roles}); Ctrl-C cancels")
            try:
                run_attached(self.store, job_id, sink, events)
            finally:
                if sink is not None:
                    sink.flush()
        except BaseException as exc:
            # Whatever stopped the start (an error, Ctrl-C before the supervisor ran) must not leave the job
            # Pending forever: it is ended, with the reason. A job its supervisor ran is not touched.
            end_unstarted(self.store, job_id, exc, cancel=self.cancel)
            raise
        status = self._status(job_id)
        # The supervisor, attached in this process, handles SIGINT itself and records why it cancelled.
        by_ctrl_c = status.phase is JobPhase.CANCELLED and status.message == BY_CTRL_C
        by_sigterm = status.phase is JobPhase.CANCELLED and status.message == BY_SIGTERM
        by = signal.SIGINT if by_ctrl_c else signal.SIGTERM if by_sigterm else None
        return RunResult(job_id, self.name, status=status, warnings=warnings, interrupted=by_ctrl_c, interrupted_by=by)

    # -- queries ----------------------------------------------------------------------------------------

    def _resolve(self, prefix: str) -> str:
        self.sweep_expired()
        return self.store.resolve_id(prefix)

    def sweep_expired(self) -> list[str]:
        """Delete the finished jobs whose runPolicy.ttlSecondsAfterFinished has passed, logs included, as
        Kubernetes' TTL controller does; the ids deleted. Lazy: called by `run`, `list` and every call that
        takes a job id, so an expired job is gone for whoever looks. A job whose supervisor is still
        finishing (writing its last log lines) waits for the next sweep."""
        deleted = []
        for job_id in self.store.expired_jobs():
            with contextlib.suppress(JobNotFound):  # another sweep got there first
                if self.store.live_supervisor_pid(job_id) is not None:
                    continue
                self.store.delete_job(job_id)
                deleted.append(job_id)
        return deleted

    def _found(self, job_id: str) -> str | UnrecordedJob:
        """The job's whole id, or a job running with no record in this store (its store moved aside), found
        by its folder; `JobNotFound` when neither."""
        try:
            return self._resolve(job_id)
        except JobNotFound:
            stray = find_unrecorded(self.store, job_id)
            if stray is None:
                raise
            return stray

    def status(self, job_id: str) -> JobStatus:
        found = self._found(job_id)
        if isinstance(found, UnrecordedJob):
            return found.status(self.store)
        return self._status(found)

    def describe(self, job_id: str) -> LocalDescription:
        found = self._found(job_id)
        if isinstance(found, UnrecordedJob):
            return LocalDescription(found.status(self.store), {})  # its spec is in the store it was started with
        return LocalDescription(self._status(found), json.loads(self.store.get_spec_json(found)))

    def list(self, *, limit: int | None = None) -> builtins.list[JobStatus]:
        """Jobs, newest first (finished ones past their ttlSecondsAfterFinished deleted first). First, any job
        that runs with no record in the store (the store moved aside under it: `unrecorded`), said so."""
        self.sweep_expired()
        jobs = self.store.list_jobs(limit=limit)
        known = {j.job_id for j in jobs} if limit is None else None
        strays = [u.status(self.store) for u in unrecorded_jobs(self.store, known)]
        return strays + [self._status(j.job_id) if not j.phase.is_terminal else j for j in jobs]

    def launch_record(self, job_id: str) -> LaunchRecord:
        """What the job's replicas run: their argv, env and working directory (`kubetrain attach`)."""
        job_id = self._resolve(job_id)
        record = self._stored_record(job_id)
        if record is None:
            raise LocalError(f"job {job_id} has no launch record")
        return record

    def processes(self, job_id: str) -> JobProcesses:
        """Each replica process as its supervisor starts it: argv, whole env, its role's folder."""
        record = self.launch_record(job_id)
        return JobProcesses(record.job_id, [
            ReplicaProcess(p.key, list(p.argv), dict(p.env), record.cwd_of(record.replica_of(p.key).role))
            for p in record.processes
        ])

    def framework(self, job_id: str) -> str:
        """From the spec the job was submitted with (one read of the store)."""
        spec = json.loads(self.store.get_spec_json(self._resolve(job_id)))
        inner = spec.get("spec") if isinstance(spec, dict) else None
        return str(inner.get("framework") or "") if isinstance(inner, dict) else ""

    def changes(self, on_change: Callable[[], None]) -> StoreChanges:
        """A commit to the job store by anyone (a supervisor, another command), seen by `PRAGMA data_version`."""
        return StoreChanges(self.store.db_path, on_change).start()

    def _stored_record(self, job_id: str) -> LaunchRecord | None:
        return job_control.stored_record(self.store, job_id)

    def _status(self, job_id: str) -> JobStatus:
        return job_control.current_status(self.store, job_id)

    # -- logs -------------------------------------------------------------------------------------------

    def logs(
        self,
        job_id: str,
        *,
        role: str | None = None,
        index: int | None = None,
        follow: bool = False,
        tail: int | None = None,
        since: TimeBound | None = None,
        until: TimeBound | None = None,
        grep: str | GrepPattern | None = None,
        stream: LogStream | None = None,
        previous: bool = False,
        on_missing: Callable[[str, str], None] | None = None,
        stop: threading.Event | None = None,
        on_note: Callable[[str], None] | None = None,
    ) -> Iterator[LogRecord]:
        """See `Backend.logs`. Read from the replicas' log files; `follow` ends once the job has ended; while
        it is suspended, it waits for it to be resumed. `previous` has no meaning here (a replica's log holds
        every attempt). The files keep each record's stream, so `stream` picks stdout or stderr. Every
        replica's file is read, and kept as long as the job: `on_note` has nothing to say."""
        from ..logfiles.reader import merge_logs
        from .log_follow import follow_log

        job_id = self._resolve(job_id)
        if index is not None and role is None:
            raise UsageError("--index needs --role")
        if follow and until is not None:
            raise UsageError("--until ends the output at a time and -f follows new output: give one of them")
        streams = check_stream(stream)
        try:
            pattern = re.compile(grep) if isinstance(grep, str) else grep
        except re.error as exc:
            raise UsageError(f"--grep {grep!r}: {exc}") from None
        paths = self._log_paths(job_id, role, index)
        if not paths:
            what = f"role {role}" + (f" index {index}" if index is not None else "")
            raise LocalError(f"job {job_id} has no replica matching {what}")
        if follow:
            return follow_log(paths, self._follow_until(job_id, stop), since=since, tail=tail, grep=pattern,
                              streams=streams)
        if on_missing is not None:
            for key, path in paths.items():
                if not path.exists():
                    on_missing(key, "no log yet (not started)")
        return merge_logs(paths, since=since, until=until, tail=tail, grep=pattern, streams=streams)

    def _log_paths(self, job_id: str, role: str | None = None, index: int | None = None) -> dict[str, Path]:
        """Process key → log file, in replica order (several per replica with procsPerReplica > 1)."""
        record = self._stored_record(job_id)
        out: dict[str, Path] = {}
        for replica in record.replicas if record is not None else ():
            if (role is not None and replica.role != role) or (index is not None and replica.index != index):
                continue
            path = self.store.log_path(job_id, replica.role, replica.index)
            many = len(replica.processes) > 1
            for proc in replica.processes:
                out[proc.key] = path.with_name(f"{proc.key}.log") if many else path
        return out

    # -- metrics ----------------------------------------------------------------------------------------

    def metrics(self, job_id: str, *, follow: bool = False) -> Iterator[MetricSample]:
        """See `Backend.metrics`: read from each process's metrics file (`KUBETRAIN_METRICS_FILE` of its launch
        record). `follow` ends once the job has ended, as `logs`."""
        from ...metrics.reader import follow_files, read_files

        job_id = self._resolve(job_id)
        record = self._stored_record(job_id)
        processes = record.processes if record is not None else []
        # Each file is read once, keyed by the first process that writes it: its role and index are the
        # samples' (several processes share one when the user's env names it). Only files in the job's own
        # metrics folder are read (a replica may name any path, `/dev/zero` included): others are refused, said
        # once on stderr.
        paths: dict[Path, str] = {}
        for p in processes:
            if env_names.METRICS_FILE in p.env:
                paths.setdefault(Path(p.env[env_names.METRICS_FILE]), p.key)
        keyed = {key: path for path, key in paths.items()}
        within = Path(metrics_dir_of(self.store.log_dir(job_id) / "files"))

        def refused(path: Path, why: str) -> None:
            if (job_id, path) not in self._refused_metrics:  # once per backend, not once per reader (a page)
                self._refused_metrics.add((job_id, path))
                print(f"kubetrain: metrics of {job_id}: {path} not read: {why}", file=sys.stderr)

        if follow:
            return follow_files(keyed, self._follow_until(job_id), within=within, on_refused=refused)
        return iter(read_files(keyed, within=within, on_refused=refused))

    def _follow_until(self, job_id: str, stop: threading.Event | None = None) -> Callable[[], bool]:
        """When a follower of the job's output or metrics ends: once the job has ended (`_ended`) or `stop`
        is set. A job deleted meanwhile raises `DeletedWhileFollowed`, saying whether its TTL did it."""
        ttl: object = json.loads(self.store.get_spec_json(job_id))
        for key in ("spec", "runPolicy", "ttlSecondsAfterFinished"):
            ttl = ttl.get(key) if isinstance(ttl, dict) else None

        def until() -> bool:
            if stop is not None and stop.is_set():
                return True
            try:
                return self._ended(job_id)
            except JobNotFound:
                if isinstance(ttl, int):
                    why = (
                        f"its runPolicy.ttlSecondsAfterFinished ({ttl} s) deletes it that long after it finishes, "
                        "logs and metrics included"
                    )
                else:
                    why = "kubetrain delete, or a delete from the web view"
                raise DeletedWhileFollowed(f"job {job_id} was deleted while it was followed ({why})") from None

        return until

    def _ended(self, job_id: str) -> bool:
        # A suspended job has not ended: like `kubectl logs -f` while no pod runs, following waits for it
        # to be resumed (or cancelled) and goes on with the output of its next run.
        return self._status(job_id).phase.is_terminal

    # -- control: what is done to a found job is `job_control`'s -----------------------------------------

    def cancel(self, job_id: str) -> JobStatus:
        """Stop the job's replicas (SIGTERM, grace period, SIGKILL): the job ends Cancelled. `StillStopping`
        if it has not stopped within `job_control.STOP_WAIT` seconds (the request stands)."""
        found = self._found(job_id)
        if isinstance(found, UnrecordedJob):
            stop_unrecorded(found)  # its supervisor records the outcome in the store it holds, not this one
            return JobStatus(found.job_id, found.job_id, phase=JobPhase.CANCELLED, reason=REASON_NOT_IN_STORE,
                             message=f"cancelled by its supervisor; this store ({self.store.db_path}) has no "
                             "record of it")
        return job_control.stopped(job_control.request_stop(self.store, found, RequestKind.CANCEL))

    def suspend(self, job_id: str) -> JobStatus:
        """Stop the job's replicas and keep the job, to `resume`. `StillStopping` as for `cancel`."""
        resolved = self._resolve(job_id)
        return job_control.stopped(job_control.request_stop(self.store, resolved, RequestKind.SUSPEND))

    def resume(self, job_id: str) -> JobStatus:
        """Start a Suspended job again (a detached supervisor, new ports); its status once started."""
        job_id = self._resolve(job_id)
        job_control.prepare_resume(self.store, job_id, self.gpus)
        start_detached(self.store, job_id)
        return self._status(job_id)

    def scale(self, job_id: str, replicas: int) -> JobStatus:
        """Change the number of workers of a running elastic job: the replicas added start and join the
        rendezvous, those removed (the highest indexes) are stopped gracefully. A `UsageError` naming the
        bounds outside [minReplicas, maxReplicas] or for a job that is not elastic."""
        return job_control.scale(self.store, self._resolve(job_id), replicas, self.gpus)

    def delete(self, job_id: str) -> None:
        """Cancel the job if it runs, wait for its supervisor to exit, then forget the job and its logs.

        The supervisor still has work after the job's phase is final (closing the process group writes
        the last log lines, then it clears its record): deleting before it exits would pull the rows and
        the log directory from under it. The wait is bounded.

        It never forgets a live process: a supervisor still supervising after the wait (stopped with
        SIGSTOP, or stuck) is killed if it is a detached one; a process of the job still alive is stopped
        by its recorded pid. What survives that (an attached `kubetrain run` that is stopped, a process
        stuck in the kernel) makes delete fail, naming the pids, and the job is kept.
        """
        found = self._found(job_id)
        if isinstance(found, UnrecordedJob):
            stop_unrecorded(found)  # a job running with no record in this store: stopped, then its folder goes
            shutil.rmtree(found.folder, ignore_errors=True)
            return
        job_control.delete(self.store, found)


if TYPE_CHECKING:  # mypy holds the class to the protocol, signature for signature (as the Kubernetes backend's)
    from ..base import Backend

    _IMPLEMENTS: type[Backend] = LocalBackend

__all__ = ["LocalBackend", "LocalDescription"]

