"""The format of kubetrain's log files, shared by their writer (`writer`) and readers (`reader`, `log_follow`).

Log files use the CRI container log format that the kubelet writes under
``/var/log/pods``, one record per line::

    2026-11-21T17:11:30.123456789Z stdout F epoch 3 loss 0.25
    2026-11-21T17:11:30.123501002Z stderr P 100%|██████████| (no newline yet)

- an RFC 3339 UTC timestamp with nanoseconds (when the supervisor read the
  bytes from the pipe; the records of a file are in time order),
- the stream, ``stdout`` or ``stderr``,
- ``F`` for a full line (it ended with a newline), ``P`` for a partial one: a
  chunk of a line longer than ``MAX_LINE`` bytes (the rest follows in the next
  records of the same stream) or output that ended without a newline,
- the line's bytes as the program wrote them, newline removed. They are not
  re-encoded, so binary output and invalid UTF-8 survive; readers decode with
  ``errors="replace"``.

The format was chosen over an ad-hoc one because it is a standard that log
shippers (fluent-bit, vector, promtail) parse as is, and because ``kubetrain
logs`` can then read files from both backends with the same code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import BinaryIO

from ...contract.logs import LogRecord, parse_timestamp

#: Longest line kept in one record; longer lines are split into ``P`` records.
MAX_LINE = 1 << 20
#: Suffix of the file recording what rotation removed from a replica's log (JSON: lines, bytes, files,
#: until_ns); readers show it as a first record, so every line stays accounted for.
ROTATED_SUFFIX = ".rotated"
_ROTATED_KEYS = ("lines", "bytes", "files", "until_ns", "max_size", "max_files")


def rotated_path(path: Path, n: int) -> Path:
    """The ``n``-th rotated file of ``path`` (``worker-0.log.1`` is the newest); ``path`` itself for 0."""
    return path if n == 0 else path.with_name(f"{path.name}.{n}")


def rotated_away(path: Path) -> dict[str, int]:
    """What rotation removed from the log ``path`` so far: lines (records), bytes, files and the time of
    the last record removed (``until_ns``); zeros when nothing was."""
    try:
        data = json.loads(path.with_name(path.name + ROTATED_SUFFIX).read_text())
        return {k: int(data.get(k, 0)) for k in _ROTATED_KEYS}
    except (OSError, ValueError, TypeError, AttributeError):
        return dict.fromkeys(_ROTATED_KEYS, 0)


def rotated_why(path: Path) -> str | None:
    """What set the bound that rotation kept the log ``path`` to, as its writer said it (``why`` in the
    ``.rotated`` record); None for the local backend's replica logs, whose bound the reader names."""
    try:
        why = json.loads(path.with_name(path.name + ROTATED_SUFFIX).read_text()).get("why")
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    return why if isinstance(why, str) and why else None


def human_size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"  # pragma: no cover - unreachable


def parse_record(raw: bytes, key: str = "") -> LogRecord | None:
    """One log file line (without its newline) as a record; None when it is not one."""
    parts = raw.split(b" ", 3)
    if len(parts) < 3:
        return None
    ts = parse_timestamp(parts[0])
    if ts is None:
        return None
    stream = parts[1].decode("ascii", "replace")
    text = parts[3] if len(parts) == 4 else b""
    return LogRecord(ts, stream, text.decode("utf-8", "replace"), parts[2] == b"P", key)


def record_boundary(f: BinaryIO, offset: int) -> int:
    """``offset`` if a record starts there, else where the next one starts."""
    if offset <= 0:
        return 0
    f.seek(offset - 1)
    if f.read(1) != b"\n":
        f.readline()
    return f.tell()
