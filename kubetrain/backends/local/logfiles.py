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

import contextlib
import errno
import heapq
import json
import os
import re
import sys
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ...contract import env_names
from ...contract.logs import (
    GrepPattern,
    LogFilter,
    LogRecord,
    TimeBound,
    format_timestamp,
    make_filter,
    parse_timestamp,
)

#: Longest line kept in one record; longer lines are split into ``P`` records.
MAX_LINE = 1 << 20

#: A replica's log is rotated once it passes this many bytes (the kubelet's containerLogMaxSize, 10Mi).
DEFAULT_MAX_SIZE = 10 * 1024 * 1024
#: Files kept per replica, the one being written included (the kubelet's containerLogMaxFiles).
DEFAULT_MAX_FILES = 5
# The supervisor that writes the logs takes the two above from env_names.LOG_MAX_SIZE / LOG_MAX_FILES.
#: Free space a log writer leaves on its filesystem: output stops being written (and is counted) below
#: it, so that the job's final status, its conditions and the truncation markers still fit. The job
#: store keeps a reserve file of its own besides (``disk_reserve.RESERVE_BYTES``) for when something else
#: fills the disk. The kubelet's answer to the same problem is its nodefs eviction threshold.
DISK_HEADROOM = 256 * 1024
# After a failed write, how long before writing is tried again (statvfs alone can be wrong: quotas).
_RETRY_AFTER = 0.5
# Errors that mean "no room": a full disk, a quota, a file size limit.
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
#: Suffix of the file recording what rotation removed from a replica's log (JSON: lines, bytes, files,
#: until_ns); readers show it as a first record, so every line stays accounted for.
ROTATED_SUFFIX = ".rotated"

_SIZE_UNITS = {"": 1, "K": 1000, "M": 1000**2, "G": 1000**3, "KI": 1024, "MI": 1024**2, "GI": 1024**3}


def parse_size(text: str) -> int:
    """``10Mi`` → 10485760, ``500K`` → 500000, ``4096`` → 4096. ValueError on anything else."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]i?)?\s*", text, re.IGNORECASE)
    if m is None:
        raise ValueError(f"not a size: {text!r} (give bytes, or a number with Ki, Mi, Gi, K, M or G)")
    return int(m.group(1)) * _SIZE_UNITS[(m.group(2) or "").upper()]


def rotation_from_env(environ: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(max size, max files) from ``KUBETRAIN_LOG_MAX_SIZE`` / ``KUBETRAIN_LOG_MAX_FILES``, else the
    kubelet's defaults. A value that does not parse is reported once and the default used: a log
    setting must not keep a job from running."""
    env = os.environ if environ is None else environ
    size, files = DEFAULT_MAX_SIZE, DEFAULT_MAX_FILES
    if env.get(env_names.LOG_MAX_SIZE):
        try:
            size = parse_size(env[env_names.LOG_MAX_SIZE])
        except ValueError as e:
            print(f"kubetrain: {env_names.LOG_MAX_SIZE}: {e}; using {DEFAULT_MAX_SIZE}", file=sys.stderr)
    if env.get(env_names.LOG_MAX_FILES):
        try:
            files = int(env[env_names.LOG_MAX_FILES])
            if files < 1:
                raise ValueError
        except ValueError:
            files = DEFAULT_MAX_FILES
            print(f"kubetrain: {env_names.LOG_MAX_FILES}: not a whole number >= 1; using {files}", file=sys.stderr)
    return size, files


def rotated_path(path: Path, n: int) -> Path:
    """The ``n``-th rotated file of ``path`` (``worker-0.log.1`` is the newest); ``path`` itself for 0."""
    return path if n == 0 else path.with_name(f"{path.name}.{n}")


@dataclass
class Gap:
    """Output a writer could not write: how much, of what, and why."""

    lines: int = 0  #: records not written (a line longer than MAX_LINE counts once per chunk)
    bytes: int = 0  #: the replica's bytes in them, newlines included
    reason: str = ""
    since_ns: int = 0  #: when the first of them was read

    def add(self, lines: int, nbytes: int, time_ns: int) -> None:
        if not self.lines:
            self.since_ns = time_ns
        self.lines += lines
        self.bytes += nbytes

    def text(self) -> str:
        return (
            f"kubetrain: {self.lines:,} line{'s' if self.lines != 1 else ''} ({_human(self.bytes)}) of output"
            f" not written here: {self.reason}"
        )


