"""The local backend: a TrainJob's replicas as processes on this machine, managed through the job store.

Every command works across invocations: the store (SQLite) holds the jobs, a supervisor process (or the
attached `kubetrain run` itself) owns the replicas, and `cancel`/`suspend` reach it through a request row
plus a SIGTERM that wakes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from ...contract import env_names
from ...contract.errors import KubetrainError
from ...frameworks import support_of
from ...status import Condition, ConditionStatus, JobPhase, JobStatus, ReplicaPhase
from ...terminal import OutputSink
from .processes import kill_recorded
from .procfs import pid_alive
from .store import JobStore, RequestKind

if TYPE_CHECKING:
    from ...jobspec import TrainJob
    from ...plan import Plan


STOP_WAIT = 60.0
"""Seconds `cancel` and `suspend` wait for the supervisor to report the job stopped (it needs the grace
period, 5 s, plus the time replicas take to die)."""
SUPERVISOR_EXIT_WAIT = 20.0
"""Seconds `delete` waits for a stopped job's supervisor to exit (closing its process group can take
seconds: it waits up to 5 s for its watchdog) before it deletes the job anyway."""
SUPERVISOR_CLEARED_WAIT = 5.0
"""Seconds it still waits once the supervisor has cleared its record (see `_wait_supervisor_exit`)."""




class LocalError(KubetrainError):
    """A request the local backend cannot carry out, with a message for the user."""


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
    from ...frameworks import local_topology
    from ...plan import plan, replica_counts

    counts = replica_counts(job.spec)
    topology = local_topology(counts, free_ports(sum(counts.values())))
    return plan(job, topology, name=job_id, files_dir=str(files_dir), launcher_procs=True)


def working_dir(job: TrainJob, base_dir: Path) -> str:
    """Locally, relative paths in `run` resolve against workingDir (itself relative to the job file's
    folder), else against the job file's folder — so a job runs the same from any current directory."""
    wd = job.spec.working_dir
    return str((base_dir / wd).resolve() if wd else base_dir.resolve())


