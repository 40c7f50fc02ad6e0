"""Replica output in log files: the format, its writer and readers (the terminal sink is kubetrain.terminal).

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

import heapq
import os
import re
import sys
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ...contract.logs import (
    LogFilter,
    LogRecord,
    TimeBound,
    format_timestamp,
    make_filter,
    parse_timestamp,
)

#: Longest line kept in one record; longer lines are split into ``P`` records.
MAX_LINE = 1 << 20

# --------------------------------------------------------------------------- writing


class LogWriter:
    """Appends records to one replica's log file.

    Records are buffered per pump round and written with one ``write(2)`` on
    :meth:`flush`, so a reader never sees half a record unless the disk is
    full, and nothing sits in a user-space buffer if the supervisor is killed.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._buf: list[bytes] = []
        self._failed = False

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    def add(self, time_ns: int, stream: str, line: bytes, partial: bool = False) -> None:
        self._buf.append(
            b"%s %s %s %s\n" % (format_timestamp(time_ns), stream.encode(), b"P" if partial else b"F", line)
        )

    def flush(self) -> None:
        if not self._buf or self._fd < 0:
            return
        data = memoryview(b"".join(self._buf))
        self._buf.clear()
        while data:
            try:
                n = os.write(self._fd, data)
            except InterruptedError:
                continue
            except OSError as e:
                # A full disk must not take the job down: report once and drop the batch.
                if not self._failed:
                    self._failed = True
                    print(f"kubetrain: cannot write {self.path}: {e}", file=sys.stderr)
                return
            data = data[n:]

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            os.close(self._fd)
            self._fd = -1


def append_note(path: Path, text: str, stream: str = "stderr") -> None:
    """Append one record to a log file from outside a running process group."""
    writer = LogWriter(path)
    try:
        for line in text.splitlines() or [""]:
            writer.add(time.time_ns(), stream, line.encode("utf-8", "replace"))
    finally:
        writer.close()


def _split_long(line: bytes, out: list[tuple[bytes, bool]]) -> bytes:
    """Move ``MAX_LINE``-sized partial chunks of ``line`` to ``out``; return the rest (<= ``MAX_LINE``)."""
    while len(line) > MAX_LINE:
        # Never cut inside a UTF-8 sequence: back off over continuation bytes.
        at = MAX_LINE
        while at > MAX_LINE - 4 and (line[at] & 0xC0) == 0x80:
            at -= 1
        out.append((line[:at], True))
        line = line[at:]
    return line


