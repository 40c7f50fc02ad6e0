"""What each backend makes of one job, as data: the refusals (field-pathed), the warnings, and what would
run (a flavor's manifests, the local launch record). `kubetrain validate` reports it; the parity tests
hold the contract (`kubetrain.backends.parity`) to it.

This module runs both backends, so it imports them, each when asked for; the contract module itself
imports neither (a backend may read the table without pulling in the other backend).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import BACKENDS, KUBERNETES

if TYPE_CHECKING:
    from ...jobspec import TrainJob


@dataclass(frozen=True)
class Problem:
    """One refusal: the spec path it names (`spec.mounts[2]`), its message and hint."""

    path: str
    message: str
    hint: str | None = None

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}"
        return f"{text}\n    hint: {self.hint}" if self.hint else text


@dataclass(frozen=True)
class Observation:
    """One backend's verdict on one job."""

    backend: str
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    output: Any = None
    """What would run: the manifests (a flavor), the launch record as data without its warnings (local); None
    when refused."""

    @property
    def refused(self) -> bool:
        return bool(self.problems)


def observe(job: TrainJob, backend: str) -> Observation:
    """`backend`: `local` or a flavor's name (`BACKENDS`)."""
    if backend == "local":
        return observe_local(job)
    if backend in KUBERNETES:
        return observe_flavor(job, backend)
    raise ValueError(f"unknown backend {backend!r}: one of {', '.join(BACKENDS)}")


def observe_flavor(job: TrainJob, flavor: str) -> Observation:
    """Render `job` for `flavor`: every problem at once (one SpecError), or the objects and warnings."""
    from ...jobspec import SpecError, format_path
    from ..kubernetes.render import render_manifests

    try:
        rendered = render_manifests(job, flavor)
    except SpecError as exc:
        return Observation(flavor, [Problem(format_path(e.path), e.message, e.hint) for e in exc.errors])
    return Observation(flavor, [], list(rendered.warnings), rendered.objects)


def observe_local(job: TrainJob) -> Observation:
    """The local backend's client dry run (what `kubetrain run --dry-run` shows): the launch record and the
    warnings, or its refusals. A throwaway job store: a dry run records nothing."""
    from ...contract.errors import KubetrainError
    from ...jobspec import FieldError, format_path
    from ..local.backend import LocalBackend
    from ..local.store import JobStore

    with tempfile.TemporaryDirectory(prefix="kubetrain-validate-") as folder, \
            LocalBackend(store=JobStore(folder)) as backend:
        try:
            result = backend.run(job, dry_run="client")
        except KubetrainError as exc:
            # A refusal lists its problems as a SpecError does (`errors`: field-pathed); anything else is not
            # a verdict on the job.
            errors = getattr(exc, "errors", None)
            if not isinstance(errors, list) or not all(isinstance(e, FieldError) for e in errors):
                raise
            return Observation("local", [Problem(format_path(e.path), e.message, e.hint) for e in errors])
    record = {k: v for k, v in (result.plan or {}).items() if k != "warnings"}  # what runs; warnings apart
    return Observation("local", [], list(result.warnings), record)


__all__ = ["Observation", "Problem", "observe", "observe_flavor", "observe_local"]