class LocalBackend:
    name = "local"

    def __init__(self, store: JobStore | None = None) -> None:
        self.store = store or JobStore()

    def close(self) -> None:
        self.store.close()

    # -- submit ---------------------------------------------------------------------------------------

    def create(self, job: TrainJob, base_dir: Path, preload: Sequence[str] | None = None) -> tuple[str, Plan]:
        """Record the job and its launch plan; start nothing.

        ``preload``: modules the replicas import once before being forked (None: the framework's
        `FrameworkSupport.preload`; empty: none).
        """
        preview = local_plan(job, job.name, Path("/nonexistent"))
        replicas = [(r.role, r.index) for r in preview.replicas if r.processes]
        job_id = self.store.create_job(
            job.name,
            self.name,
            json.dumps(job.to_dict()),
            None,
            replicas,
            backoff_limit=job.spec.run_policy.backoff_limit or 0,
        )
        the_plan = local_plan(job, job_id, self.store.log_dir(job_id) / "files")
        data = the_plan.to_dict()
        data["cwd"] = working_dir(job, base_dir)
        data["preload"] = list(support_of(job.spec.framework).preload if preload is None else preload)
        self.store.set_plan_json(job_id, json.dumps(data))
        if job.spec.run_mode == "Pause" or job.spec.run_policy.suspend:
            self.store.set_job_phase(
                job_id,
                JobPhase.SUSPENDED,
                reason="Paused",
                message="runMode Pause",
                condition=Condition(
                    "Suspended", ConditionStatus.TRUE, "Paused", "created paused: kubetrain resume", time.time()
                ),
            )
        return job_id, the_plan

    def run_attached(self, job_id: str, sink: OutputSink | None, on_event: object = None) -> JobPhase:
        from .supervisor import Supervisor

        return Supervisor(self.store, job_id, sink=sink, on_event=on_event).run()  # type: ignore[arg-type]

    def start_detached(self, job_id: str) -> int:
        """A supervisor in its own session, outliving this command; its own output goes to a file."""
        log = self.store.log_dir(job_id) / "supervisor.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env[env_names.HOME] = str(self.store.root)
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kubetrain.backends.local.supervisor", job_id],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                env=env,
            )
        return proc.pid

    # -- queries --------------------------------------------------------------------------------------

    def resolve(self, prefix: str) -> str:
        return self.store.resolve_id(prefix)

    def status(self, job_id: str) -> JobStatus:
        status = self.store.get_status(job_id)
        if not status.phase.is_terminal and self._supervisor_lost(job_id, status):
            status = self.store.get_status(job_id)
        return status

    def list(self, limit: int | None = None) -> list[JobStatus]:
        jobs = self.store.list_jobs(limit=limit)
        return [self.status(j.job_id) if not j.phase.is_terminal else j for j in jobs]

    def _supervisor_lost(self, job_id: str, status: JobStatus) -> bool:
        """A Running job whose supervisor died (SIGKILL, OOM, reboot): its replicas died with it (or are
        killed now); record it as Failed with the reason, rather than Running forever."""
        if status.phase not in (JobPhase.RUNNING, JobPhase.PENDING) or self.store.supervisor_alive(job_id):
            return False
        if status.phase is JobPhase.PENDING and self.store.recorded_supervisor_pid(job_id) is None:
            return False  # not started yet (a detached supervisor on its way), or created paused
        for record in self.store.replica_records(job_id):
            if record.pid and record.pid_start_time:
                kill_recorded(record.pid, record.pid_start_time, signal.SIGKILL)
            if record.phase in (ReplicaPhase.RUNNING, ReplicaPhase.PENDING):
                self.store.update_replica(job_id, record.role, record.index, phase=ReplicaPhase.UNKNOWN)
        message = "the supervisor process died; its replicas were stopped"
        return self.store.set_job_phase(
            job_id,
            JobPhase.FAILED,
            reason="SupervisorLost",
            message=message,
            condition=Condition("Failed", ConditionStatus.TRUE, "SupervisorLost", message, time.time()),
            expect=(JobPhase.RUNNING, JobPhase.PENDING),
        )

    def log_paths(self, job_id: str, role: str | None = None, index: int | None = None) -> dict[str, Path]:
        """Replica key → log file, in plan order (several per replica with procsPerReplica > 1)."""
        plan_json = self.store.get_plan_json(job_id)
        plan = json.loads(plan_json) if plan_json else {"replicas": []}
        out: dict[str, Path] = {}
        for replica in plan["replicas"]:
            if (role is not None and replica["role"] != role) or (index is not None and replica["index"] != index):
                continue
            path = self.store.log_path(job_id, replica["role"], replica["index"])
            procs = replica["processes"]
            for proc in procs:
                out[proc["key"]] = path.with_name(f"{proc['key']}.log") if len(procs) > 1 else path
        return out

    # -- control --------------------------------------------------------------------------------------

    def cancel(self, job_id: str) -> JobStatus:
        return self._request(job_id, RequestKind.CANCEL)

    def suspend(self, job_id: str) -> JobStatus:
        return self._request(job_id, RequestKind.SUSPEND)

    def _request(self, job_id: str, kind: RequestKind) -> JobStatus:
        status = self.status(job_id)
        if status.phase.is_terminal:
            raise LocalError(f"job {job_id} has already ended ({status.phase.value})")
        if status.phase is JobPhase.SUSPENDED:
            if kind is RequestKind.SUSPEND:
                return status
            self._finish(job_id, JobPhase.CANCELLED, "Cancelled", "cancelled while suspended")
            return self.status(job_id)
        self.store.add_request(job_id, kind)
        pid = self.store.live_supervisor_pid(job_id)
        if pid is None:  # created, supervisor not started yet (or gone): the request waits in the store
            if status.phase is JobPhase.PENDING and kind is RequestKind.CANCEL:
                self._finish(job_id, JobPhase.CANCELLED, "Cancelled", "cancelled before it started")
            return self.status(job_id)
        with contextlib.suppress(ProcessLookupError):  # it ended just now: the wait below sees how
            os.kill(pid, signal.SIGTERM)
        return self.wait(
            job_id, until=lambda s: s.phase.is_terminal or s.phase is JobPhase.SUSPENDED, timeout=STOP_WAIT
        )

    def resume(self, job_id: str, *, detach: bool = True) -> str:
        status = self.status(job_id)
        if status.phase is not JobPhase.SUSPENDED:
            raise LocalError(f"job {job_id} is {status.phase.value}, not Suspended")
        from ...jobspec import from_dict

        job = from_dict(json.loads(self.store.get_spec_json(job_id)))
        old = json.loads(self.store.get_plan_json(job_id) or "{}")
        job = job.model_copy(update={"spec": job.spec.model_copy(update={"run_mode": "Immediate"})})
        fresh = local_plan(job, job_id, self.store.log_dir(job_id) / "files").to_dict()
        fresh["cwd"] = old.get("cwd")  # new ports: the old ones may be taken by now
        fresh["preload"] = old.get("preload", [])
        self.store.set_plan_json(job_id, json.dumps(fresh))
        self.store.set_job_phase(
            job_id,
            JobPhase.PENDING,
            reason="Resumed",
            message="resumed by request",
            condition=Condition("Suspended", ConditionStatus.FALSE, "Resumed", "resumed by request", time.time()),
        )
        if detach:
            self.start_detached(job_id)
        return job_id

    def delete(self, job_id: str) -> None:
        """Cancel the job if it runs, wait for its supervisor to exit, then forget the job and its logs.

        The supervisor still has work after the job's phase is final (closing the process group writes
        the last log lines, then it clears its record): deleting before it exits would pull the rows and
        the log directory from under it. The wait is bounded; a supervisor that outlasts it finds its job
        gone and exits without recording anything.
        """
        # Found before the cancel: on its way out the supervisor clears its record, not its process.
        supervisor = self._open_supervisor(job_id)
        try:
            status = self.status(job_id)
            if not status.phase.is_terminal and status.phase is not JobPhase.SUSPENDED:
                with contextlib.suppress(LocalError):  # it ended meanwhile: nothing to cancel
                    self.cancel(job_id)
            if supervisor is None:  # a detached supervisor may have recorded itself only now
                supervisor = self._open_supervisor(job_id)
            if supervisor is not None:
                self._wait_supervisor_exit(job_id, *supervisor)
        finally:
            if supervisor is not None:
                os.close(supervisor[1])
        self.store.delete_job(job_id)

    def _open_supervisor(self, job_id: str) -> tuple[int, int] | None:
        """(pid, pidfd) of the job's live supervisor; None if there is none, or it is this very process
        (a library caller deleting a job it runs attached: waiting for ourselves would never end)."""
        record = self.store.supervisor_process(job_id)
        if record is None or record[0] == os.getpid():
            return None
        pid, start = record
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:  # gone already
            return None
        # Checked with the pidfd open: while it is, the pid cannot pass to another process.
        if not pid_alive(pid, start):
            os.close(pidfd)
            return None
        return pid, pidfd

    def _wait_supervisor_exit(self, job_id: str, pid: int, pidfd: int) -> bool:
        """Until the supervisor exits (its pidfd turns readable), bounded; True if it did.

        Once it has cleared its record it is done with the job: a detached supervisor exits right
        after, an attached `kubetrain run` prints its summary and exits, but a program that ran the job
        through the library may go on for long, so the wait is then cut short.
        """
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        deadline = time.monotonic() + SUPERVISOR_EXIT_WAIT
        while (left := deadline - time.monotonic()) > 0:
            if poller.poll(int(min(left, 0.2) * 1000) + 1):
                return True
            record = self.store.supervisor_process(job_id)
            if record is None or record[0] != pid:
                deadline = min(deadline, time.monotonic() + SUPERVISOR_CLEARED_WAIT)
        return False

    def wait(self, job_id: str, until: object, timeout: float = 60.0) -> JobStatus:
        """Poll the store until `until(status)`; for CLI commands that wait on another process."""
        deadline = time.monotonic() + timeout
        delay = 0.01
        while True:
            status = self.status(job_id)
            if until(status) or time.monotonic() > deadline:  # type: ignore[operator]
                return status
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    def _finish(self, job_id: str, phase: JobPhase, reason: str, message: str) -> None:
        self.store.set_job_phase(
            job_id,
            phase,
            reason=reason,
            message=message,
            condition=Condition(phase.value, ConditionStatus.TRUE, reason, message, time.time()),
        )
