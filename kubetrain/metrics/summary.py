"""What a person looks at first: each metric's latest value and its curve as a sparkline.

Shared by `kubetrain metrics`, the progress line of `kubetrain run` and the web view, so "the latest loss"
means one thing everywhere. Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..terminal import escape_controls
from .sample import MetricSample

BARS = "▁▂▃▄▅▆▇█"
NOT_FINITE = "×"
"""A NaN or infinite value in a sparkline: a gap would hide that the loss diverged."""


def source_order(sample: MetricSample) -> tuple[bool, int, str, int]:
    """Sources in a stable, meaningful order: by rank, then by replica (role, index)."""
    return (sample.rank is None, sample.rank or 0, sample.role or "", sample.index or 0)


@dataclass
class MetricSeries:
    """One metric's samples from one source (or from the first source, for the per-metric view), in order."""

    name: str
    source: str
    samples: list[MetricSample] = field(default_factory=list)

    @property
    def latest(self) -> MetricSample:
        return self.samples[-1]

    @property
    def values(self) -> list[float]:
        return [s.value for s in self.samples]


def series(samples: Iterable[MetricSample], *, per_source: bool = False) -> list[MetricSeries]:
    """The samples as series, by metric name (in first-seen order), each in the order logged.

    Per metric (the default), one series: that of its first source (the lowest rank, else the first replica)
    — the chief's view, as when only rank 0 logs. `per_source`: one series per metric and source."""
    by_key: dict[tuple[str, str], MetricSeries] = {}
    first_source: dict[str, tuple[tuple[bool, int, str, int], str]] = {}
    for s in samples:
        src = s.source
        order = source_order(s)
        if not per_source:
            best = first_source.get(s.name)
            if best is None or order < best[0]:
                first_source[s.name] = (order, src)
        key = (s.name, src)
        if key not in by_key:
            by_key[key] = MetricSeries(s.name, src)
        by_key[key].samples.append(s)
    out = list(by_key.values()) if per_source else [by_key[(n, src)] for n, (_, src) in first_source.items()]
    for one in out:
        one.samples.sort(key=lambda s: s.time)
    names = list(dict.fromkeys(s.name for s in by_key.values()))
    return sorted(out, key=lambda one: (names.index(one.name), source_order(one.samples[0])))


def sparkline(values: Sequence[float], width: int = 24) -> str:
    """`values` as at most `width` bars, low to high (older points averaged into a bar when there are more)."""
    if not values or width <= 0:
        return ""
    if len(values) > width:
        buckets: list[float] = []
        for i in range(width):
            chunk = values[i * len(values) // width : (i + 1) * len(values) // width]
            buckets.append(math.fsum(chunk) / len(chunk) if all(math.isfinite(v) for v in chunk) else math.nan)
        values = buckets
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return NOT_FINITE * len(values)
    low, high = min(finite), max(finite)
    span = high - low
    out = []
    for v in values:
        if not math.isfinite(v):
            out.append(NOT_FINITE)
        elif span == 0:
            out.append(BARS[len(BARS) // 2])
        else:
            out.append(BARS[min(len(BARS) - 1, int((v - low) / span * len(BARS)))])
    return "".join(out)


NAME_WIDTH = 40
"""The most characters of a metric's name a table or the status line shows (csv and json give it whole)."""



def display_name(name: str, width: int = NAME_WIDTH) -> str:
    """A metric's name as one terminal cell: control characters and text-reordering marks shown escaped
    (`\\x0a`: a newline would split a row, an escape sequence would reach the terminal, `\\u202e` would show
    the rest of the row backwards), cut to `width` characters with an ellipsis
    (a long name would widen every row)."""
    shown = escape_controls(name)
    return shown if len(shown) <= width else shown[: max(0, width - 1)] + "…"


def format_value(value: float) -> str:
    """A metric value compactly: 4 significant digits, as a person reads a loss or a throughput."""
    if not math.isfinite(value):
        return str(value)
    if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
        return f"{value:.3e}"
    return f"{value:.4g}"


__all__ = [
    "BARS",
    "NAME_WIDTH",
    "NOT_FINITE",
    "MetricSeries",
    "display_name",
    "format_value",
    "series",
    "source_order",
    "sparkline",
]
