"""What the local backend is opened with (`LocalOptions`), and its verdict on a job before it runs.

Light on purpose: the CLI imports this module to build its flags (`kubetrain list` must not pay for the
backend, its store or the planner); the backend itself is imported only by `verdicts`, when asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ..base import BackendOptions, Problem, Verdict, option

if TYPE_CHECKING:
    from ...jobspec import TrainJob


def preload_modules(text: str) -> list[str]:
    """`--preload torch,numpy` → the modules; 'none' or '' → [] (preload nothing)."""
    modules = [m.strip() for m in text.split(",") if m.strip() and m.strip() != "none"]
    for m in modules:
        if not all(part.isidentifier() for part in m.split(".")):
            import argparse  # the CLI's own error: `--preload: 'torch;rm' is not a module name`

            raise argparse.ArgumentTypeError(f"{m!r} is not a module name (give e.g. torch or torch,numpy)")
    return modules


@dataclass(frozen=True)
class LocalOptions(BackendOptions):
    """The local backend's options (`open_backend(LocalOptions(...))`)."""

    backend: ClassVar[str] = "local"
    title: ClassVar[str] = "local"
    pod_templates: ClassVar[bool] = False  # the program runs on this machine, as the user: no pod at all

    preload: Sequence[str] | None = option(
        None,
        "local: modules that Python replicas import once, in a process that then forks each replica "
        "(default: torch for pytorch jobs, none otherwise; 'none' turns it off); see README, Local backend",
        flags=["--preload"], verbs=["run"], parse=preload_modules, metavar="MODULES",
    )
    """Modules Python replicas import once before being forked (None: the framework's; empty: none)."""

    def verdicts(self, job: TrainJob) -> list[Verdict]:
        """The local backend's client dry run (what `kubetrain run --dry-run` shows): the launch record and the
        warnings, or its refusals. A throwaway job store: a dry run records nothing."""
        import tempfile

        from ...contract.errors import KubetrainError
        from ...jobspec import FieldError, format_path
        from .backend import LocalBackend
        from .store import JobStore

        label = "the local backend"
        with tempfile.TemporaryDirectory(prefix="kubetrain-validate-") as folder, \
                LocalBackend(store=JobStore(folder), preload=self.preload) as backend:
            try:
                result = backend.run(job, dry_run="client")
            except KubetrainError as exc:
                # A refusal lists its problems as a SpecError does (`errors`: field-pathed); anything else is not
                # a verdict on the job.
                errors = getattr(exc, "errors", None)
                if not isinstance(errors, list) or not all(isinstance(e, FieldError) for e in errors):
                    raise
                problems = [Problem(format_path(e.path), e.message, e.hint) for e in errors]
                return [Verdict(self.backend, problems, label=label)]
        record = {k: v for k, v in (result.plan or {}).items() if k != "warnings"}  # what runs; warnings apart
        return [Verdict(self.backend, [], list(result.warnings), record, label=label)]


__all__ = ["LocalOptions", "preload_modules"]
