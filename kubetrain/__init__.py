"""kubetrain: define, launch, watch and manage distributed training jobs — local processes or Kubernetes.

The public API. Names are imported on first use so `import kubetrain` (and the CLI) stays fast.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from .contract.choices import DEFAULT_FLAVOR

if TYPE_CHECKING:
    from .backends.base import Backend, BackendOptions, RunEvent, RunResult, open_backend
    from .backends.kubernetes.client.errors import KubernetesError
    from .backends.kubernetes.options import KubernetesOptions
    from .backends.local.errors import LocalError
    from .backends.local.options import LocalOptions
    from .backends.local.store_connection import StoreError
    from .contract.errors import JobNotFound, KubetrainError, UsageError
    from .contract.logs import LogRecord, LogSink
    from .foreign import Conversion, convert
    from .foreign.torchx import from_torchx
    from .jobspec import (
        DistributedConfig,
        JobSpec,
        Metadata,
        Resources,
        RoleSpec,
        Run,
        RunPolicy,
        SpecError,
        TrainJob,
        from_dict,
        load_file,
        load_text,
    )
    from .plan import Plan, plan
    from .status import JobPhase, JobStatus

_EXPORTS = {
    "Backend": "backends.base",
    "RunResult": "backends.base",
    "RunEvent": "backends.base",
    "open_backend": "backends.base",
    "LocalOptions": "backends.local.options",
    "KubernetesOptions": "backends.kubernetes.options",
    "KubetrainError": "contract.errors",
    "UsageError": "contract.errors",
    "JobNotFound": "contract.errors",
    "LocalError": "backends.local.errors",
    "StoreError": "backends.local.store_connection",
    "KubernetesError": "backends.kubernetes.client.errors",
    "LogRecord": "contract.logs",
    "LogSink": "contract.logs",
    "TrainJob": "jobspec",
    "JobSpec": "jobspec",
    "Metadata": "jobspec",
    "RoleSpec": "jobspec",
    "Run": "jobspec",
    "Resources": "jobspec",
    "RunPolicy": "jobspec",
    "DistributedConfig": "jobspec",
    "SpecError": "jobspec",
    "load_file": "jobspec",
    "load_text": "jobspec",
    "from_dict": "jobspec",
    "from_torchx": "foreign.torchx",
    "Conversion": "foreign",
    "convert": "foreign",
    "plan": "plan",
    "Plan": "plan",
    "JobStatus": "status",
    "JobPhase": "status",
}

__all__ = [
    "Backend",
    "Conversion",
    "DistributedConfig",
    "JobNotFound",
    "JobPhase",
    "JobSpec",
    "JobStatus",
    "KubernetesError",
    "KubernetesOptions",
    "KubetrainError",
    "LocalError",
    "LocalOptions",
    "LogRecord",
    "LogSink",
    "Metadata",
    "Plan",
    "Resources",
    "RoleSpec",
    "Run",
    "RunEvent",
    "RunPolicy",
    "RunResult",
    "SpecError",
    "StoreError",
    "TrainJob",
    "UsageError",
    "convert",
    "from_dict",
    "from_torchx",
    "load",
    "load_file",
    "load_text",
    "open_backend",
    "plan",
    "render",
    "run",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'kubetrain' has no attribute {name!r}")


def load(path: str, *, overrides: list[str] | None = None) -> TrainJob:
    """Read a job file (templates resolved, `--set`-style overrides applied, validated): a TrainJob, or a foreign
    kind kubetrain converts (DeepSpeedJob, TrainingWorkload, Kubeflow jobs, JobSet, Volcano Job); `convert` gives
    a foreign document's notes too."""
    from .foreign.loader import load_job_file

    return load_job_file(path, overrides=overrides or [])[0]


def render(job: TrainJob, flavor: str = DEFAULT_FLAVOR, namespace: str | None = None) -> list[dict[str, Any]]:
    """Kubernetes manifests for `job` (plain dicts): flavor job | jobset | volcano | kubeflow (UsageError
    for another)."""
    from .backends.kubernetes.render import render_manifests

    return render_manifests(job, flavor, namespace).objects


