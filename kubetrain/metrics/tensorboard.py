"""Metric samples as TensorBoard event files, written with the standard library alone.

An event file is a sequence of TFRecords (length, masked CRC-32C of the length, an `Event` protocol buffer,
masked CRC-32C of it); a scalar is an `Event{wall_time, step, summary{value{tag, simple_value}}}`. Those few
fields are encoded here by hand, so exporting needs neither TensorFlow nor the tensorboard package: a user
points TensorBoard (wherever it is installed) at the folder. Each source (rank, else replica) gets its own
run folder, so TensorBoard overlays the ranks' curves.
"""

from __future__ import annotations

import os
import re
import socket
import struct
import time
from collections.abc import Iterable
from pathlib import Path

from .sample import MetricSample
from .summary import series


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
        summary_value = _length_delimited(1, tag.encode()) + _varint(2 << 3 | 5) + struct.pack("<f", value)
        out += _length_delimited(5, _length_delimited(1, summary_value))
    return out


def record(data: bytes) -> bytes:
    """`data` framed as a TFRecord."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", _masked(crc32c(length))) + data + struct.pack("<I", _masked(crc32c(data)))


def _run_name(source: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", source).strip("-") or "run"


def export(samples: Iterable[MetricSample], folder: str | os.PathLike[str]) -> list[Path]:
    """Write `samples` under `folder`, one run folder per source; the event files written. Samples logged
    without a step are numbered in the order they were logged."""
    by_source: dict[str, list[MetricSample]] = {}
    for one in series(samples, per_source=True):
        by_source.setdefault(one.source, []).extend(one.samples)
    written = []
    host = socket.gethostname()
    for source, items in by_source.items():
        run = Path(folder) / _run_name(source)
        run.mkdir(parents=True, exist_ok=True)
        path = run / f"events.out.tfevents.{int(time.time())}.{host}.{os.getpid()}.kubetrain"
        counters: dict[str, int] = {}
        chunks = [record(event(time.time(), file_version="brain.Event:2"))]
        for s in sorted(items, key=lambda s: s.time):
            step = s.step if s.step is not None else counters.get(s.name, 0)
            counters[s.name] = step + 1
            chunks.append(record(event(s.time, step, scalar=(s.name, s.value))))
        path.write_bytes(b"".join(chunks))
        written.append(path)
    return written


__all__ = ["crc32c", "event", "export", "record"]
