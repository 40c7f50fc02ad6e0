"""The one interface every backend implements, and `open_backend`, the one way to get one.

A job means the same on every backend, so every backend answers the same calls: `run` a job (attached,
detached, or as a dry run), then `status`, `describe`, `list`, `logs`, `cancel`, `suspend`, `resume`,
`delete` by job id. The CLI has one handler per verb and calls only this; `kubetrain.run` is the same call
the CLI makes. What differs between backends is given once, when the backend is opened (a Kubernetes
namespace and flavor, the local backend's preloaded modules), not on every call.

Modelled on TorchX's `Scheduler` (one class, dry run then schedule) and the Kubeflow SDK's
`TrainerClient` (one facade choosing `backends/<name>/`). Backends are imported only when opened, so
choosing one costs nothing for the others.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ..contract.choices import BACKEND_ALIASES
from ..contract.errors import EXIT_FAILED, EXIT_INTERRUPTED, KubetrainError, UsageError
from ..contract.logs import GrepPattern, LogRecord, LogSink, TimeBound

if TYPE_CHECKING:
    from ..jobspec import TrainJob
    from ..metrics.sample import MetricSample
    from ..status import JobStatus

DryRun = Literal["client", "server"]
"""`client`: compute what would run, send nothing; `server`: ask the Kubernetes API server (dryRun=All)."""

EventSink = Callable[[str], None]
"""Receives kubetrain's own messages about a run (created, restarting, Pending because ...), one line each."""

RunEventKind = Literal["created", "status", "warning", "message"]


@dataclass(frozen=True)
class RunEvent:
    """One thing a backend tells about a run, as data: what a program (the live status line, a notebook, the
    web view) needs without reading message text, whose wording may change.

    - `created`: the job exists; `job_id` is the id every other call takes. Sent once, as soon as the job
      exists, before any `status` event.
    - `status`: the job's or a replica's phase, reason or restarts changed; `status` is the job's status
      then (on Kubernetes from the backend's own watch: pods being scheduled, pulling, starting).
    - `warning`: what the backend honours only approximately (`text` without the `warning: ` prefix).
    - `message`: any other of kubetrain's messages (`text`, as `on_event` gets it).
    """

    kind: RunEventKind
    text: str
    """One line for a person: the message; for `created` and `status`, a summary."""
    job_id: str | None = None
    """The run's job id, once it is known (every event after `created`)."""
    status: JobStatus | None = None
    """`status` events: the job's status (a snapshot of the receiver's own)."""


RunEventSink = Callable[[RunEvent], None]
"""`Backend.run(on_status=...)`: receives every `RunEvent` of the run.

Why a second callback and not `on_event` carrying richer objects: `on_event` consumers print each line
(the CLI, CI logs, programs collecting messages), and a status change has no line worth printing: a job of
64 replicas would print one per pod scheduled, pulled, started. So `on_event` keeps exactly the lines it
had, and a program that wants the run as data passes `on_status` and gets everything there, messages
included (kind `message`/`warning`, the same text), so it needs only the one."""

WARNING_PREFIX = "warning: "
"""How a warning reads on `on_event` (`Backend.run`)."""


