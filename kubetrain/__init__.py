"""kubetrain: define, launch, watch and manage distributed training jobs — local processes or Kubernetes.

The public API. Names are imported on first use so `import kubetrain` (and the CLI) stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    "DistributedConfig",
    "JobPhase",
    "JobSpec",
    "JobStatus",
    "Metadata",
    "Plan",
    "Resources",
    "RoleSpec",
    "Run",
    "RunPolicy",
    "SpecError",
    "TrainJob",
    "from_dict",
    "load",
    "load_file",
    "load_text",
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


def render(job: TrainJob, flavor: str = "job", namespace: str | None = None) -> list[dict[str, Any]]:
    """Kubernetes manifests for `job` (plain dicts): flavor job | jobset | volcano | kubeflow."""
    from .backends.kubernetes.render import render_job

    objects, _warnings = render_job(job, flavor, namespace)
    return objects


def run(job: TrainJob, *, base_dir: str = ".", detach: bool = False) -> JobStatus:
    """Run `job` on the local backend. Attached: returns the final status; detached: the initial one."""
    from pathlib import Path

    from .backends.local.backend import LocalBackend

    backend = LocalBackend()
    try:
        job_id, _plan = backend.create(job, Path(base_dir))
        if backend.status(job_id).phase.value != "Suspended":
            if detach:
                backend.start_detached(job_id)
            else:
                backend.run_attached(job_id, None)
        return backend.status(job_id)
    finally:
        backend.close()