def run(
    job: TrainJob,
    *,
    backend: str | BackendOptions = "local",
    detach: bool = False,
    dry_run: Literal["client", "server"] | None = None,
    sink: LogSink | None = None,
    quiet: bool = False,
    on_event: Callable[[str], None] | None = None,
    on_status: Callable[[RunEvent], None] | None = None,
    base_dir: str | None = None,
    **options: Any,
) -> RunResult:
    """Run `job` on `backend`: the same call `kubetrain run` makes.

    Attached (the default), returns when the job has ended, `result.status` its final status. Detached,
    returns once it is started.

    Replicas' output: as the CLI does, it is shown `[role-index]` prefixed (`kubetrain.terminal.OutputSink`)
    when standard output is a terminal or this runs in a notebook (ipykernel); otherwise it goes only to the
    job's logs (`kubetrain logs ID`). `sink=` sends it elsewhere (any `contract.logs.LogSink`, e.g.
    `OutputSink(out=file)`); `quiet=True` shows none. Lines `kubetrain.metrics.log` printed into it (on
    Kubernetes) are left out, as `kubetrain logs` leaves them out (`kubetrain metrics ID` reads them).
    kubetrain's own messages go to `on_event`, one line each.

    `on_status` gets the run as data (`kubetrain.backends.base.RunEvent`): `created` with the job id as soon
    as the job exists, `status` with the job's status whenever the job's or a replica's phase or restarts
    change, and every message. It is called from the thread that runs the job, so it should return quickly.

    Ctrl-C while attached cancels the job as in the CLI (its replicas stopped, the job recorded Cancelled),
    then raises `KeyboardInterrupt`, so a loop of runs (a sweep) stops too.

    `base_dir`: where relative paths of the job resolve (default: the job file's folder, see
    `TrainJob.base_dir`, else the current folder). `backend` is a backend's name, or its options, which name
    it: `backend=KubernetesOptions(namespace="ml", flavor="jobset")`, `backend=LocalOptions(preload=[])`;
    with a name, `options` are their fields as keywords (`open_backend`).
    """
    import signal
    import sys
    import threading

    from .backends.base import open_backend

    if base_dir is not None:
        job = job.with_base_dir(base_dir)
    if quiet:
        sink = None
    elif sink is None and not detach and _interactive():
        from .terminal import OutputSink

        sink = OutputSink()
    if sink is not None:
        from .progress import MetricLines

        sink = MetricLines(sink)
    interrupted = False

    def on_interrupt(signum: int, frame: object) -> None:
        nonlocal interrupted
        interrupted = True
        raise KeyboardInterrupt

    # Only Python's own Ctrl-C handler is replaced (a backend that follows a job catches the KeyboardInterrupt
    # and cancels it; the local supervisor installs its own, and records why the job was cancelled).
    watch = threading.current_thread() is threading.main_thread() and (
        signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    previous = signal.signal(signal.SIGINT, on_interrupt) if watch else None
    try:
        with open_backend(backend, **options) as opened:
            result = opened.run(job, detach=detach, dry_run=dry_run, sink=sink, on_event=on_event, on_status=on_status)
    finally:
        if watch:
            signal.signal(signal.SIGINT, previous)
        if sink is not None:
            sink.flush()
    status = result.status
    # `result.interrupted`: a Ctrl-C our handler did not see (the local supervisor, attached in this process,
    # handles SIGINT itself while it runs) cancelled the job.
    if status is not None and status.phase.value == "Cancelled" and (interrupted or result.interrupted):
        sys.stderr.flush()
        raise KeyboardInterrupt(f"job {result.job_id} cancelled by Ctrl-C")
    return result


def _interactive() -> bool:
    """Where the CLI shows replicas' output: standard output is a terminal, or this is a notebook."""
    import sys

    if "ipykernel" in sys.modules:
        return True
    try:
        return bool(sys.stdout is not None and sys.stdout.isatty())
    except (AttributeError, ValueError):
        return False
