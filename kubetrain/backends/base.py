"""The one interface every backend implements, and `open_backend`, the one way to get one.

A job means the same on every backend, so every backend answers the same calls: `run` a job (attached,
detached, or as a dry run), then `status`, `describe`, `list`, `logs`, `cancel`, `suspend`, `resume`,
`delete` by job id. The CLI has one handler per verb and calls only this; `kubetrain.run` is the same call
the CLI makes. What differs between backends is given once, when the backend is opened (a Kubernetes
namespace and flavor, the local backend's preloaded modules), not on every call.

Each backend declares what it is opened with as a typed dataclass, a `BackendOptions` subclass in a light
module of its own (`local/options.py`, `kubernetes/options.py`: no import of the backend itself), whose
fields carry their command-line form (`option`): the CLI builds its flags from them, so an option is one
field. What a caller would otherwise learn by comparing backend names is declared instead: on the options
(`verdicts`, `runs_as_written`, `pod_templates`), on the backend (`metrics_in_output`, `changes`,
`framework`, `processes`) or on what it returns (`RunResult.plan_notes`, `RunResult.interrupted`,
`Description.spec`, `Description.diagnoses`, `JobStatus.placed_by_scheduler`).

Modelled on TorchX's `Scheduler` (one class, dry run then schedule; `runopts`, the typed options a scheduler
declares and the CLI offers) and the Kubeflow SDK's `TrainerClient` (one facade; a backend's configuration
is a typed object, `KubernetesBackendConfig`). Backends are imported only when opened, so choosing one
costs nothing for the others.
"""

from __future__ import annotations

import dataclasses
import importlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple, Protocol, runtime_checkable

from ..contract.choices import BACKEND_ALIASES, DEFAULT_BACKEND
from ..contract.errors import EXIT_FAILED, EXIT_INTERRUPTED, KubetrainError, UsageError
from .run_events import WARNING_PREFIX, EventSink, RunEvent, RunEventKind, RunEvents, RunEventSink

if TYPE_CHECKING:
    from ..contract.logs import GrepPattern, LogRecord, LogSink, LogStream, TimeBound
    from ..jobspec import TrainJob
    from ..metrics.sample import MetricSample
    from ..status import JobStatus

DryRun = Literal["client", "server"]
"""`client`: compute what would run, send nothing; `server`: ask the Kubernetes API server (dryRun=All)."""

BACKENDS: dict[str, str] = {
    "local": "kubetrain.backends.local.backend:LocalBackend",
    "kubernetes": "kubetrain.backends.kubernetes.backend:KubernetesBackend",
}
"""Backend name → `module:class`, imported on `open_backend`. `contract.choices.BACKENDS` lists the names."""

BACKEND_OPTIONS: dict[str, str] = {
    "local": "kubetrain.backends.local.options:LocalOptions",
    "kubernetes": "kubetrain.backends.kubernetes.options:KubernetesOptions",
}
"""Backend name → `module:class` of its `BackendOptions`: light modules that import no backend, so the CLI
builds its flags from them without paying for the backends (`kubetrain list` stays fast)."""


# -- what a backend is opened with ----------------------------------------------------------------------------


class Option(NamedTuple):
    """How an option of a backend reads on the command line: the metadata of a `BackendOptions` field
    (`option()` makes the field). The CLI adds one flag per such field to each verb that takes it; a field
    with no `flags` is for Python callers only. (This and the other small records here are NamedTuples, not
    dataclasses: every CLI verb imports this module to build its flags, and a dataclass costs ~0.3 ms to make.)"""

    help: str
    flags: tuple[str, ...] = ()
    """`("-n", "--namespace")`; the flag's value lands in the field of the same name."""
    verbs: tuple[str, ...] | None = None
    """The CLI verbs that take it; None: every verb that opens a backend."""
    choices: tuple[str, ...] | None = None
    parse: Callable[[str], Any] | None = None
    """The flag's text → the field's value (raising `ValueError` or `argparse.ArgumentTypeError` with the
    reason); None: the text itself. A field whose default is a bool is a switch (no value)."""
    metavar: str | None = None
    locates: bool = False
    """Part of where the backend finds a job again (a namespace, a kubeconfig): said again in the hints a
    verb prints (`kubetrain logs ID --backend kubernetes -n ml`)."""


