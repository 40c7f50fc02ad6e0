"""A metric sample and its two written forms: a line of a replica's metrics file, and a marked line of its output.

`kubetrain.metrics.log(step=3, loss=0.25, samples_per_s=812.0)` writes ONE record for the call:

    {"time": 1767225600.125, "step": 3, "role": "worker", "index": 0, "rank": 1, "values": {"loss": 0.25, ...}}

- in a metrics file (the local backend gives each process its own, in the job's folder): that JSON, one
  line per call;
- in a replica's output (on Kubernetes, where the container log is what kubetrain can read): the same JSON
  after `MARKER`, at the start of a line, so log readers pick it out and `kubetrain logs` can hide it.

A record becomes one `MetricSample` per value. The UI, the CLI and the progress line all read samples through
the parsers here, so the format is written and read in one place. Standard library only: the writer runs in
every replica, and the readers in the CLI.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .wire import MARKER, format_record


@dataclass(frozen=True, slots=True)
class MetricSample:
    """One value of one metric, from one replica (and rank), at one step and time."""

    name: str
    value: float
    """May be NaN or infinite: a diverging loss is exactly what a user needs to see."""
    step: int | None
    """The training step the script gave, None when it gave none."""
    time: float
    """Wall clock, seconds since the epoch, when the script logged it."""
    role: str | None = None
    index: int | None = None
    """The replica's index in its role."""
    rank: int | None = None
    """The process's global rank where the framework gives one (RANK, the MPI rank, JAX's process id)."""

    @property
    def replica(self) -> str:
        """`worker-0`, as log prefixes name replicas; empty outside kubetrain."""
        if self.role is None:
            return ""
        return self.role if self.index is None else f"{self.role}-{self.index}"

    @property
    def source(self) -> str:
        """Who logged it, as finely as known: `rank 3`, else the replica, else `local`."""
        if self.rank is not None:
            return f"rank {self.rank}"
        return self.replica or "local"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for `-o json`, valid strict JSON: JSON has no NaN or infinity, so `value` is a number or
        null, and `special` says which value a null stands for (`nan`, `inf`, `-inf`; null beside a number).
        Never a string among the numbers: a reader that sums `value` fails on text, not on a checked null."""
        finite = math.isfinite(self.value)
        return {
            "name": self.name,
            "value": self.value if finite else None,
            "special": None if finite else str(self.value),
            "step": self.step,
            "time": self.time,
            "role": self.role,
            "index": self.index,
            "rank": self.rank,
        }


# -- reading ---------------------------------------------------------------------------------------------


MAX_TIME = 253_402_300_799.0
"""The last second of the year 9999: a record's `time` beyond it (or before the epoch, or not finite) is not a
wall-clock time any reader can place on an axis or format, so the record is not read."""
MAX_NAME = 256
"""Characters of a metric name at most: a longer "name" is data written by mistake (or by design, to blow up a
table or a plot legend), and its value is not read."""
_INT_RANGE = (-(2**63), 2**63 - 1)
"""A step: what a 64-bit counter holds (a step of 400 digits overflows every axis and every float)."""
_ID_RANGE = (0, 2**31 - 1)
"""A rank or an index: a process count no job reaches."""


def _opt_int(value: Any, bounds: tuple[int, int] = _INT_RANGE) -> int | None:
    return value if type(value) is int and bounds[0] <= value <= bounds[1] else None


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    """A value as a float, or None: JSON's integers are unbounded, and one beyond a float's range (±1.8e308)
    raises OverflowError in `float()`; NaN and the infinities are kept (a diverging loss is worth seeing)."""
    kind = type(value)
    if kind is float:
        return float(value)
    if kind is int:
        try:
            return float(value)
        except OverflowError:
            return None
    return None


def samples_of(record: Any) -> list[MetricSample]:
    """The samples of one decoded record; [] for anything that is not one (a line written by something else).

    The record was written by a replica, so it is read as hostile: a time that is not a finite wall-clock time
    drops the record, a value that is not a float, a name that is empty or over `MAX_NAME` characters drop
    that value, and a step, index or rank out of range is read as absent."""
    if not isinstance(record, dict):
        return []
    values = record.get("values")
    when = record.get("time")
    if not isinstance(values, dict):
        return []
    when = _number(when) if not isinstance(when, bool) else None
    if when is None or not 0.0 <= when <= MAX_TIME:  # NaN fails the comparison too
        return []
    step, role, index, rank = (
        _opt_int(record.get("step")),
        _opt_str(record.get("role")),
        _opt_int(record.get("index"), _ID_RANGE),
        _opt_int(record.get("rank"), _ID_RANGE),
    )
    out = []
    for name, value in values.items():
        if not isinstance(name, str) or not name or len(name) > MAX_NAME:
            continue
        number = _number(value)
        if number is not None:
            out.append(MetricSample(name, number, step, when, role, index, rank))
    return out


def parse_file_line(line: str | bytes) -> list[MetricSample]:
    """The samples of one line of a metrics file; [] for a line that is not a record (torn, foreign, empty)."""
    line = line.strip()
    if not line:
        return []
    try:
        return samples_of(json.loads(line))
    except (ValueError, RecursionError):
        return []


def is_metric_line(text: str) -> bool:
    """A line of a replica's output that carries metrics (`kubetrain logs` hides these unless asked)."""
    return text.startswith(MARKER)


def parse_log_line(text: str, replica: str = "") -> list[MetricSample] | None:
    """The samples of a metric line of a replica's output; None when `text` is not a metric line.

    `replica` (`worker-1`, the log reader's key: the pod or process the line came from) is the samples' role
    and index, whatever the line says: any program in a pod can print a line, and one claiming another
    replica's name would put its numbers in that replica's series. The rank stays the line's: it is what a
    process says of itself inside its replica (torchrun assigns ranks at each rendezvous, and ranks started by
    one launcher share a replica), so no reader can know it better."""
    if not text.startswith(MARKER):
        return None
    samples = parse_file_line(text[len(MARKER) :])
    origin = replica_of(replica)
    if origin is not None:
        samples = [as_from(s, *origin) for s in samples]
    return samples


def replica_of(key: str) -> tuple[str, int] | None:
    """`worker-1` (or a process's `worker-1.0`) → ("worker", 1); None for a key that names no replica."""
    role, _, index = key.partition(".")[0].rpartition("-")
    return (role, int(index)) if role and index.isdigit() else None


def as_from(sample: MetricSample, role: str, index: int) -> MetricSample:
    """`sample` as logged by replica `role-index` (where it came from, not what it says)."""
    if sample.role == role and sample.index == index:
        return sample
    return MetricSample(sample.name, sample.value, sample.step, sample.time, role, index, sample.rank)


def parse_lines(lines: Iterable[str | bytes]) -> list[MetricSample]:
    """Every sample of a metrics file's lines, in file order."""
    return [s for line in lines for s in parse_file_line(line)]


__all__ = [
    "MARKER",
    "MAX_NAME",
    "MAX_TIME",
    "MetricSample",
    "as_from",
    "format_record",
    "is_metric_line",
    "parse_file_line",
    "parse_lines",
    "parse_log_line",
    "replica_of",
    "samples_of",
]
