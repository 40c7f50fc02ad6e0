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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ..contract.choices import BACKEND_ALIASES
from ..contract.errors import EXIT_FAILED, EXIT_INTERRUPTED, KubetrainError, UsageError
from ..contract.logs import LogRecord, LogSink, TimeBound

if TYPE_CHECKING:
    from ..jobspec import TrainJob
    from ..metrics.sample import MetricSample
    from ..status import JobStatus

DryRun = Literal["client", "server"]
"""`client`: compute what would run, send nothing; `server`: ask the Kubernetes API server (dryRun=All)."""

EventSink = Callable[[str], None]
"""Receives kubetrain's own messages about a run (created, restarting, Pending because ...), one line each."""

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
    where the backend allows it (local)."""

    name: str

    def run(
        self,
        job: TrainJob,
        *,
        detach: bool = False,
        dry_run: DryRun | None = None,
        sink: LogSink | None = None,
        on_event: EventSink | None = None,
    ) -> RunResult:
        """Create the job and start it. Attached (the default), stream every replica's output to `sink`
        and kubetrain's messages to `on_event` until the job ends; Ctrl-C cancels the job (the result says
        Cancelled). Detached, return once it is started. A paused job (runMode Pause, runPolicy.suspend) is
        created and not started. Relative paths resolve against `job.base_dir` (the job file's folder).
        Warnings (what this backend honours only approximately) go to `on_event` as `warning: ...` before
        anything starts, and into the result."""
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
        grep: str | None = None,
        previous: bool = False,
        on_missing: Callable[[str, str], None] | None = None,
    ) -> Iterator[LogRecord]:
        """The job's output, merged across replicas in time order (`record.key` names the replica).
        `follow`: go on until the job ends. `on_missing(replica, why)`: a replica with no log yet."""
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
    "Backend",
    "Description",
    "DryRun",
    "DryRunReport",
    "EventSink",
    "RunResult",
    "StillStopping",
    "backend_name",
    "open_backend",
]
