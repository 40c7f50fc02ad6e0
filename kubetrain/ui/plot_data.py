"""One metric's samples as the page's interactive plot draws them: a line per series and attempt.

A series is a rank (or a replica, `svg.series_label`). A job that restarts logs its steps again from where
its script starts (a checkpoint's step, or 0): the samples of one series then go back in step. Each time a
series' step goes back, a new attempt begins, and it is a line of its own: merged into one line, attempt 1's
steps 1-15 and attempt 2's steps 1-20 would draw a saw-tooth by step, and by time a line straight across the
downtime. Told from the steps themselves, so it holds for every backend and for restarts kubetrain did not
make (a pod replaced, torchrun's elastic restarts).

The values are JSON numbers; NaN and infinities, which JSON has no word for, are null with their kind in
`special` (index → `nan`, `inf`, `-inf`), as `kubetrain metrics -o json` says them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .svg import natural_key, series_label


def attempts(samples: Iterable[Any]) -> list[list[Any]]:
    """`samples` of one series, in the order they were logged, cut where the step goes back (a restart)."""
    out: list[list[Any]] = []
    last: int | None = None
    for s in samples:
        step = s.step
        if not out or (step is not None and last is not None and step < last):
            out.append([])
        out[-1].append(s)
        if step is not None:
            last = step
    return out


def plot_series(samples: Iterable[Any]) -> list[dict[str, Any]]:
    """The lines of one metric: per series (natural order: `rank 2` before `rank 10`) and attempt (1, 2, ...),
    each with its steps, times and values in logged order, and `attempts`, how many its series had."""
    by_label: dict[str, list[Any]] = {}
    for s in samples:
        by_label.setdefault(series_label(s), []).append(s)
    lines: list[dict[str, Any]] = []
    for label in sorted(by_label, key=natural_key):
        logged = sorted(by_label[label], key=lambda s: s.time)  # stable: one time's samples keep their order
        runs = attempts(logged)
        for n, run in enumerate(runs, start=1):
            special = {str(i): str(s.value) for i, s in enumerate(run) if not math.isfinite(s.value)}
            lines.append(
                {
                    "label": label,
                    "attempt": n,
                    "attempts": len(runs),
                    "step": [s.step for s in run],
                    "time": [s.time for s in run],
                    "value": [s.value if math.isfinite(s.value) else None for s in run],
                    "special": special,
                }
            )
    return lines


__all__ = ["attempts", "plot_series"]
