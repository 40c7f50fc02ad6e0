"""What each backend makes of one job, as data: the refusals (field-pathed), the warnings, and what would
run (a flavor's manifests, the local launch record), as `kubetrain validate` reports it; the parity tests
hold the contract (`kubetrain.backends.parity`) to it.

Each backend's options say it (`BackendOptions.verdicts`); this module asks both, so it imports them, each
when asked for; the contract module itself imports neither (a backend may read the table without pulling in
the other backend).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import Problem, Verdict
from . import BACKENDS, KUBERNETES

if TYPE_CHECKING:
    from ...jobspec import TrainJob

Observation = Verdict
"""One backend's verdict on one job (`backends.base.Verdict`, what `BackendOptions.verdicts` gives)."""


def observe(job: TrainJob, backend: str) -> Observation:
    """`backend`: `local` or a flavor's name (`BACKENDS`)."""
    if backend == "local":
        return observe_local(job)
    if backend in KUBERNETES:
        return observe_flavor(job, backend)
    raise ValueError(f"unknown backend {backend!r}: one of {', '.join(BACKENDS)}")


def observe_flavor(job: TrainJob, flavor: str) -> Observation:
    """Render `job` for `flavor`: every problem at once (one SpecError), or the objects and warnings."""
    from ..kubernetes.options import KubernetesOptions

    return KubernetesOptions(flavor=flavor).verdicts(job)[0]


def observe_local(job: TrainJob) -> Observation:
    """The local backend's client dry run (what `kubetrain run --dry-run` shows): the launch record and the
    warnings, or its refusals. A throwaway job store: a dry run records nothing."""
    from ..local.options import LocalOptions

    return LocalOptions().verdicts(job)[0]


__all__ = ["Observation", "Problem", "observe", "observe_flavor", "observe_local"]