class LineAssembler:
    """Turns the chunks read from one pipe into lines, keeping an unfinished line for the next chunk."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> list[tuple[bytes, bool]]:
        """Return the ``(line, partial)`` pairs completed by ``data``."""
        out: list[tuple[bytes, bool]] = []
        buf = self._pending + data if self._pending else data
        cut = buf.rfind(b"\n")
        if cut >= 0:
            for line in buf[:cut].split(b"\n"):
                if len(line) > MAX_LINE:
                    line = _split_long(line, out)
                out.append((line, False))
            buf = buf[cut + 1 :]
        if len(buf) > MAX_LINE:
            buf = _split_long(buf, out)
        self._pending = buf
        return out

    def finish(self) -> list[tuple[bytes, bool]]:
        """The unfinished last line, if any, at end of output."""
        rest, self._pending = self._pending, b""
        return [(rest, True)] if rest else []


# --------------------------------------------------------------------------- reading


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


_BLOCK = 1 << 16


def _complete_end(f: BinaryIO, size: int) -> int:
    """Offset just after the last newline: a record being written (or cut by a crash) is left out."""
    pos = size
    while pos > 0:
        step = min(_BLOCK, pos)
        pos -= step
        f.seek(pos)
        nl = f.read(step).rfind(b"\n")
        if nl >= 0:
            return pos + nl + 1
    return 0


def _record_time_at(f: BinaryIO, offset: int) -> int | None:
    """Timestamp of the first whole record starting at or after ``offset``."""
    f.seek(offset)
    if offset:
        f.readline()  # the record we landed in the middle of
    line = f.readline()
    if not line:
        return None
    return parse_timestamp(line.split(b" ", 1)[0])


def _seek_since(f: BinaryIO, start: int, end: int, since: int) -> int:
    """An offset at a record boundary, at or after ``start`` (itself one), before which every record is
    older than ``since``.

    Bisects the file: records are in time order, so ``--since 5m`` on a large
    log does not read it from the start. An unparsable record counts as new:
    the search then starts earlier, reading more but skipping nothing.
    """
    lo, hi = start, end
    while hi - lo > _BLOCK:
        mid = (lo + hi) // 2
        t = _record_time_at(f, mid)
        if t is None or t >= since:
            hi = mid
        else:
            lo = mid
    f.seek(lo)
    if lo != start:
        f.readline()
    return f.tell()


def _boundary_at(f: BinaryIO, offset: int) -> int:
    """``offset`` if a record starts there, else where the next one starts."""
    if offset <= 0:
        return 0
    f.seek(offset - 1)
    if f.read(1) != b"\n":
        f.readline()
    return f.tell()


def _lines_backwards(f: BinaryIO, start: int, end: int) -> Iterator[bytes]:
    """The lines of ``f[start:end]`` (``end`` just after a newline), last first."""
    head = b""
    pos = end
    while pos > start:
        step = min(_BLOCK, pos - start)
        pos -= step
        f.seek(pos)
        lines = (f.read(step) + head).split(b"\n")
        head = lines[0]
        yield from reversed(lines[1:])
    yield head


def _iter_range(f: BinaryIO, start: int, end: int, flt: LogFilter, tail: int | None, key: str) -> Iterator[LogRecord]:
    """The records of ``f[start:end]`` that pass ``flt``, oldest first (the last ``tail`` of them if set).

    ``start`` is at a record boundary."""
    if flt.since is not None:
        start = _seek_since(f, start, end, flt.since)
    if tail is not None:
        if tail <= 0:
            return
        picked: list[LogRecord] = []
        for raw in _lines_backwards(f, start, end):
            rec = parse_record(raw, key)
            if rec is None:
                continue
            if flt.since is not None and rec.time_ns < flt.since:
                break
            if flt.accepts(rec):
                picked.append(rec)
                if len(picked) >= tail:
                    break
        yield from reversed(picked)
        return
    f.seek(start)
    pos = start
    for raw in f:
        pos += len(raw)
        if pos > end:
            return
        rec = parse_record(raw[:-1], key)
        if rec is None:
            continue
        if flt.until is not None and rec.time_ns >= flt.until:
            return
        if flt.accepts(rec):
            yield rec


def iter_log(
    path: Path,
    *,
    since: TimeBound | None = None,
    until: TimeBound | None = None,
    tail: int | None = None,
    grep: str | re.Pattern[str] | None = None,
    streams: Collection[str] | None = None,
    key: str = "",
    offset: int = 0,
) -> Iterator[LogRecord]:
    """The records of one log file, oldest first.

    ``since``/``until``: a datetime, epoch seconds, or a timedelta meaning "that
    long ago"; ``until`` is exclusive. ``grep`` is searched in each line
    (``re.search``). ``streams`` keeps only those streams. ``tail`` keeps the
    last N records that pass the other filters. ``offset``: only the records
    from there on, typically the file's size remembered earlier, to read what
    was appended since (no clock involved); a file now shorter than that was
    truncated or replaced and is read from its start. The file is read up to
    its last newline as of the first ``next()``; a missing file has no records.
    """
    flt = make_filter(since, until, grep, streams)
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below, and must stay open across yields
    except FileNotFoundError:
        return
    with f:
        size = os.fstat(f.fileno()).st_size
        end = _complete_end(f, size)
        start = _boundary_at(f, offset) if offset <= size else 0
        yield from _iter_range(f, min(start, end), end, flt, tail, key)


def merge_logs(
    paths: Mapping[str, Path],
    *,
    since: TimeBound | None = None,
    until: TimeBound | None = None,
    tail: int | None = None,
    grep: str | re.Pattern[str] | None = None,
    streams: Collection[str] | None = None,
) -> Iterator[LogRecord]:
    """The records of several replicas' files (key -> path) merged in time order, each with its key.

    Filters as in :func:`iter_log`; ``tail`` applies to each file, as
    ``kubectl logs --tail`` does per pod.
    """
    its = [
        iter_log(p, since=since, until=until, tail=tail, grep=grep, streams=streams, key=k) for k, p in paths.items()
    ]
    yield from heapq.merge(*its, key=lambda r: r.time_ns)


@dataclass
class _Follower:
    key: str
    path: Path
    offset: int = 0
    pending: bytes = b""
    inode: int | None = None

    def history(self, flt: LogFilter, tail: int | None) -> Iterator[LogRecord]:
        """The records present now; later records are left to :meth:`read_new`."""
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed below, across yields
        except FileNotFoundError:
            return
        with f:
            self.inode = os.fstat(f.fileno()).st_ino
            # Fixed before the first record is yielded, so that history and
            # following neither overlap nor leave a gap.
            self.offset = _complete_end(f, os.fstat(f.fileno()).st_size)
            yield from _iter_range(f, 0, self.offset, flt, tail, self.key)

    def read_new(self, flt: LogFilter) -> list[LogRecord]:
        try:
            f = open(self.path, "rb")  # noqa: SIM115
        except FileNotFoundError:
            return []
        with f:
            st = os.fstat(f.fileno())
            if self.inode is not None and (st.st_ino != self.inode or st.st_size < self.offset):
                # Replaced or truncated: start over on the new content.
                self.offset, self.pending = 0, b""
            self.inode = st.st_ino
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        data = self.pending + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self.pending = data
            return []
        self.pending = data[cut + 1 :]
        out = []
        for raw in data[:cut].split(b"\n"):
            rec = parse_record(raw, self.key)
            if rec is not None and flt.accepts(rec):
                out.append(rec)
        return out


def follow_log(
    paths: Mapping[str, Path],
    until: Callable[[], bool],
    *,
    since: TimeBound | None = None,
    tail: int | None = None,
    grep: str | re.Pattern[str] | None = None,
    streams: Collection[str] | None = None,
    poll_interval: float = 0.2,
) -> Iterator[LogRecord]:
    """``logs -f``: the existing records (filtered as in :func:`merge_logs`), then new ones as they come.

    ``until`` is the stop condition (e.g. "the job has finished"), not a time
    bound. The files are polled every ``poll_interval`` seconds: a reader in
    another process has no cheaper portable signal (the supervisor itself
    never polls). The new records of all files found in one round are merged
    in time order. Once ``until()`` is true, one last round is read, so the
    final lines of a job that just ended are not lost. Files that do not exist
    yet are waited for; a file replaced or truncated is read from its start.
    """
    flt = make_filter(since, None, grep, streams)
    followers = [_Follower(k, p) for k, p in paths.items()]
    # Each history generator fixes its file's end offset when first advanced;
    # prime them all before merging so no record is read twice.
    histories = [fol.history(flt, tail) for fol in followers]
    primed: list[Iterator[LogRecord]] = []
    for h in histories:
        first = next(h, None)
        if first is not None:
            primed.append(_chain_first(first, h))
    yield from heapq.merge(*primed, key=lambda r: r.time_ns)
    while True:
        stopping = until()
        batch: list[LogRecord] = []
        for fol in followers:
            batch.extend(fol.read_new(flt))
        batch.sort(key=lambda r: r.time_ns)
        yield from batch
        if stopping:
            return
        time.sleep(poll_interval)


def _chain_first(first: LogRecord, rest: Iterator[LogRecord]) -> Iterator[LogRecord]:
    yield first
    yield from rest
