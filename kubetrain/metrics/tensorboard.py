"""Metric samples as TensorBoard event files, written with the standard library alone.

An event file is a sequence of TFRecords (length, masked CRC-32C of the length, an `Event` protocol buffer,
masked CRC-32C of it); a scalar is an `Event{wall_time, step, summary{value{tag, simple_value}}}`. Those few
fields are encoded here by hand, so exporting needs neither TensorFlow nor the tensorboard package: a user
points TensorBoard (wherever it is installed) at the folder. Each source (rank, else replica) gets its own
run folder, so TensorBoard overlays the ranks' curves.

Each run folder holds one event file of a fixed name (`EVENT_FILE`), written to a temporary file and renamed
over the last export's: exporting again replaces the run's points instead of adding a second copy of each,
and a failure (a full disk, a folder that cannot be written) leaves the previous file or none, never half of
one. A value beyond float32 (TensorBoard's scalar type) is written as ±inf, as TensorFlow's own float32
conversion does: the curve shows the divergence instead of dropping the point.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import struct
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from ..contract.errors import KubetrainError
from .sample import MetricSample
from .summary import series

EVENT_FILE = "events.out.tfevents.kubetrain"
"""The one event file of a run folder (TensorBoard reads every file whose name holds `tfevents`)."""

_TEMP_PREFIX = ".kubetrain-export-"

FLOAT32_MAX = 3.4028234663852886e38


class ExportError(KubetrainError):
    """An export that could not be written: `<path>: <cause>`."""


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum TFRecords carry."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF  # int64 as protobuf writes it: two's complement
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _length_delimited(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def event(
    wall_time: float, step: int = 0, *, file_version: str | None = None, scalar: tuple[str, float] | None = None
) -> bytes:
    """One `Event` message: the file's version header, or a scalar."""
    out = _varint(1 << 3 | 1) + struct.pack("<d", wall_time) + _varint(2 << 3 | 0) + _varint(step)
    if file_version is not None:
        out += _length_delimited(3, file_version.encode())
    if scalar is not None:
        tag, value = scalar
        value = as_float32(value)
        summary_value = _length_delimited(1, tag.encode("utf-8", "replace")) + _varint(2 << 3 | 5)
        summary_value += struct.pack("<f", value)
        out += _length_delimited(5, _length_delimited(1, summary_value))
    return out


def as_float32(value: float) -> float:
    """`value` as float32 holds it: beyond its range, ±inf (NaN stays NaN)."""
    if math.isfinite(value) and abs(value) > FLOAT32_MAX:
        # Values just above FLOAT32_MAX that round down to it are packable; only those beyond overflow.
        try:
            struct.pack("<f", value)
        except OverflowError:
            return math.copysign(math.inf, value)
    return value


def record(data: bytes) -> bytes:
    """`data` framed as a TFRecord."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", _masked(crc32c(length))) + data + struct.pack("<I", _masked(crc32c(data)))


def _run_name(source: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", source).strip("-") or "run"


def event_files(samples: Iterable[MetricSample]) -> dict[str, bytes]:
    """Each run's event file, by run folder name (pure: nothing is written). Samples logged without a step
    are numbered in the order they were logged."""
    by_source: dict[str, list[MetricSample]] = {}
    for one in series(samples, per_source=True):
        by_source.setdefault(one.source, []).extend(one.samples)
    files: dict[str, bytes] = {}
    for source, items in by_source.items():
        counters: dict[str, int] = {}
        chunks = [record(event(time.time(), file_version="brain.Event:2"))]
        for s in sorted(items, key=lambda s: s.time):
            step = s.step if s.step is not None else counters.get(s.name, 0)
            counters[s.name] = step + 1
            chunks.append(record(event(s.time, step, scalar=(s.name, s.value))))
        files[_run_name(source)] = b"".join(chunks)
    return files


def export(samples: Iterable[MetricSample], folder: str | os.PathLike[str]) -> list[Path]:
    """Write `samples` under `folder`, one run folder per source, each run's file replacing the one a previous
    export wrote; the event files written (none, and nothing created, when there are no samples). Raises
    `ExportError` naming the path that could not be written."""
    files = event_files(samples)
    if not files:
        return []
    root = Path(folder)
    if root.exists() and not root.is_dir():
        raise ExportError(f"{root}: not a folder (--tensorboard names the folder to write the runs under)")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # the folder the user named, not whichever of its parents the system tripped on
        raise ExportError(f"{root}: {exc.strerror or exc}") from None
    written = []
    for run_name, data in files.items():
        run = root / run_name
        try:
            run.mkdir(exist_ok=True)
            _write_atomically(run / EVENT_FILE, data)
        except OSError as exc:
            where = exc.filename if exc.filename and _TEMP_PREFIX not in str(exc.filename) else run
            raise ExportError(f"{where}: {exc.strerror or exc}") from None
        written.append(run / EVENT_FILE)
    return written


def _write_atomically(path: Path, data: bytes) -> None:
    """`data` as `path`, whole or not at all: written to a temporary file beside it, then renamed over it."""
    # No `tfevents` in the temporary name: a TensorBoard watching the folder must not read it half-written.
    fd, tmp = tempfile.mkstemp(prefix=_TEMP_PREFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp's 0600 would hide the runs from a TensorBoard run by another user: the umask decides, as for
        # any file the user creates.
        umask = os.umask(0o022)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


__all__ = ["EVENT_FILE", "ExportError", "as_float32", "crc32c", "event", "event_files", "export", "record"]
