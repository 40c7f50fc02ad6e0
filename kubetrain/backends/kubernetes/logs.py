"""Replica logs from the API: every replica merged, with the local backend's record type and prefixes.

Each log is requested with ``timestamps=true`` and read as a byte stream (``_preload_content=False``:
we split lines ourselves; some client versions mangle plain-text bodies when they decode them). The
timestamp orders the merge and lets a re-opened stream skip what was already shown.

Following (``-f``) is :mod:`.log_follower`, above this module.
"""

from __future__ import annotations

import contextlib
import heapq
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ...contract.logs import (
    GrepPattern,
    LogRecord,
    TimeBound,
    make_filter,
    parse_timestamp,
)
from .client.errors import ApiError
from .client.kube import Kube
from .status_map import PodIndex
from .workload import meta

if TYPE_CHECKING:
    pass

Since = TimeBound  # one meaning of a time bound for both backends (contract.logs.bound_ns: no float error)


@dataclass(frozen=True)
class LogTarget:
    """One replica's current pod and container."""

    key: str  #: the replica, ``worker-1``: the output prefix
    pod: str
    container: str | None
    uid: str = ""


def since_seconds(bound_ns: int | None) -> int | None:
    if bound_ns is None:
        return None
    return max(1, int((time.time_ns() - bound_ns) / 1e9) + 1)


def parse_line(raw: bytes, key: str, partial: bool = False) -> LogRecord:
    """``<RFC3339Nano> <text>`` as the API writes a line with timestamps=true."""
    ts, sep, text = raw.partition(b" ")
    t = parse_timestamp(ts) if sep else None
    if t is None:
        return LogRecord(time.time_ns(), "stdout", raw.decode("utf-8", "replace"), partial, key)
    return LogRecord(t, "stdout", text.decode("utf-8", "replace"), partial, key)


def iter_stream(resp: Any, key: str) -> Iterator[LogRecord]:
    """The records of a streamed log response, as they arrive."""
    buf = b""
    complete = False
    try:
        for chunk in resp.stream(amt=None, decode_content=True):
            if not chunk:
                continue
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                yield parse_line(line, key)
        complete = True
        if buf:
            yield parse_line(buf, key, partial=True)
    finally:
        if not complete:
            resp.close()  # abandoned mid-stream: the connection cannot go back to the pool
        resp.release_conn()


def close_response(resp: Any) -> None:
    """Unblock a thread reading ``resp`` (shut the socket down; closing alone may wait on it)."""
    import socket

    try:
        conn = getattr(resp, "connection", None) or getattr(resp, "_connection", None)
        sock = getattr(conn, "sock", None)
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    with contextlib.suppress(Exception):  # closing is best effort
        resp.close()


STREAMS_MERGED = (
    "the Kubernetes API merges a container's stdout and stderr into one log, so kubetrain cannot tell them apart "
    "there; leave --stream out (both streams), or --grep for what the program writes to one of them (or run the "
    "job locally, whose logs keep each line's stream)"
)
"""Why `--stream` is refused on Kubernetes: the `pods/log` API has no stream parameter (TorchX's Kubernetes
scheduler refuses every stream but COMBINED for the same reason)."""


# --------------------------------------------------------------------------------------------- one-shot


def _read(kube: Kube, namespace: str, t: LogTarget, lines: int | None, since: int | None, previous: bool,
          until: int | None = None, keep: Callable[[LogRecord], bool] | None = None) -> tuple[list[LogRecord], int]:
    """The records of `t`'s log that `keep` keeps (None: all), of its last `lines` (None: all) up to `until`
    (ns), and how many lines were read."""
    resp = kube.pod_log(t.pod, namespace, container=t.container, previous=previous, tail_lines=lines,
                        since_seconds=since)
    out: list[LogRecord] = []
    seen = 0
    for rec in iter_stream(resp, t.key):
        seen += 1
        if until is not None and rec.time_ns >= until:
            break  # the rest is later still: the stream is closed unread
        if keep is None or keep(rec):
            out.append(rec)
    return out, seen


_Read = TypeVar("_Read")


def _widened(tail: int, read_last: Callable[[int], tuple[_Read, int, int]]) -> tuple[_Read, int]:
    """What ``read_last(lines)`` makes of the log's last ``lines`` (it answers that, the lines it showed and the
    lines it read), from ``lines`` = ``tail`` up, ×4 each time, until ``tail`` lines are shown or the whole log was
    read: the API's ``tailLines`` counts every line, where kubetrain's ``--tail`` counts the lines shown. Returns
    the last read's answer and how many lines it read."""
    lines = tail
    while True:
        answer, found, seen = read_last(lines)
        if seen < lines or found >= tail:  # the whole log, or enough
            return answer, seen
        lines *= 4


def _last_shown(kube: Kube, namespace: str, t: LogTarget, tail: int, shown: Callable[[LogRecord], bool],
                since: int | None, previous: bool = False) -> list[LogRecord]:
    """The lines `shown` of the end of `t`'s log that holds its last `tail` of them (or of the whole log, when it
    has fewer), the read widened as needed (`_widened`)."""
    def read_last(lines: int) -> tuple[list[LogRecord], int, int]:
        read, seen = _read(kube, namespace, t, lines, since, previous, keep=shown)
        return read, len(read), seen

    return _widened(tail, read_last)[0]


