"""Log records as both backends give them, their timestamps, and the filters `kubetrain logs` applies.

A record is one line of a replica's output with the time it was read and its stream: the local backend
reads them back from its CRI-format log files, the Kubernetes backend from the API's `timestamps=true`
log stream. Both parse the same RFC 3339 timestamps and filter with the same `LogFilter`, so `--since`,
`--grep` and the rest mean one thing on every backend.

A grep is any `GrepPattern`: the CLI's is a compiled `re` pattern; the web view's gives up on a line that
takes too long (`SearchTooSlow`), because Python's `re` cannot be stopped once it backtracks.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from .errors import KubetrainError, UsageError

STREAMS = ("stdout", "stderr")

LogStream = Literal["stdout", "stderr"]
"""One of a replica's output streams, as `logs(stream=...)` and `--stream` take it (TorchX's `Stream`, less its
`COMBINED`: leaving the stream out is both, merged)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

TimeBound = datetime | timedelta | float | int
"""A point in time: a datetime (naive is local time), an age (timedelta: that long ago), or epoch seconds."""


# -- timestamps --------------------------------------------------------------------------------------

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


def format_seconds(time_ns: int) -> str:
    """``time_ns`` as an RFC 3339 time to the second, as the Kubernetes API takes it (``sinceTime``)."""
    return datetime.fromtimestamp(time_ns // 1_000_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_sec_cache: dict[bytes, int] = {}
# RFC 3339, leniently: more than 9 fraction digits are cut, a missing zone is UTC.
_TS_RE = re.compile(rb"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$")


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
    if zone and zone != b"Z":
        sign = -1 if zone[:1] == b"+" else 1
        sec += sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    ns = int(frac[:9].ljust(9, b"0")) if frac else 0
    return sec * 1_000_000_000 + ns


def parse_time(value: Any) -> float | None:
    """Epoch seconds of an RFC 3339 time as the API writes it (``2026-01-02T03:04:05Z``); None if it is not one."""
    if not isinstance(value, str):
        return None
    ns = parse_timestamp(value.encode("ascii", "replace"))
    return None if ns is None else ns / 1e9


def bound_ns(bound: TimeBound | None) -> int | None:
    """A `TimeBound` as ns since the epoch."""
    if bound is None:
        return None
    if isinstance(bound, timedelta):
        return time.time_ns() - int(bound.total_seconds() * 1e9)
    if isinstance(bound, datetime):
        # A naive datetime is local time, as datetime.timestamp() has it. Counted in whole microseconds, not
        # through a float (which is 100 ns off by now): a time copied from `--timestamps` must fall exactly.
        aware = bound if bound.tzinfo is not None else bound.astimezone()
        return (aware - _EPOCH) // timedelta(microseconds=1) * 1000
    return int(bound * 1e9)


_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_duration(text: str, option: str = "--since") -> timedelta:
    """`30s`, `5m`, `2h`, `1h30m`, as kubectl's --since takes them."""
    m = _DURATION.fullmatch(text.strip())
    if not text.strip() or m is None or not any(m.groups()):
        raise UsageError(f"{option} {text!r}: use a duration such as 30s, 5m, 2h or 1h30m")
    h, mi, s = (int(g) if g else 0 for g in m.groups())
    return timedelta(hours=h, minutes=mi, seconds=s)


def parse_time_bound(text: str, option: str) -> datetime | timedelta:
    """`--until`'s (and the like's) value: an RFC 3339 time (`2026-11-27T16:20:00Z`, an offset, or no zone:
    UTC, as the API's times), or a duration back from now as `--since` takes it (`30s`, `5m`, `1h30m`)."""
    stripped = text.strip()
    if stripped[:1].isdigit() and "T" in stripped.upper():
        ns = parse_timestamp(stripped.upper().encode("ascii", "replace"))
        if ns is None:
            raise UsageError(f"{option} {text!r}: not an RFC 3339 time; use e.g. 2026-11-27T16:20:00Z, or a "
                             "duration back from now such as 30s, 5m, 2h or 1h30m")
        # Whole microseconds, down (a datetime holds no more): a time copied from `--timestamps` still ends
        # the output before its own line, and no float rounds it up past it.
        return _EPOCH + timedelta(microseconds=ns // 1000)
    try:
        return parse_duration(stripped, option)
    except UsageError:
        raise UsageError(f"{option} {text!r}: use an RFC 3339 time such as 2026-11-27T16:20:00Z, or a duration "
                         "back from now such as 30s, 5m, 2h or 1h30m") from None


def check_stream(stream: str | None) -> frozenset[str] | None:
    """`stream` as a filter's set of streams (None: both); a clear error for anything else."""
    if stream is None:
        return None
    if stream not in STREAMS:
        raise UsageError(f"--stream {stream!r}: use stdout or stderr (leave it out for both)")
    return frozenset((stream,))


# -- records -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogRecord:
    time_ns: int  #: wall clock, ns since the epoch
    stream: str  #: "stdout" or "stderr"
    text: str  #: the line, without its newline
    partial: bool = False  #: the line had no newline (it was cut, or output ended without one)
    key: str = ""  #: the replica (`worker-1`), when read through a multi-replica reader

    @property
    def time(self) -> datetime:
        return datetime.fromtimestamp(self.time_ns / 1e9, UTC)


class GrepPattern(Protocol):
    """What a log filter's grep is: anything whose `search(text)` finds it in a line (a match, else None).
    A compiled `re` pattern is one; the web view's time-limited pattern is another."""

    def search(self, text: str, /) -> object: ...


class SearchTooSlow(KubetrainError):
    """A grep gave up on a line: its search ran past its time limit. The pattern raises it knowing only the
    line's text; the filter that asked names the line (`at`), so the reader can find it and see why (a long
    line, typically). Its message is `summary (which line): advice`."""

    def __init__(self, summary: str, advice: str, line: LogRecord | None = None) -> None:
        self.summary, self.advice, self.line = summary, advice, line
        where = "" if line is None else f" ({_which_line(line)})"
        super().__init__(f"{summary}{where}: {advice}")

    def at(self, line: LogRecord) -> SearchTooSlow:
        return SearchTooSlow(self.summary, self.advice, line)


def _which_line(rec: LogRecord) -> str:
    when = rec.time.strftime("%Y-%m-%d %H:%M:%S UTC")
    who = f"{rec.key} wrote" if rec.key else "written"
    return f"the line {who} at {when}, {len(rec.text):,} characters long"


def grep_finds(grep: GrepPattern, rec: LogRecord) -> bool:
    """`grep` finds something in `rec`'s text; a search that gave up says on which line."""
    try:
        return grep.search(rec.text) is not None
    except SearchTooSlow as exc:
        raise exc.at(rec) from None


@dataclass(frozen=True)
class LogFilter:
    """Which records `kubetrain logs` keeps: a time window, a pattern, streams."""

    since: int | None = None
    until: int | None = None
    grep: GrepPattern | None = None
    streams: frozenset[str] | None = None

    def accepts(self, rec: LogRecord) -> bool:
        if self.since is not None and rec.time_ns < self.since:
            return False
        if self.until is not None and rec.time_ns >= self.until:
            return False
        if self.streams is not None and rec.stream not in self.streams:
            return False
        return self.grep is None or grep_finds(self.grep, rec)


def make_filter(
    since: TimeBound | None = None,
    until: TimeBound | None = None,
    grep: str | GrepPattern | None = None,
    streams: Collection[str] | None = None,
) -> LogFilter:
    return LogFilter(
        bound_ns(since),
        bound_ns(until),
        re.compile(grep) if isinstance(grep, str) else grep,
        frozenset(streams) if streams is not None else None,
    )


class LogSink(Protocol):
    """Where a running job's output goes as it arrives (the terminal, a notebook, a test)."""

    def add_keys(self, keys: Collection[str]) -> None:
        """Replicas in display order, before their first line."""

    def line(self, key: str, stream: str, text: str) -> None:
        """One line (without its newline) of replica `key`'s `stream`."""

    def record(self, rec: LogRecord) -> None:
        """A record read back from a log."""

    def flush(self) -> None:
        """Write what was queued."""


__all__ = [
    "STREAMS",
    "GrepPattern",
    "LogFilter",
    "LogRecord",
    "LogSink",
    "LogStream",
    "SearchTooSlow",
    "TimeBound",
    "bound_ns",
    "check_stream",
    "format_seconds",
    "format_timestamp",
    "grep_finds",
    "make_filter",
    "parse_duration",
    "parse_time",
    "parse_time_bound",
    "parse_timestamp",
]