def _human(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"  # pragma: no cover - unreachable


# --------------------------------------------------------------------------- writing


class LogWriter:
    """Appends records to one replica's log file.

    Records are buffered per pump round and written with one ``write(2)`` on
    :meth:`flush`, so a reader never sees half a record, and nothing sits in a
    user-space buffer if the supervisor is killed.

    Never losing a line silently: when the filesystem has less than
    ``headroom`` bytes free, or a write fails for want of room (a full disk, a
    quota), the batch is not written but counted (a write cut short is
    truncated back to the last whole record, so the file stays parsable). Once
    there is room again, and at the latest when the writer closes, a marker
    record (``kubetrain: N lines (B) of output not written here: <why>``)
    goes in where the gap is; :attr:`gaps` keeps every gap, for the caller to
    report. ``on_gap`` is called once, when the first gap opens.

    Rotation, as the kubelet's: once the file passes ``max_size`` bytes it is
    renamed ``.1`` (``.1`` to ``.2``, and so on) and a new one started; at
    most ``max_files`` files are kept, the current one included. What the
    oldest file held is added to the ``.rotated`` record beside the log
    (:func:`rotated_away`), which readers show first. ``max_size`` 0: no rotation.
    """

    def __init__(
        self,
        path: Path,
        *,
        max_size: int = 0,
        max_files: int = DEFAULT_MAX_FILES,
        headroom: int = DISK_HEADROOM,
        on_gap: Callable[[Gap], None] | None = None,
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.max_size = max_size
        self.max_files = max(1, max_files)
        self.headroom = headroom
        self._on_gap = on_gap
        self._fd = self._open()
        self._size = os.fstat(self._fd).st_size
        # (record, the replica's bytes in it, when it was read), until the next flush
        self._buf: list[tuple[bytes, int, int]] = []
        self._gap: Gap | None = None
        #: Every gap closed so far, with the one still open (if any) last.
        self.gaps: list[Gap] = []
        self.unmarked: Gap | None = None
        self._retry_at = 0.0

    def _open(self) -> int:
        # Private to the user: replicas print their environment, credentials included.
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    @property
    def dropped(self) -> Gap:
        """Every gap so far summed up (reason: the last one's)."""
        total = Gap(reason=self.gaps[-1].reason if self.gaps else "")
        for gap in self.gaps:
            total.lines += gap.lines
            total.bytes += gap.bytes
        return total

    def add(self, time_ns: int, stream: str, line: bytes, partial: bool = False) -> None:
        record = b"%s %s %s %s\n" % (format_timestamp(time_ns), stream.encode(), b"P" if partial else b"F", line)
        self._buf.append((record, len(line) + (0 if partial else 1), time_ns))

    def flush(self) -> None:
        if not self._buf or self._fd < 0:
            return
        batch, self._buf = self._buf, []
        i = 0
        while i < len(batch):
            # Rotation cuts at record boundaries, so no file passes max_size (save by a record longer than it).
            if self.max_size and self._size and self._size + len(batch[i][0]) > self.max_size:
                self._rotate()
            room = self.max_size - self._size if self.max_size else None
            j, size = i, 0
            while j < len(batch) and (room is None or j == i or size + len(batch[j][0]) <= room):
                size += len(batch[j][0])
                j += 1
            self._flush_records(batch[i:j], size)
            i = j

    def _flush_records(self, records: list[tuple[bytes, int, int]], size: int) -> None:
        why = self._no_room(size)
        if why is None and self._gap is not None:
            why = self._write_gap_marker()
        if why is None:
            why = self._write(b"".join(r[0] for r in records))
        if why is not None:
            self._count_gap(len(records), sum(r[1] for r in records), records[0][2], why)

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            if self._gap is not None:
                # The replica is done: the marker goes in now, into the headroom kept for it.
                self._write_gap_marker(force=True)
            #: A gap whose marker could not be written even then (a disk something else filled to the
            #: last block, and no record of ours to cut): for the caller to append once there is room.
            self.unmarked = self._gap
            os.close(self._fd)
            self._fd = -1

    # -- room ---------------------------------------------------------------------------------------

    def _no_room(self, size: int) -> str | None:
        """Why ``size`` more bytes must not be written now, or None."""
        if self._gap is not None and time.monotonic() < self._retry_at:
            return self._gap.reason
        try:
            st = os.fstatvfs(self._fd)
        except OSError:
            return None
        free = st.f_bavail * st.f_frsize
        # Once stopped, wait for twice the headroom: writing a little and stopping again, over and
        # over, would spread the output in small pieces between markers.
        need = self.headroom * (2 if self._gap is not None else 1) + size
        if st.f_blocks and free < need:
            return f"the disk is full (less than {_human(self.headroom)} free on the filesystem of {self.path.parent})"
        return None

    def _write(self, data: bytes) -> str | None:
        """Write ``data`` whole; on a failure for want of room, undo the part written and say why."""
        view = memoryview(data)
        while view:
            try:
                n = os.write(self._fd, view)
            except InterruptedError:
                continue
            except OSError as e:
                if view.nbytes != len(data):
                    with contextlib.suppress(OSError):
                        os.ftruncate(self._fd, self._size)
                self._retry_at = time.monotonic() + _RETRY_AFTER
                if e.errno in _NO_ROOM:
                    return f"{os.strerror(e.errno or 0).lower()} ({self.path.parent})"
                return f"cannot write {self.path}: {e.strerror}"
            view = view[n:]
        self._size += len(data)
        return None

    def _count_gap(self, lines: int, nbytes: int, time_ns: int, why: str) -> None:
        if self._gap is None:
            self._gap = Gap(reason=why)
            self.gaps.append(self._gap)
            if self._on_gap is not None:
                self._on_gap(self._gap)
        self._gap.add(lines, nbytes, time_ns)

    def _write_gap_marker(self, force: bool = False) -> str | None:
        """Close the open gap with its marker record. ``force``: even into the headroom, cutting the
        file's last records if that is what it takes (they are then counted in the marker)."""
        gap = self._gap
        assert gap is not None
        record = b"%s stderr F %s\n" % (format_timestamp(time.time_ns()), gap.text().encode())
        why = self._write(record)
        if why is not None and force:
            self._make_room(gap, len(record))
            record = b"%s stderr F %s\n" % (format_timestamp(time.time_ns()), gap.text().encode())
            why = self._write(record)
        if why is None:
            self._gap = None
        return why

    def _make_room(self, gap: Gap, size: int) -> None:
        """Cut whole records off the end of the file (a block's worth more than ``size``), counting them
        in ``gap``: on a disk someone else filled, the marker must still fit."""
        want = self._size - size - os.fstatvfs(self._fd).f_bsize
        if want <= 0:
            cut = 0
        else:
            with open(self.path, "rb") as f:
                cut = _boundary_at(f, want)
        with open(self.path, "rb") as f:
            f.seek(cut)
            for raw in f.read(self._size - cut).split(b"\n")[:-1]:
                rec = raw.split(b" ", 3)
                gap.add(1, (len(rec[3]) if len(rec) == 4 else 0) + (rec[2:3] == [b"F"]), gap.since_ns)
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, cut)
            self._size = cut

    # -- rotation -----------------------------------------------------------------------------------

    def _rotate(self) -> None:
        """log → log.1 → log.2 …; the file past ``max_files`` is removed and accounted for."""
        keep = self.max_files - 1
        if keep <= 0:
            _forget(self.path, self.path, self.max_size, self.max_files)
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            self._size = 0
            return
        oldest = rotated_path(self.path, keep)
        if oldest.exists():
            _forget(self.path, oldest, self.max_size, self.max_files)
        for n in range(keep - 1, -1, -1):
            with contextlib.suppress(FileNotFoundError):
                os.rename(rotated_path(self.path, n), rotated_path(self.path, n + 1))
        os.close(self._fd)
        self._fd = self._open()
        self._size = 0


def _forget(log: Path, path: Path, max_size: int, max_files: int) -> None:
    """Remove ``path``, a rotated file of ``log``, adding what it held to the ``.rotated`` record."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return
    lines = data.count(b"\n")
    last = data[: data.rfind(b"\n")].rsplit(b"\n", 1)[-1] if lines else b""
    until = parse_timestamp(last.split(b" ", 1)[0]) or 0
    before = rotated_away(log)
    record = {
        "lines": before["lines"] + lines,
        "bytes": before["bytes"] + len(data),
        "files": before["files"] + 1,
        "until_ns": max(before["until_ns"], until),
        "max_size": max_size,
        "max_files": max_files,
    }
    side = log.with_name(log.name + ROTATED_SUFFIX)
    tmp = side.with_name(side.name + ".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, side)
    if path == log:
        return  # truncated in place by the caller (one file kept)
    path.unlink(missing_ok=True)


def rotated_away(path: Path) -> dict[str, int]:
    """What rotation removed from the log ``path`` so far: lines (records), bytes, files and the time of
    the last record removed (``until_ns``); zeros when nothing was."""
    try:
        data = json.loads(path.with_name(path.name + ROTATED_SUFFIX).read_text())
        return {k: int(data.get(k, 0)) for k in _ROTATED_KEYS}
    except (OSError, ValueError, TypeError, AttributeError):
        return dict.fromkeys(_ROTATED_KEYS, 0)


_ROTATED_KEYS = ("lines", "bytes", "files", "until_ns", "max_size", "max_files")


def rotation_marker(path: Path, key: str = "") -> LogRecord | None:
    """The record readers show first for what rotation removed from ``path``, or None."""
    gone = rotated_away(path)
    if not gone["lines"]:
        return None
    text = (
        f"kubetrain: {gone['lines']:,} earlier line{'s' if gone['lines'] != 1 else ''}"
        f" ({_human(gone['bytes'])} in {gone['files']} file{'s' if gone['files'] != 1 else ''})"
        f" rotated away (a replica's log keeps {gone['max_files']} files of {_human(gone['max_size'])};"
        f" {env_names.LOG_MAX_SIZE} and {env_names.LOG_MAX_FILES} set that)"
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


def append_note(path: Path, text: str, stream: str = "stderr") -> None:
    """Append one record to a log file from outside a running process group."""
    writer = LogWriter(path, headroom=0)
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
                yield from _iter_range(f, 0, _complete_end(f, size), flt, None, key)
            return
        picked: list[LogRecord] = []
        for f in reversed(files):  # newest first, until enough
            if len(picked) >= tail:
                break
            size = os.fstat(f.fileno()).st_size
            picked[:0] = _iter_range(f, 0, _complete_end(f, size), flt, tail - len(picked), key)
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
        end = _complete_end(f, size)
        start = _boundary_at(f, offset) if offset <= size else 0
        yield from _iter_range(f, min(start, end), end, flt, tail, key)


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


@dataclass
class _Follower:
    """One replica's log, followed: the file being written is kept open, so that when it is rotated
    what was appended to it before the rotation is still read, then the files after it."""

    key: str
    path: Path
    offset: int = 0
    pending: bytes = b""
    file: BinaryIO | None = None
    done_ino: int | None = None
    """The newest file read to its end (a rotated one), while no file is followed: the files after it are
    read before the one written now."""

    def history(self, flt: LogFilter, tail: int | None) -> Iterator[LogRecord]:
        """The records present now; later records are left to :meth:`read_new`."""
        try:
            self.file = open(self.path, "rb")  # noqa: SIM115 - kept open while following, see close()
        except FileNotFoundError:
            self.file = None
        # Fixed before the first record is yielded, so that history and following neither overlap nor
        # leave a gap; the rotated files are complete.
        if self.file is not None:
            self.offset = _complete_end(self.file, os.fstat(self.file.fileno()).st_size)
        marker = rotation_marker(self.path, self.key)
        older = open_log_files(self.path, current=False)
        if self.file is not None:
            # Rotated since it was opened (it is among them): the history is what came before it; it and
            # the files after it are read by `read_new`.
            inodes = [os.fstat(f.fileno()).st_ino for f in older]
            mine = os.fstat(self.file.fileno()).st_ino
            if mine in inodes:
                for f in older[inodes.index(mine) :]:
                    f.close()
                older = older[: inodes.index(mine)]
        elif older:
            self.done_ino = os.fstat(older[-1].fileno()).st_ino
        try:
            sources = [(f, _complete_end(f, os.fstat(f.fileno()).st_size)) for f in older]
            if self.file is not None:
                sources.append((self.file, self.offset))
            if tail is None:
                if marker is not None and flt.accepts(marker):
                    yield marker
                for f, end in sources:
                    yield from _iter_range(f, 0, end, flt, None, self.key)
                return
            picked: list[LogRecord] = []
            for f, end in reversed(sources):
                if len(picked) >= tail:
                    break
                picked[:0] = _iter_range(f, 0, end, flt, tail - len(picked), self.key)
            if marker is not None and len(picked) < tail and flt.accepts(marker):
                picked.insert(0, marker)
            yield from picked
        finally:
            for f in older:
                f.close()

    def read_new(self, flt: LogFilter) -> list[LogRecord]:
        out: list[LogRecord] = []
        if self.file is None:
            try:
                current = open(self.path, "rb")  # noqa: SIM115 - kept open while following
            except FileNotFoundError:
                return out
            # The files rotated since the last one read, up to the one now written: a slow reader (or one
            # that started before the log existed) may find several rotations done since it last looked.
            for f in self._rotated_since(os.fstat(current.fileno()).st_ino):
                with f:
                    self._parse(f.read(), flt, out)
                self.pending = b""  # a complete file's last record without its newline is not one
            self.file, self.offset, self.pending, self.done_ino = current, 0, b"", None
        self._read_rest(flt, out)
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return out  # between a rotation's rename and the new file: next round
        mine = os.fstat(self.file.fileno())
        if st.st_ino != mine.st_ino:
            # Rotated: the old file is complete now (the writer renames it only once done with it), and may
            # have grown, even filled up, between the read above and the look at its name: read to its end,
            # then the files written after it.
            self._read_rest(flt, out)
            self.pending = b""
            self.done_ino = mine.st_ino
            self.file.close()
            self.file = None
            return out + self.read_new(flt)
        if mine.st_size < self.offset:  # truncated in place: start over on the new content
            self.offset, self.pending = 0, b""
            self._read_rest(flt, out)
        return out

    def _rotated_since(self, current_ino: int) -> list[BinaryIO]:
        """The rotated files newer than ``done_ino`` and older than the file ``current_ino``, opened. When
        ``done_ino`` is no longer among them, rotation removed it (oldest first), so every rotated file left
        is newer than it: all of them are read, or their lines would be skipped uncounted."""
        files = open_log_files(self.path, current=False)
        inodes = [os.fstat(f.fileno()).st_ino for f in files]
        start = inodes.index(self.done_ino) + 1 if self.done_ino in inodes else 0
        end = inodes.index(current_ino) if current_ino in inodes else len(files)
        for f in files[:start] + files[end:]:
            f.close()
        return files[start:end]

    def _read_rest(self, flt: LogFilter, out: list[LogRecord]) -> None:
        assert self.file is not None
        self.file.seek(self.offset)
        data = self.file.read()
        self.offset += len(data)
        self._parse(data, flt, out)

    def _parse(self, data: bytes, flt: LogFilter, out: list[LogRecord]) -> None:
        data = self.pending + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self.pending = data
            return
        self.pending = data[cut + 1 :]
        for raw in data[:cut].split(b"\n"):
            rec = parse_record(raw, self.key)
            if rec is not None and flt.accepts(rec):
                out.append(rec)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


def follow_log(
    paths: Mapping[str, Path],
    until: Callable[[], bool],
    *,
    since: TimeBound | None = None,
    tail: int | None = None,
    grep: str | GrepPattern | None = None,
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
    try:
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
    finally:
        for fol in followers:
            fol.close()


def _chain_first(first: LogRecord, rest: Iterator[LogRecord]) -> Iterator[LogRecord]:
    yield first
    yield from rest