@dataclass(frozen=True)
class TailStart:
    """Where the last lines shown of a log begin, for a follow that starts there (`logs -f --tail N`, whose
    ``tailLines`` would count the lines left out too): lines stamped before `time_ns` are skipped, and the
    first `equal` stamped `time_ns` (lines of one nanosecond, before the first one shown)."""

    time_ns: int
    equal: int

    def skips(self, rec: LogRecord, equal_seen: int) -> bool:
        """`rec` comes before the start; `equal_seen`: lines stamped `time_ns` already skipped."""
        return rec.time_ns < self.time_ns or (rec.time_ns == self.time_ns and equal_seen < self.equal)


def tail_start(kube: Kube, namespace: str, t: LogTarget, tail: int, shown: Callable[[LogRecord], bool],
               since: int | None = None) -> TailStart | None:
    """Where `t`'s last `tail` lines `shown` begin, read as `read_logs` reads them (so a follow starts with the
    lines the one-shot read shows); after the last line when none is shown; None for an empty log. Only the
    starts of the last `tail` lines shown are kept, however far the read is widened."""
    def starts_in(lines: int) -> tuple[tuple[deque[TailStart], TailStart], int, int]:
        """The starts of the last `tail` lines shown of the log's last `lines` and where its last line ends, how
        many lines were shown and how many read."""
        starts: deque[TailStart] = deque(maxlen=tail)
        run = TailStart(-1, 0)  # the lines stamped alike so far (a log is in time order: they are together)
        found = 0

        def note(rec: LogRecord) -> bool:
            nonlocal run, found
            run = TailStart(rec.time_ns, run.equal + 1 if rec.time_ns == run.time_ns else 1)
            if shown(rec):
                starts.append(TailStart(rec.time_ns, run.equal - 1))
                found += 1
            return False  # nothing kept: the starts are

        _, seen = _read(kube, namespace, t, lines, since, False, keep=note)
        return (starts, run), found, seen

    (starts, end), seen = _widened(tail, starts_in)
    if not seen:
        return None
    return starts[0] if starts else end


def targets_of(grouped: PodIndex, containers: dict[str, str | None], role: str | None = None,
               index: int | None = None) -> list[LogTarget]:
    out = []
    for (r, i), pod in sorted(grouped.current.items()):
        if (role is not None and r != role) or (index is not None and i != index):
            continue
        m = meta(pod)
        out.append(LogTarget(f"{r}-{i}", m.get("name", ""), containers.get(r), m.get("uid", "")))
    return out


def read_logs(
    kube: Kube,
    namespace: str,
    targets: Sequence[LogTarget],
    *,
    tail: int | None = None,
    since: Since | None = None,
    until: Since | None = None,
    grep: str | GrepPattern | None = None,
    previous: bool = False,
    missing: Callable[[LogTarget, ApiError], None] | None = None,
    hidden: Callable[[LogRecord], bool] | None = None,
) -> Iterator[LogRecord]:
    """The logs of ``targets`` as they are now, merged in time order (``tail`` per replica, as kubectl).

    ``tail`` counts the lines shown, as the local backend's does: those ``grep`` finds, without the ``hidden``
    ones (metric lines). The API's ``tailLines`` counts every line, so where the filter drops some the read is
    widened (×4 each time) until ``tail`` lines pass or the log has no more.

    ``until`` is applied here, the API having no such bound: a container's lines are in time order, so its
    stream is left at the first line at or after it. With ``tail`` too, the last lines *before* ``until`` are
    meant, which the API's ``tailLines`` (the log's last lines) cannot give: the log is then read up to
    ``until`` and its last ``tail`` lines kept here.

    A replica whose container has not started has no log yet (``missing`` is told, nothing raised).
    """
    flt = make_filter(since, until, grep)
    server_tail = tail if flt.until is None else None

    def shown(rec: LogRecord) -> bool:
        return flt.accepts(rec) and (hidden is None or not hidden(rec))

    def one(t: LogTarget) -> list[LogRecord]:
        try:
            if tail is None or server_tail is None:
                kept, _ = _read(kube, namespace, t, None, since_seconds(flt.since), previous, flt.until, shown)
            else:
                kept = _last_shown(kube, namespace, t, tail, shown, since_seconds(flt.since), previous)
            return kept if tail is None else kept[-tail:] if tail else []
        except ApiError as exc:
            if exc.status in (400, 404) and missing is not None:
                missing(t, exc)
                return []
            raise

    from concurrent.futures import ThreadPoolExecutor  # on use: ~3 ms (and logging) status and describe need not pay

    with ThreadPoolExecutor(max_workers=min(8, max(1, len(targets)))) as pool:
        results = list(pool.map(one, targets))
    yield from heapq.merge(*results, key=lambda r: r.time_ns)


__all__ = [
    "STREAMS_MERGED",
    "LogTarget",
    "TailStart",
    "close_response",
    "iter_stream",
    "parse_line",
    "read_logs",
    "since_seconds",
    "tail_start",
    "targets_of",
]
