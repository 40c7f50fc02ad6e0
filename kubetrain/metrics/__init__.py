"""Metrics from training scripts: `kubetrain.metrics.log(step=..., loss=..., samples_per_s=...)`.

In a training script::

    import kubetrain.metrics
    kubetrain.metrics.log(step=step, loss=loss.item(), samples_per_s=rate)

The same call on every backend: locally the values go into the job's folder in the job store (a file per
process), on Kubernetes into the container log as marked lines kubetrain's log readers pick out; with no
kubetrain around it does nothing. `kubetrain metrics ID` shows them, and every backend's `metrics(job_id)`
returns them as `MetricSample`s (parsed by `parse_file_line` and `parse_log_line`, shared by every reader).

Standard library only, and cheap to import: it runs inside every replica, so importing it loads the writer
alone; the readers' names are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .wire import MARKER
from .writer import log

if TYPE_CHECKING:
    from .sample import MetricSample, is_metric_line, parse_file_line, parse_lines, parse_log_line

_READERS = {"MetricSample", "is_metric_line", "parse_file_line", "parse_lines", "parse_log_line"}


def __getattr__(name: str) -> Any:
    if name in _READERS:
        return getattr(importlib.import_module(".sample", __name__), name)
    raise AttributeError(f"module 'kubetrain.metrics' has no attribute {name!r}")


__all__ = [
    "MARKER",
    "MetricSample",
    "is_metric_line",
    "log",
    "parse_file_line",
    "parse_lines",
    "parse_log_line",
]