class RunEvents:
    """A backend's side of one run's two callbacks: each message as a line to `on_event` and as a `RunEvent`
    to `on_status`; the job's status to `on_status` only when something a person would see changed (phases,
    reasons, restarts), however often the backend looks. Either callback may be None."""

    def __init__(self, on_event: EventSink | None, on_status: RunEventSink | None) -> None:
        self.on_event = on_event
        self.on_status = on_status
        self.job_id: str | None = None
        self._last: tuple[Any, ...] | None = None
        self._lock = threading.Lock()

    @property
    def wants_status(self) -> bool:
        """Someone receives status events: worth the work of building a status."""
        return self.on_status is not None

    def created(self, job_id: str, text: str, *, say: bool = True) -> None:
        """The job exists. `say`: `text` is also one of the run's messages (else only the event's summary)."""
        self.job_id = job_id
        if say and self.on_event is not None:
            self.on_event(text)
        if self.on_status is not None:
            self.on_status(RunEvent("created", text, job_id))

    def message(self, text: str) -> None:
        if self.on_event is not None:
            self.on_event(text)
        if self.on_status is not None:
            self.on_status(RunEvent("message", text, self.job_id))

    def warning(self, text: str) -> None:
        if self.on_event is not None:
            self.on_event(WARNING_PREFIX + text)
        if self.on_status is not None:
            self.on_status(RunEvent("warning", text, self.job_id))

    def say(self, line: str) -> None:
        """A line from code that speaks only text (`on_event`'s convention): a warning when it says so."""
        if line.startswith(WARNING_PREFIX):
            self.warning(line[len(WARNING_PREFIX) :])
        else:
            self.message(line)

    def status(self, status: JobStatus) -> None:
        """The job's status now; an event only if it differs from the last one sent in what it shows."""
        if self.on_status is None:
            return
        seen = (
            status.phase,
            status.reason,
            status.backoff_count,
            tuple((r.role, r.index, r.phase, r.reason, r.restarts) for r in status.replicas),
        )
        with self._lock:  # backends may report from more than one thread
            if seen == self._last:
                return
            self._last = seen
        self.on_status(RunEvent("status", status.summary_line(), self.job_id or status.job_id, status))


BACKENDS: dict[str, str] = {
    "local": "kubetrain.backends.local.backend:LocalBackend",
    "kubernetes": "kubetrain.backends.kubernetes.backend:KubernetesBackend",
}
"""Backend name → `module:class`, imported on `open_backend`. `contract.choices.BACKENDS` lists the names."""


class StillStopping(KubetrainError):
    """`cancel` or `suspend` was accepted, but the job had not stopped when the backend stopped waiting for
    it. The request stands; `status` tells when it has."""


class DryRunReport(Protocol):
    """A server's verdict on a dry run."""

    @property
    def ok(self) -> bool: ...

    def to_dict(self) -> dict[str, Any]: ...

    def format(self) -> str: ...


@dataclass
class RunResult:
    """What `Backend.run` did: ran the job (attached: to its end), started it (detached), created it
    paused, or only showed what would run (dry run)."""

    job_id: str
    """The id every other call takes: the local job id, or the job's name in its namespace."""
    backend: str
    status: JobStatus | None = None
    """The final status when attached, the first one otherwise; None for a dry run."""
    plan: dict[str, Any] | None = None
    """A client dry run: what would run, as data (the local launch plan, the rendered manifests)."""
    dry_run: DryRunReport | None = None
    """A server dry run: the API server's verdict."""
    warnings: list[str] = field(default_factory=list)
    """What the backend honours only approximately or not at all for this job, said before it ran."""
    detached: bool = False
    namespace: str | None = None
    flavor: str | None = None

    @property
    def exit_code(self) -> int:
        """0 succeeded (or started detached, created paused, suspended, a dry run accepted), 1 failed or
        refused, 130 cancelled."""
        if self.dry_run is not None:
            return 0 if self.dry_run.ok else EXIT_FAILED
        if self.status is None or self.detached:
            return 0
        phase = self.status.phase.value
        if phase == "Failed":
            return EXIT_FAILED
        if phase == "Cancelled":
            return EXIT_INTERRUPTED
        return 0


