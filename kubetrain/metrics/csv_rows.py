"""Samples as CSV rows: what `kubetrain metrics ID -o csv` prints and the web view's download of a metric
gives, written in one place so the two files are the same."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import TextIO

from ..terminal import escape_controls
from .sample import MetricSample


def write_csv(samples: Iterable[MetricSample], out: TextIO, *, escape: bool = False) -> None:
    """Every sample as a row: time, step, name, value, role, index, rank. `escape`: names and roles with their
    control characters shown escaped (for a terminal)."""
    shown = escape_controls if escape else str
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["time", "step", "name", "value", "role", "index", "rank"])
    for s in samples:
        writer.writerow(
            [
                f"{s.time:.6f}",
                "" if s.step is None else s.step,
                shown(s.name),
                repr(s.value),
                shown(s.role or ""),
                "" if s.index is None else s.index,
                "" if s.rank is None else s.rank,
            ]
        )


__all__ = ["write_csv"]
