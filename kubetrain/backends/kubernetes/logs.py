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
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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

    def read(t: LogTarget, lines: int | None) -> tuple[list[LogRecord], int]:
        """The records of `t` that pass, of its last `lines` (None: all), and how many lines were read."""
        resp = kube.pod_log(t.pod, namespace, container=t.container, previous=previous, tail_lines=lines,
                            since_seconds=since_seconds(flt.since))
        kept: list[LogRecord] = []
        seen = 0
        for rec in iter_stream(resp, t.key):
            seen += 1
            if flt.until is not None and rec.time_ns >= flt.until:
                break  # the rest is later still: the stream is closed unread
            if flt.accepts(rec) and (hidden is None or not hidden(rec)):
                kept.append(rec)
        return kept, seen

    def one(t: LogTarget) -> list[LogRecord]:
        try:
            lines = server_tail
            while True:
                kept, seen = read(t, lines)
                if tail is None:
                    return kept
                if lines is None or len(kept) >= tail or seen < lines:  # enough, or the whole log read
                    return kept[-tail:] if tail else []
                lines *= 4
        except ApiError as exc:
            if exc.status in (400, 404) and missing is not None:
                missing(t, exc)
                return []
            raise

    with ThreadPoolExecutor(max_workers=min(8, max(1, len(targets)))) as pool:
        results = list(pool.map(one, targets))
    yield from heapq.merge(*results, key=lambda r: r.time_ns)


__all__ = [
    "STREAMS_MERGED",
    "LogTarget",
    "close_response",
    "iter_stream",
    "parse_line",
    "read_logs",
    "since_seconds",
    "targets_of",
]