def option(default: Any, help: str, *, flags: Sequence[str] = (), verbs: Sequence[str] | None = None,
           choices: Sequence[str] | None = None, parse: Callable[[str], Any] | None = None,
           metavar: str | None = None, locates: bool = False) -> Any:
    """A field of a `BackendOptions` dataclass, with its command-line form (`Option`)."""
    spec = Option(help, tuple(flags), None if verbs is None else tuple(verbs),
                  None if choices is None else tuple(choices), parse, metavar, locates)
    return field(default=default, metadata={"option": spec})


def option_of(f: dataclasses.Field[Any]) -> Option | None:
    """The command-line form of a `BackendOptions` field (None: not an option)."""
    spec = f.metadata.get("option")
    return spec if isinstance(spec, Option) else None


class Problem(NamedTuple):
    """One refusal of a job, before it runs: the spec path it names (`spec.mounts[2]`), its message and hint."""

    path: str
    message: str
    hint: str | None = None

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}"
        return f"{text}\n    hint: {self.hint}" if self.hint else text


@dataclass(frozen=True)
class Verdict:
    """What one way of running a job makes of it before anything runs (`BackendOptions.verdicts`): the
    local backend, or one Kubernetes flavor."""

    backend: str
    """The way it names: `local`, or a flavor's name."""
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    output: Any = None
    """What would run: the manifests (a flavor), the launch record as data without its warnings (local); None
    when refused."""
    label: str = ""
    """How a person names it: `the local backend`, `flavor jobset`."""
    kind: str = "backend"
    """What the ways of its backend are called, when it has several (`flavor`)."""

    @property
    def refused(self) -> bool:
        return bool(self.problems)


