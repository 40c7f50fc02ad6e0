"""The manifests of a job as most render tests read them: the objects alone, root first.

`render_manifests` is the render's one entry point (it gives the objects, warnings, name and topology as a
`Rendered`); a test that asserts only on the objects reads them through this.
"""

from __future__ import annotations

from typing import Any

from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.contract.choices import DEFAULT_FLAVOR
from kubetrain.jobspec import TrainJob
from kubetrain.plan import Plan


def render(job_or_plan: TrainJob | Plan, flavor: str = DEFAULT_FLAVOR, namespace: str | None = None,
           **options: Any) -> list[dict[str, Any]]:
    """`render_manifests(...).objects`."""
    return render_manifests(job_or_plan, flavor, namespace, **options).objects