class Description(Protocol):
    """`describe`: the status and what else the backend knows of the job, as text and as data."""

    @property
    def status(self) -> JobStatus: ...

    def status_lines(self) -> list[str]:
        """What `kubetrain status` prints: the summary, a line per replica, why it is stuck or failed."""
        ...

    def text(self) -> str:
        """What `kubetrain describe` prints."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """`describe -o json|yaml`."""
        ...


@runtime_checkable
class Backend(Protocol):
    """Runs jobs somewhere and answers for them by id. Job ids may be given as an unambiguous prefix
    where the backend allows it (local). A verb given the id of a job that is not there raises a
    `KubetrainError` that is also a `LookupError`, so a caller (the web view's 404) tells "no such job"
    from "the job cannot do that" without knowing the backend."""

    name: str

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
        """Create the job and start it. Attached (the default), stream every replica's output to `sink`
        and kubetrain's messages to `on_event` until the job ends; Ctrl-C cancels the job (the result says
        Cancelled). Detached, return once it is started. A paused job (runMode Pause, runPolicy.suspend) is
        created and not started. Relative paths resolve against `job.base_dir` (the job file's folder).
        Warnings (what this backend honours only approximately) go to `on_event` as `warning: ...` before
        anything starts, and into the result.

        `on_status` gets the run as data (`RunEvent`, see `RunEventSink`): `created` with the job id as soon
        as the job exists (also detached or paused), every message, and, while attached, a `status` event
        whenever the job's or a replica's phase, reason or restarts change. It is called from the thread
        that runs the job: a receiver returns quickly (what it draws, it draws elsewhere)."""
        ...

    def status(self, job_id: str) -> JobStatus: ...

    def describe(self, job_id: str) -> Description: ...

    def list(self, *, limit: int | None = None) -> list[JobStatus]:
        """Jobs, newest first."""
        ...

    def logs(
        self,
        job_id: str,
        *,
        role: str | None = None,
        index: int | None = None,
        follow: bool = False,
        tail: int | None = None,
        since: TimeBound | None = None,
        grep: str | GrepPattern | None = None,
        previous: bool = False,
        on_missing: Callable[[str, str], None] | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[LogRecord]:
        """The job's output, merged across replicas in time order (`record.key` names the replica).
        `follow`: go on until the job ends, or until `stop` is set (from another thread: a reader that went
        away, such as a closed web page, whose follower would otherwise wait for the job's next line).
        `on_missing(replica, why)`: a replica with no log yet."""
        ...

    def metrics(self, job_id: str, *, follow: bool = False) -> Iterator[MetricSample]:
        """What the job's replicas logged with `kubetrain.metrics.log`, in time order (per replica: as
        written). `follow`: go on with new samples until the job ends."""
        ...

    def cancel(self, job_id: str) -> JobStatus:
        """Stop the job's replicas; the job ends Cancelled. Raises `StillStopping` if the backend stopped
        waiting before the job had stopped."""
        ...

    def suspend(self, job_id: str) -> JobStatus:
        """Stop the job's replicas and keep the job, to `resume` later. `StillStopping` as for `cancel`."""
        ...

    def resume(self, job_id: str) -> JobStatus: ...

    def scale(self, job_id: str, replicas: int) -> JobStatus:
        """Change the number of workers of an elastic job while it runs, within [minReplicas, maxReplicas]
        (a `UsageError` naming them otherwise): the replicas added join the rendezvous, those removed (the
        highest indexes) are stopped gracefully. Refused, with the reason, for a job that is not elastic or
        a workload whose engine cannot change its size."""
        ...

    def delete(self, job_id: str) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> Backend: ...

    def __exit__(self, *exc: object) -> None: ...


def backend_name(name: str) -> str:
    """The canonical name of a backend (`k8s` → `kubernetes`); UsageError for one that does not exist."""
    canonical = BACKEND_ALIASES.get(name, name)
    if canonical not in BACKENDS:
        known = ", ".join([*BACKENDS, *BACKEND_ALIASES])
        raise UsageError(f"unknown backend {name!r} (known: {known})")
    return canonical


def open_backend(name: str = "local", **options: Any) -> Backend:
    """The backend called `name`, opened with its options:

    - `local`: `preload` (modules replicas import once before being forked; None: by framework);
    - `kubernetes`: `namespace`, `context`, `kubeconfig`, `flavor` (None: JobSet if served, else job),
      `all_namespaces` (for `list`).
    """
    module_name, _, class_name = BACKENDS[backend_name(name)].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    backend: Backend = cls(**options)
    return backend


__all__ = [
    "BACKENDS",
    "WARNING_PREFIX",
    "Backend",
    "Description",
    "DryRun",
    "DryRunReport",
    "EventSink",
    "RunEvent",
    "RunEventKind",
    "RunEventSink",
    "RunEvents",
    "RunResult",
    "StillStopping",
    "backend_name",
    "open_backend",
]