@dataclass(frozen=True)
class BackendOptions:
    """What a backend is opened with; each backend's own subclass declares its fields with `option()`
    (TorchX's `runopts`, the Kubeflow SDK's backend configs). `open_backend` passes the fields to the
    backend's constructor as keywords of the same names."""

    backend: ClassVar[str]
    """The backend these options open (its name in `BACKENDS`)."""
    title: ClassVar[str]
    """How its options are headed in `--help` (`Kubernetes`), and how a person names it."""
    pod_templates: ClassVar[bool] = True
    """The backend runs pods from the job's pod templates (whose render then says each security setting it
    relaxes); where it does not, the CLI says once that their security settings are not used."""
    logs_outlive_replicas: ClassVar[bool] = True
    """The replicas' logs stay readable as long as the job (locally: files of their own); where they do not
    (Kubernetes: a pod's log goes with the pod), only what a follower read and kept on this machine outlives
    them, which `kubetrain run --detach --keep-logs` starts one for."""

    def keywords(self) -> dict[str, Any]:
        """The fields as the backend's constructor takes them."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @property
    def runs_as_written(self) -> bool:
        """A foreign document kubetrain cannot convert may still be handed to the engine as written (a
        cluster that runs its kind's controller), so `run` tries the backend before refusing the file."""
        return False

    def verdicts(self, job: TrainJob) -> list[Verdict]:
        """What this backend would make of `job`, without running it and without reaching anything
        (`kubetrain validate --backend`): one verdict per way it could run it (each Kubernetes flavor, unless
        one is named). The backend refuses the job when every verdict refuses it."""
        raise NotImplementedError

    def survey(self) -> tuple[list[str], str | None]:
        """What `kubetrain validate --backend` adds about where jobs would run: lines for a person (on
        Kubernetes, with a kubeconfig to read: what the cluster can run, engine by engine), and a note when
        it could not be asked. Nothing where there is nothing to ask."""
        return [], None


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
    plan_notes: str | None = None
    """A client dry run: how to read `plan`, for a person (the CLI prints it as a YAML comment above it)."""
    interrupted: bool = False
    """Attached: the job was cancelled because this process was interrupted (Ctrl-C), as the backend saw it
    (the local supervisor handles SIGINT itself while it runs)."""
    interrupted_by: int | None = None
    """Attached and cancelled because this process received a signal, as the backend saw it: the signal's
    number (SIGINT for Ctrl-C, SIGTERM), so the exit status is 128 + it, as a shell reports a command that
    signal ended (the local supervisor handles both itself while it runs)."""

    @property
    def exit_code(self) -> int:
        """0 succeeded (or started detached, created paused, suspended, a dry run accepted), 1 failed or
        refused, 130 cancelled (143: cancelled by a SIGTERM to this process, `interrupted_by`)."""
        if self.dry_run is not None:
            return 0 if self.dry_run.ok else EXIT_FAILED
        if self.status is None or self.detached:
            return 0
        phase = self.status.phase.value
        if phase == "Failed":
            return EXIT_FAILED
        if phase == "Cancelled":
            return 128 + self.interrupted_by if self.interrupted_by else EXIT_INTERRUPTED
        return 0


class Cause(Protocol):
    """Why replicas wait (`Description.diagnoses`): a cause, its message and a hint."""

    def line(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


class Description(Protocol):
    """`describe`: the status and what else the backend knows of the job, as text and as data."""

    @property
    def status(self) -> JobStatus: ...

    @property
    def spec(self) -> dict[str, Any] | None:
        """The job as submitted: the TrainJob document locally, the root workload object on Kubernetes (without
        its managedFields and status)."""
        ...

    @property
    def diagnoses(self) -> Sequence[Cause]:
        """Why Pending replicas wait, a cause each (none locally: a local replica does not wait for a place)."""
        ...

    def status_lines(self, wide: bool = False) -> list[str]:
        """What `kubetrain status` prints: the summary, the replicas (a line each for a small job or `wide`, else
        a line per role and the replicas not in its usual state: `status_text.replica_lines`), why it is stuck
        or failed."""
        ...

    def text(self) -> str:
        """What `kubetrain describe` prints."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """`describe -o json|yaml`."""
        ...


class Changes(Protocol):
    """A running change feed (`Backend.changes`)."""

    @property
    def error(self) -> BaseException | None:
        """Why the feed stopped seeing changes (the store moved aside, the API server unreachable), if it did."""
        ...

    def stop(self) -> None:
        """Stop the feed's thread (the backend stays open)."""
        ...


class ReplicaProcess(NamedTuple):
    """One process of a job as `kubetrain attach` starts it again: its key (`worker-0`), argv, whole env
    and working directory."""

    key: str
    argv: list[str]
    env: dict[str, str]
    cwd: str | None


class JobProcesses(NamedTuple):
    """`Backend.processes`: the job's full id (a prefix may have been given) and its replicas' processes."""

    job_id: str
    processes: list[ReplicaProcess]


@runtime_checkable
class Backend(Protocol):
    """Runs jobs somewhere and answers for them by id. Job ids may be given as an unambiguous prefix
    where the backend allows it (local). A verb given the id of a job that is not there raises a
    `KubetrainError` that is also a `LookupError`, so a caller (the web view's 404) tells "no such job"
    from "the job cannot do that" without knowing the backend."""

    name: str
    metrics_in_output: bool
    """The replicas' metric samples travel in their output (Kubernetes: `@kubetrain:metrics ` lines of the
    container logs), so whoever reads the output of a run sees them; else (locally: files of their own) they
    are read with `metrics`."""

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
        until: TimeBound | None = None,
        grep: str | GrepPattern | None = None,
        stream: LogStream | None = None,
        previous: bool = False,
        on_missing: Callable[[str, str], None] | None = None,
        stop: threading.Event | None = None,
        on_note: Callable[[str], None] | None = None,
    ) -> Iterator[LogRecord]:
        """The job's output, merged across replicas in time order (`record.key` names the replica).
        `follow`: go on until the job ends, or until `stop` is set (from another thread: a reader that went
        away, such as a closed web page, whose follower would otherwise wait for the job's next line).
        `since`/`until`: lines at or after / before these times (`until` ends the output: it cannot be
        followed). `stream`: only the replicas' stdout or stderr (None: both) — where the backend can tell them
        apart (locally; the Kubernetes API merges them: a `UsageError` says so). `on_missing(replica, why)`: a
        replica with no log yet. `on_note(text)`: what the reader should know about where the lines come from,
        once each: a follow that streams only some replicas (Kubernetes, `--max-log-requests`), logs read
        from what this machine kept because the cluster has them no more."""
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

    def changes(self, on_change: Callable[[], None]) -> Changes:
        """Start a change feed: `on_change()` is called, from a thread of the backend's, whenever one of its
        jobs may have changed (locally a commit to the job store, on Kubernetes an event of a watch on its
        workloads and pods), until the feed is stopped. Bursts are not coalesced: the receiver does that."""
        ...

    def framework(self, job_id: str) -> str:
        """The job's framework (`pytorch`, ...; "" when unknown, as for a foreign document run as written).
        Cheap, for a table of jobs: locally one read of the store; on Kubernetes, while a change feed runs,
        from what its watches hold (no request)."""
        ...

    def processes(self, job_id: str) -> JobProcesses:
        """What each replica process of the job runs (argv, env, working directory), to start one again by
        hand (`kubetrain attach`). A backend whose replicas run elsewhere (Kubernetes) raises `UsageError`
        saying how to get there."""
        ...

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


def options_class(name: str) -> type[BackendOptions]:
    """The `BackendOptions` subclass of the backend called `name` (its light module alone is imported)."""
    module_name, _, class_name = BACKEND_OPTIONS[backend_name(name)].partition(":")
    cls: type[BackendOptions] = getattr(importlib.import_module(module_name), class_name)
    return cls


def options_classes() -> dict[str, type[BackendOptions]]:
    """Every backend's options class, by backend name."""
    return {name: options_class(name) for name in BACKEND_OPTIONS}


def open_backend(name: str | BackendOptions = DEFAULT_BACKEND, options: BackendOptions | None = None, /,
                 **keywords: Any) -> Backend:
    """The backend called `name`, opened with its options: a `BackendOptions` of that backend
    (`LocalOptions`, `KubernetesOptions`; given alone, it names its backend, as the Kubeflow SDK's backend
    configs do), or the same fields as keywords (`open_backend("kubernetes", namespace="ml")`). Keywords that
    are no field of the options go to the backend's constructor as they are (for tests and tools: a
    Kubernetes `api_client`, `retry`)."""
    if isinstance(name, BackendOptions):
        options, name = name, name.backend
    canonical = backend_name(name)
    cls_options = options_class(canonical)
    if options is None:
        fields = {f.name for f in dataclasses.fields(cls_options)}
        options = cls_options(**{k: v for k, v in keywords.items() if k in fields})
        keywords = {k: v for k, v in keywords.items() if k not in fields}
    elif not isinstance(options, cls_options):
        raise UsageError(f"{type(options).__name__} are not the options of the {canonical} backend "
                         f"(those are {cls_options.__name__})")
    module_name, _, class_name = BACKENDS[canonical].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    backend: Backend = cls(**options.keywords(), **keywords)
    return backend


__all__ = [
    "BACKENDS",
    "BACKEND_OPTIONS",
    "WARNING_PREFIX",
    "Backend",
    "BackendOptions",
    "Cause",
    "Changes",
    "Description",
    "DryRun",
    "DryRunReport",
    "EventSink",
    "JobProcesses",
    "Option",
    "Problem",
    "ReplicaProcess",
    "RunEvent",
    "RunEventKind",
    "RunEventSink",
    "RunEvents",
    "RunResult",
    "StillStopping",
    "Verdict",
    "backend_name",
    "open_backend",
    "option",
    "option_of",
    "options_class",
    "options_classes",
]
