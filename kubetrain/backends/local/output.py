"""Replica output: the log file format, its writer and readers, and the live terminal sink.

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

import calendar
import heapq
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import BinaryIO, TextIO

STREAMS = ("stdout", "stderr")
#: Longest line kept in one record; longer lines are split into ``P`` records.
MAX_LINE = 1 << 20

TimeBound = datetime | timedelta | float | int


# --------------------------------------------------------------------------- timestamps

_ts_cache: tuple[int, bytes] = (-1, b"")


def format_timestamp(time_ns: int) -> bytes:
    """``time_ns`` (wall clock, ns since the epoch) as ``YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ``."""
    global _ts_cache
    sec, frac = divmod(time_ns, 1_000_000_000)
    cached_sec, prefix = _ts_cache
    if sec != cached_sec:
        # strftime is the slow part and a busy replica writes many lines per second.
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)).encode()
        _ts_cache = (sec, prefix)
    return b"%s.%09dZ" % (prefix, frac)


_sec_cache: dict[bytes, int] = {}
_TS_RE = re.compile(rb"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def parse_timestamp(ts: bytes) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 timestamp (``Z`` or an offset); None if malformed."""
    m = _TS_RE.match(ts)
    if m is None:
        return None
    whole, frac, zone = m.groups()
    sec = _sec_cache.get(whole)
    if sec is None:
        try:
            sec = calendar.timegm(time.strptime(whole.decode(), "%Y-%m-%dT%H:%M:%S"))
        except ValueError:
            return None
        if len(_sec_cache) > 4096:
            _sec_cache.clear()
        _sec_cache[whole] = sec
    if zone != b"Z":
        sign = -1 if zone[:1] == b"+" else 1
        sec += sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    ns = int(frac.ljust(9, b"0")) if frac else 0
    return sec * 1_000_000_000 + ns


def _bound_ns(bound: TimeBound | None) -> int | None:
    if bound is None:
        return None
    if isinstance(bound, timedelta):
        return time.time_ns() - int(bound.total_seconds() * 1e9)
    if isinstance(bound, datetime):
        # A naive datetime is local time, as datetime.timestamp() has it.
        return int(bound.timestamp() * 1e9)
    return int(bound * 1e9)


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


@dataclass(frozen=True)
class LogRecord:
    time_ns: int  #: wall clock, ns since the epoch
    stream: str  #: "stdout" or "stderr"
    text: str  #: the line, without its newline
    partial: bool = False  #: the line had no newline (see the module doc)
    key: str = ""  #: the replica, when read through a multi-file reader

    @property
    def time(self) -> datetime:
        return datetime.fromtimestamp(self.time_ns / 1e9, UTC)


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


@dataclass(frozen=True)
class _Filter:
    since: int | None = None
    until: int | None = None
    grep: re.Pattern[str] | None = None
    streams: frozenset[str] | None = None

    def accepts(self, rec: LogRecord) -> bool:
        if self.since is not None and rec.time_ns < self.since:
            return False
        if self.until is not None and rec.time_ns >= self.until:
            return False
        if self.streams is not None and rec.stream not in self.streams:
            return False
        return self.grep is None or self.grep.search(rec.text) is not None


def _make_filter(
    since: TimeBound | None,
    until: TimeBound | None,
    grep: str | re.Pattern[str] | None,
    streams: Collection[str] | None,
) -> _Filter:
    return _Filter(
        _bound_ns(since),
        _bound_ns(until),
        re.compile(grep) if isinstance(grep, str) else grep,
        frozenset(streams) if streams is not None else None,
    )


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


def _iter_range(f: BinaryIO, start: int, end: int, flt: _Filter, tail: int | None, key: str) -> Iterator[LogRecord]:
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
    flt = _make_filter(since, until, grep, streams)
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

    def history(self, flt: _Filter, tail: int | None) -> Iterator[LogRecord]:
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

    def read_new(self, flt: _Filter) -> list[LogRecord]:
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
    flt = _make_filter(since, None, grep, streams)
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


# --------------------------------------------------------------------------- live output

# Distinct foreground colours, the most legible first; red comes last so that
# a replica's prefix is not mistaken for an error.
_PALETTE = ("36", "33", "32", "35", "34", "96", "93", "92", "95", "94", "31", "91")


def _wants_color(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class OutputSink:
    """Prints replicas' output live, each line prefixed ``[key] `` with a stable colour per replica.

    Lines are queued by :meth:`line` and written whole by :meth:`flush`, one
    write per round, so lines of different replicas never interleave mid-line.
    A replica's stdout goes to ``out`` and its stderr to ``err`` (default: our
    own stdout and stderr), so redirecting ``kubetrain run`` works as with any
    launcher. Colour is used on a terminal unless ``NO_COLOR`` is set;
    ``color=True``/``False`` forces it. If the output is gone (``| head``),
    printing stops quietly: the log files still get everything.
    """

    def __init__(
        self,
        out: TextIO | None = None,
        err: TextIO | None = None,
        *,
        color: bool | None = None,
        keys: Iterable[str] = (),
    ) -> None:
        self._out = out if out is not None else sys.stdout
        self._err = err if err is not None else sys.stderr
        self._color = {id(s): (color if color is not None else _wants_color(s)) for s in (self._out, self._err)}
        self._colors: dict[str, str] = {}
        self._width = 0
        self._queued: dict[int, list[str]] = {id(self._out): [], id(self._err): []}
        self._lock = threading.Lock()
        self._broken: set[int] = set()
        self.add_keys(keys)

    def add_keys(self, keys: Iterable[str]) -> None:
        """Register replicas in display order: colours follow this order and prefixes are padded to align."""
        with self._lock:
            for k in keys:
                if k not in self._colors:
                    self._colors[k] = _PALETTE[len(self._colors) % len(_PALETTE)]
                    self._width = max(self._width, len(k) + 2)

    def prefix(self, key: str, colored: bool) -> str:
        if key not in self._colors:
            self.add_keys([key])
        label = f"[{key}]"
        pad = " " * (self._width - len(label) + 1)
        if colored:
            return f"\x1b[{self._colors[key]}m{label}\x1b[0m{pad}"
        return label + pad

    def line(self, key: str, stream: str, text: str) -> None:
        """Queue one line (without its newline) of replica ``key``'s ``stream``."""
        target = self._err if stream == "stderr" else self._out
        pre = self.prefix(key, self._color[id(target)])
        with self._lock:
            self._queued[id(target)].append(f"{pre}{text}\n")

    def record(self, rec: LogRecord) -> None:
        """Queue a record read back from a log file (``logs -f``)."""
        self.line(rec.key, rec.stream, rec.text)

    def flush(self) -> None:
        """Write the queued lines."""
        with self._lock:
            for target in (self._out, self._err):
                queued = self._queued[id(target)]
                if not queued:
                    continue
                text = "".join(queued)
                queued.clear()
                if id(target) in self._broken:
                    continue
                self._write(target, text)

    def _write(self, target: TextIO, text: str) -> None:
        try:
            try:
                target.write(text)
            except UnicodeEncodeError:
                # A terminal that cannot show some character must not lose the line.
                enc = getattr(target, "encoding", None) or "ascii"
                target.write(text.encode(enc, "replace").decode(enc))
            target.flush()
        except (OSError, ValueError):
            self._broken.add(id(target))
