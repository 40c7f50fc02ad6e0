"""Reading replica log files: one replica's records, or several merged in time order, filtered as asked.

A log is read while it is written and rotated, by other processes than its writer, so a reader opens the
files of a log as one consistent set (`open_log_files`) and reads each only up to its last complete record:
it never shows half a record, never skips a rotated file nor reads one twice. Looking for a time is a
binary search over the records' timestamps, and `tail` reads backwards, so `logs --since` and `--tail` cost
what they show, not the size of the log. Following a log as it grows is the local backend's `log_follow`'s.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import time
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

from ...contract import env_names
from ...contract.logs import GrepPattern, LogFilter, LogRecord, TimeBound, make_filter, parse_timestamp
from .format import human_size, parse_record, record_boundary, rotated_away, rotated_path, rotated_why


def rotation_marker(path: Path, key: str = "") -> LogRecord | None:
    """The record readers show first for what rotation removed from ``path``, or None."""
    gone = rotated_away(path)
    if not gone["lines"]:
        return None
    why = rotated_why(path) or (
        f"a replica's log keeps {gone['max_files']} files of {human_size(gone['max_size'])};"
        f" {env_names.LOG_MAX_SIZE} and {env_names.LOG_MAX_FILES} set that"
    )
    text = (
        f"kubetrain: {gone['lines']:,} earlier line{'s' if gone['lines'] != 1 else ''}"
        f" ({human_size(gone['bytes'])} in {gone['files']} file{'s' if gone['files'] != 1 else ''})"
        f" rotated away ({why})"
    )
    return LogRecord(gone["until_ns"], "stderr", text, False, key)


def log_files(path: Path) -> list[Path]:
    """The files of one replica's log, oldest first: the rotated ones (``.N`` … ``.1``), then ``path``.

    Listed from the folder, not by counting up from ``.1`` to the first missing number: a rotation renames
    ``.N-1`` → ``.N`` … ``log`` → ``.1`` one at a time, and meanwhile a number is missing for a moment,
    which would hide every older file from a reader."""
    prefix = path.name + "."
    numbers = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for name in os.listdir(path.parent):
            suffix = name[len(prefix) :]
            if name.startswith(prefix) and suffix.isdigit() and int(suffix) > 0:
                numbers.append(int(suffix))
    return [*(rotated_path(path, n) for n in sorted(numbers, reverse=True)), path]


_BLOCK = 1 << 16


def complete_end(f: BinaryIO, size: int) -> int:
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


def lines_backwards(f: BinaryIO, start: int, end: int) -> Iterator[bytes]:
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


def iter_range(f: BinaryIO, start: int, end: int, flt: LogFilter, tail: int | None, key: str) -> Iterator[LogRecord]:
    """The records of ``f[start:end]`` that pass ``flt``, oldest first (the last ``tail`` of them if set).

    ``start`` is at a record boundary."""
    if flt.since is not None:
        start = _seek_since(f, start, end, flt.since)
    if tail is not None:
        if tail <= 0:
            return
        picked: list[LogRecord] = []
        for raw in lines_backwards(f, start, end):
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
    grep: str | GrepPattern | None = None,
    streams: Collection[str] | None = None,
    key: str = "",
    offset: int = 0,
) -> Iterator[LogRecord]:
    """The records of one replica's log, oldest first, across its rotated files (``.N`` … ``.1``, then
    ``path``), after a record saying what rotation removed, if it removed anything.

    ``since``/``until``: a datetime, epoch seconds, or a timedelta meaning "that
    long ago"; ``until`` is exclusive. ``grep`` is searched in each line
    (a str with ``re.search``, else with the pattern's own ``search``).
    ``streams`` keeps only those streams. ``tail`` keeps the
    last N records that pass the other filters. ``offset``: only the records of
    ``path`` itself from there on, typically the file's size remembered earlier,
    to read what was appended since (no clock involved); a file now shorter than
    that was truncated, replaced or rotated and is read from its start. Each file
    is read up to its last newline as of the first ``next()``; a missing file has
    no records.
    """
    flt = make_filter(since, until, grep, streams)
    if offset:
        yield from _iter_file(path, flt, tail, key, offset)
        return
    files = open_log_files(path)
    try:
        marker = rotation_marker(path, key)
        if marker is not None and not (flt.accepts(marker) and (flt.until is None or marker.time_ns < flt.until)):
            marker = None
        if tail is None:
            if marker is not None:
                yield marker
            for f in files:
                size = os.fstat(f.fileno()).st_size
                yield from iter_range(f, 0, complete_end(f, size), flt, None, key)
            return
        picked: list[LogRecord] = []
        for f in reversed(files):  # newest first, until enough
            if len(picked) >= tail:
                break
            size = os.fstat(f.fileno()).st_size
            picked[:0] = iter_range(f, 0, complete_end(f, size), flt, tail - len(picked), key)
        if marker is not None and len(picked) < tail:
            picked.insert(0, marker)
        yield from picked
    finally:
        for f in files:
            f.close()


def _open_all(paths: list[Path]) -> list[BinaryIO]:
    """The files that exist, opened (each once: a rotation while they are listed can show a file twice)."""
    out: list[BinaryIO] = []
    seen: set[int] = set()
    for p in paths:
        try:
            f = open(p, "rb")  # noqa: SIM115 - the caller closes them
        except FileNotFoundError:
            continue
        ino = os.fstat(f.fileno()).st_ino
        if ino in seen:
            f.close()
            continue
        seen.add(ino)
        out.append(f)
    return out


def _inodes(paths: list[Path]) -> list[int | None]:
    out: list[int | None] = []
    for p in paths:
        try:
            out.append(p.stat().st_ino)
        except FileNotFoundError:
            out.append(None)
    return out


def open_log_files(path: Path, *, current: bool = True) -> list[BinaryIO]:
    """The files of ``path``'s log (oldest first; without ``path`` itself unless ``current``), opened as one
    consistent set: listed, opened, then listed again; if a rotation renamed any meanwhile (a name now holds
    another file), the set is taken again. Open files keep their content whatever is renamed later, so a
    reader neither skips a file nor reads one twice while the writer rotates."""
    def listed() -> list[Path]:
        return log_files(path) if current else log_files(path)[:-1]

    for _attempt in range(50):
        names = listed()
        opened = _open_all(names)
        mine = [os.fstat(f.fileno()).st_ino for f in opened]
        # The same names, each still naming the file opened: no rename came between (a whole rotation
        # between the listing and the opening would otherwise pass, one file short).
        if listed() == names and _inodes(names) == mine:
            return opened
        for f in opened:
            f.close()
        time.sleep(0.001)  # a rotation is renaming: it takes a few system calls
    return _open_all(listed())  # best effort: still renaming


def _iter_file(path: Path, flt: LogFilter, tail: int | None, key: str, offset: int) -> Iterator[LogRecord]:
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below, and must stay open across yields
    except FileNotFoundError:
        return
    with f:
        size = os.fstat(f.fileno()).st_size
        end = complete_end(f, size)
        start = record_boundary(f, offset) if offset <= size else 0
        yield from iter_range(f, min(start, end), end, flt, tail, key)


def merge_logs(
    paths: Mapping[str, Path],
    *,
    since: TimeBound | None = None,
    until: TimeBound | None = None,
    tail: int | None = None,
    grep: str | GrepPattern | None = None,
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
