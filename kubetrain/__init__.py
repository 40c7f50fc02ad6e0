"""kubetrain: define, launch, watch and manage distributed training jobs — local processes or Kubernetes.

The public API. Names are imported on first use so `import kubetrain` (and the CLI) stays fast.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from .contract.choices import DEFAULT_FLAVOR

if TYPE_CHECKING:
    from .backends.base import Backend, RunResult, open_backend
    from .backends.kubernetes.client.errors import KubernetesError
    from .backends.local.backend import LocalError
    from .backends.local.store import StoreError
    from .contract.errors import KubetrainError, UsageError
    from .contract.logs import LogRecord, LogSink
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
    "open_backend": "backends.base",
    "KubetrainError": "contract.errors",
    "UsageError": "contract.errors",
    "LocalError": "backends.local.backend",
    "StoreError": "backends.local.store",
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
    "plan": "plan",
    "Plan": "plan",
    "JobStatus": "status",
    "JobPhase": "status",
}

__all__ = [
    "Backend",
    "DistributedConfig",
    "JobPhase",
    "JobSpec",
    "JobStatus",
    "KubernetesError",
    "KubetrainError",
    "LocalError",
    "LogRecord",
    "LogSink",
    "Metadata",
    "Plan",
    "Resources",
    "RoleSpec",
    "Run",
    "RunPolicy",
    "RunResult",
    "SpecError",
    "StoreError",
    "TrainJob",
    "UsageError",
    "from_dict",
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
    """Read a TrainJob YAML file (templates resolved, `--set`-style overrides applied, validated)."""
    from .jobspec import load_file

    return load_file(path, overrides=overrides or [])


def render(job: TrainJob, flavor: str = DEFAULT_FLAVOR, namespace: str | None = None) -> list[dict[str, Any]]:
    """Kubernetes manifests for `job` (plain dicts): flavor job | jobset | volcano | kubeflow (UsageError
    for another)."""
    from .backends.kubernetes.render import render_job

    objects, _warnings = render_job(job, flavor, namespace)
    return objects


def run(
    job: TrainJob,
    *,
    backend: str = "local",
    detach: bool = False,
    dry_run: Literal["client", "server"] | None = None,
    sink: LogSink | None = None,
    on_event: Callable[[str], None] | None = None,
    base_dir: str | None = None,
    **options: Any,
) -> RunResult:
    """Run `job` on `backend`: the same call `kubetrain run` makes.

    Attached (the default), returns when the job has ended, `result.status` its final status; replicas'
    output goes to `sink` (None: only to the backend's logs; `kubetrain.terminal.OutputSink()` prints it
    as the CLI does) and kubetrain's own messages to `on_event`. Detached, returns once it is started.
    `base_dir`: where relative paths of the job resolve (default: the job file's folder, see
    `TrainJob.base_dir`, else the current folder). `options` open the backend (`open_backend`): e.g.
    `namespace=`, `flavor=` on Kubernetes, `preload=` locally.
    """
    from .backends.base import open_backend

    if base_dir is not None:
        job = job.with_base_dir(base_dir)
    with open_backend(backend, **options) as opened:
        return opened.run(job, detach=detach, dry_run=dry_run, sink=sink, on_event=on_event)
