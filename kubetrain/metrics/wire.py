"""The written form of one `log` call, kept apart from the readers so a replica's import stays small (no
dataclasses, no inspect): `MARKER` and `format_record`. The format is described in `sample.py`."""

from __future__ import annotations

import json
from collections.abc import Mapping

MARKER = "@kubetrain:metrics "
"""Starts a metric line in a replica's output: chosen so that no ordinary program output begins with it."""


def format_record(
    values: Mapping[str, float], step: int | None, time: float, role: str | None, index: int | None, rank: int | None
) -> str:
    """One call's record as JSON, without a newline (values already checked to be floats)."""
    record = {"time": time, "step": step, "role": role, "index": index, "rank": rank, "values": values}
    # allow_nan: NaN and Infinity are written as Python's json reads them back (`sample.parse_file_line`).
    return json.dumps(record, separators=(",", ":"))


def lost_record(count: int, why: str, time: float) -> str:
    """The record that marks `count` records a writer could not write (a full disk): it has no `values`, so
    readers take no sample from it, and a person reading the file sees the gap and its cause."""
    return json.dumps({"time": time, "lost": count, "why": why}, separators=(",", ":"))


__all__ = ["MARKER", "format_record", "lost_record"]
