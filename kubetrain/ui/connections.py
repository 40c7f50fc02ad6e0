"""Bounds on the web view's connections: what anyone who can connect may hold, token or not.

A connection costs an open file. uvicorn closes a connection that stays idle after a response
(keep-alive), but not one that never sends a request, nor one that sends a byte now and then (its
keep-alive timer is cancelled at every byte received): idle sockets held the server's files until
`accept()` failed with "Too many open files", every real client timed out, and asyncio logged that failure
with a traceback up to `backlog` times per loop tick (300 MB of stderr in a minute). Here:

- **Idle timeout** (`idle_timeout`): a connection must send a complete request head within that many
  seconds of being opened or of its previous response, however it trickles its bytes; then it is closed.
  Once a request head has come the timer stops: a response (an event stream) may last as long as it needs.
- **Connection cap** (`max_connections`): at most that many connections at once, well below the open-file
  limit (`connection_cap`: half of what is left after `FILES_KEPT` for the job store, the logs followed
  and the libraries). A connection over the cap closes the connection that has waited longest without a
  request (a flood of idle sockets then cannot keep a real client out: a real client sends its request at
  once), or, when every connection is busy with a request, is answered 503 and closed at once.
- **`accept()` never fails for want of a file** (`Listener`): if the process runs out of files anyway (too
  many logs followed), it gives up a spare file kept for this, accepts the waiting connections and closes
  them at once, takes the spare back, and says so on stderr at most once per `NOTE_EVERY` seconds.
- **An accept batch of `ACCEPT_BATCH`**: asyncio accepts up to `backlog` connections in one loop tick, each
  an open file before its protocol can count it against the cap; uvicorn's backlog is that batch here, and
  the kernel's queue stays `LISTEN_QUEUE` long (asyncio gives its backlog to `listen()` too: `Listener`
  keeps its own).

What a client's bytes make uvicorn warn about (a request that is not valid HTTP: a CR or LF in its address;
an Upgrade header) is answered as uvicorn does (400; ignored) and said as a note at most every `NOTE_EVERY`
seconds (`QuietLogger`), not a line per request that anyone may send in a loop.

The protocol is uvicorn's h11 one (`http` pinned to it): `httptools` would be picked where installed, and it
has the same gap; one implementation is bounded and tested here.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import resource
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_CONNECTIONS = 1000
"""Connections at once, at most (lowered to `connection_cap` of the open-file limit)."""
DEFAULT_IDLE_TIMEOUT = 10.0
"""Seconds a connection may wait before its request head is complete (after opening or a response)."""
FILES_KEPT = 256
"""Open files kept out of the cap's reach: the job store, the log files a page's stream follows, libraries."""
MIN_CONNECTIONS = 8
ACCEPT_BATCH = 128
"""How many connections one loop tick accepts before their protocols count them against the cap."""
LISTEN_QUEUE = 2048
"""Connections the kernel holds for the server to accept: a burst longer than this drops handshakes, which
the clients retry only after a second."""
DEFAULT_METRIC_NAMES = 10_000
"""Metric names one job's tracker keeps, at most (`kubetrain ui --max-metric-names`); samples of further
names are counted, not kept, and the page says how many names it does not show."""
DEFAULT_METRIC_SAMPLES = 4_000_000
"""Samples one job's tracker holds, at most, over all its metrics (`kubetrain ui --max-metric-samples`): about
100 MB at 26 bytes a sample. Past it the longest series is thinned (half its samples go, evenly)."""


DEFAULT_LOG_VIEWERS = 64
"""Event streams with a job's log at once, at most (`--max-log-viewers`): each has a reader thread and a
buffer (`LOG_BUFFER_*`); the next ones wait for one of those to end (`app.LogReaders`)."""
DEFAULT_LOG_READERS = 4
"""Reader threads reading a log at once, at most (`--log-readers`), in slices of lines (`app.ReadTurns`)."""
LOG_BATCH_LINES = 2000
"""Lines per event of a log's stream at most, and a reader's turn (`app.ReadTurns`)."""
LOG_BUFFER_LINES = 2 * LOG_BATCH_LINES
"""Lines a log's event stream holds for its page at most: its reader waits while they are there (`app.Pipe`)."""
LOG_BUFFER_BYTES = 2 << 20
"""Bytes of text a log's event stream holds for its page at most (a longer line is held alone)."""
NOTE_EVERY = 10.0
"""Seconds between two notes on stderr of one kind (connections refused, closed, out of files)."""


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    log_viewers: int = DEFAULT_LOG_VIEWERS
    log_readers: int = DEFAULT_LOG_READERS


def effective_limits(
    max_connections: int | None,
    idle_timeout: float,
    log_viewers: int = DEFAULT_LOG_VIEWERS,
    log_readers: int = DEFAULT_LOG_READERS,
) -> tuple[ConnectionLimits, str | None]:
    """The limits to serve with: the open-file limit raised as far as allowed, and the cap (the default when
    None) lowered to what that leaves room for (`connection_cap`); with a warning when a cap asked for was
    lowered."""
    files = raise_open_file_limit()
    room = connection_cap(files)
    if max_connections is None:
        return ConnectionLimits(min(DEFAULT_MAX_CONNECTIONS, room), idle_timeout, log_viewers, log_readers), None
    if max_connections <= room:
        return ConnectionLimits(max_connections, idle_timeout, log_viewers, log_readers), None
    warning = (
        f"warning: --max-connections {max_connections} leaves too few of the {files} files this process may "
        f"open (ulimit -n) for the logs and the store: at most {room} connections at once"
    )
    return ConnectionLimits(room, idle_timeout, log_viewers, log_readers), warning


def raise_open_file_limit() -> int:
    """The soft limit of open files raised to the hard one where allowed (as most servers do at start); the
    soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft != resource.RLIM_INFINITY and wanted > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def connection_cap(open_files: int) -> int:
    """The most connections that leave room for the rest: half of what `FILES_KEPT` leaves of `open_files`."""
    return max(MIN_CONNECTIONS, (open_files - FILES_KEPT) // 2)


class Notes:
    """Lines on stderr, one per kind at most every `NOTE_EVERY` seconds, with how many times it happened."""

    def __init__(self) -> None:
        self.last: dict[str, float] = {}
        self.count: dict[str, int] = {}

    def say(self, kind: str, text: str) -> None:
        self.count[kind] = self.count.get(kind, 0) + 1
        now = time.monotonic()
        if now - self.last.get(kind, -NOTE_EVERY) < NOTE_EVERY:
            return
        times = self.count.pop(kind)
        self.last[kind] = now
        again = f" ({times} times since the last such note)" if times > 1 else ""
        print(f"kubetrain ui: {text}{again}", file=sys.stderr, flush=True)


NOTES = Notes()


class Listener(socket.socket):
    """A listening socket whose `accept()` never fails for want of a file. asyncio, given EMFILE, logs a
    traceback and tries again, `backlog` times in one loop tick, while the connections wait unanswered.
    This one closes the waiting connections instead, with a file kept spare for it, and says so once."""

    def __init__(self, family: int) -> None:
        super().__init__(family, socket.SOCK_STREAM)
        self.spare: int | None = self._spare()

    @staticmethod
    def _spare() -> int | None:
        try:
            return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None

    def listen(self, _backlog: int = LISTEN_QUEUE) -> None:
        # asyncio calls this with its accept batch (uvicorn's backlog): the kernel's queue stays long.
        super().listen(LISTEN_QUEUE)

    def accept(self) -> tuple[socket.socket, Any]:
        try:
            return super().accept()
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                raise
        closed = self._close_waiting()
        NOTES.say(
            "files",
            f"out of open files: closed {closed} new connection(s) at once; fewer viewers, or a higher "
            "open-file limit (ulimit -n), or a lower --max-connections",
        )
        # asyncio takes this as "nothing more to accept now" and waits for the next one.
        raise BlockingIOError(errno.EAGAIN, "out of open files")

    def _close_waiting(self) -> int:
        """Accept and close every waiting connection with the spare file; how many."""
        if self.spare is None:
            self.spare = self._spare()
            return 0
        os.close(self.spare)
        self.spare = None
        closed = 0
        try:
            while True:
                conn, _ = super().accept()
                conn.close()
                closed += 1
        except OSError:  # none waiting any more (or still no file: the next accept tries again)
            pass
        finally:
            self.spare = self._spare()
        return closed

    def close(self) -> None:
        if self.spare is not None:
            os.close(self.spare)
            self.spare = None
        super().close()


REFUSED = b"kubetrain ui: too many connections at once; try again later\n"

STRANGERS_NOTES = {
    "Invalid HTTP request received.": (
        "invalid",
        "answered 400 to a request that is not valid HTTP/1.1 (a CR or LF in its address, a malformed header)",
    ),
    "Unsupported upgrade request.": ("upgrade", "ignored a request's Upgrade header (this server speaks HTTP/1.1)"),
}
"""uvicorn's warnings about what a client sent, by their text: anyone who can connect chooses how often
they come, so they become a note at most every `NOTE_EVERY` seconds instead of a line each."""


class QuietLogger(logging.LoggerAdapter[logging.Logger]):
    """uvicorn's logger for one connection, with what a client's bytes cause said as `NOTES` (a count at most
    every `NOTE_EVERY` seconds); everything else (the server's own errors) goes through as it is."""

    @property
    def level(self) -> int:  # uvicorn compares it with its trace level
        return self.logger.level

    def warning(self, msg: object, *args: Any, **kwargs: Any) -> None:
        if isinstance(msg, str):
            if msg in STRANGERS_NOTES:
                kind, text = STRANGERS_NOTES[msg]
                NOTES.say(kind, text)
                return
            if msg.startswith("No supported WebSocket library detected"):
                return  # follows an Upgrade header (noted above): advice meant for an app that wants one
        self.logger.warning(msg, *args, **kwargs)


def protocol_class(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with the idle timeout and the connection cap of `limits`."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Bounded(H11Protocol):
        waiting_since = 0.0
        """When the connection last started waiting for a request head (opened, or its response sent)."""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            self.logger = QuietLogger(self.logger, {})  # type: ignore[assignment]
            super().connection_made(transport)
            self.waiting_since = time.monotonic()
            if len(self.connections) > limits.max_connections and not self._make_room():
                self._refuse()
                return
            self._expect_head()

        def _waiting(self) -> bool:
            """No request in progress: nothing is lost by closing it (a browser asks again elsewhere)."""
            return (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing()

        def _make_room(self) -> bool:
            """Close the connection that has waited longest for a request head; False if every one is busy."""
            waiting = (c for c in self.connections if c is not self and isinstance(c, Bounded) and c._waiting())
            oldest = min(waiting, key=lambda c: c.waiting_since, default=None)
            if oldest is None:
                return False
            oldest.close_idle()
            NOTES.say(
                "cap",
                f"{limits.max_connections} connections at once (--max-connections): closed the longest idle one",
            )
            return True

        def _refuse(self) -> None:
            NOTES.say("busy", f"{limits.max_connections} connections busy at once (--max-connections): refused one")
            head = (
                "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
                f"content-length: {len(REFUSED)}\r\nconnection: close\r\nretry-after: 1\r\n\r\n"
            )
            self.transport.write(head.encode() + REFUSED)
            self.transport.close()

        def _expect_head(self) -> None:
            self._unset_keepalive_if_required()
            self.timeout_keep_alive_task = self.loop.call_later(limits.idle_timeout, self.timeout_keep_alive_handler)

        def data_received(self, data: bytes) -> None:
            # uvicorn's cancels the timer at any byte received: a byte now and then would hold the connection
            # for ever. Here the timer stops once a whole request head has come (a request is then in
            # progress), and is set again after its response.
            self.conn.receive_data(data)
            self.handle_events()
            if not self._waiting():
                self._unset_keepalive_if_required()

        def on_response_complete(self) -> None:
            self.waiting_since = time.monotonic()
            super().on_response_complete()  # sets the timer again: config.timeout_keep_alive is idle_timeout

        def timeout_keep_alive_handler(self) -> None:
            self.close_idle()

        def close_idle(self) -> None:
            if self.transport.is_closing():
                return
            self._unset_keepalive_if_required()
            with contextlib.suppress(h11.LocalProtocolError):
                self.conn.send(h11.ConnectionClosed())
            self.transport.close()

    return Bounded


__all__ = [
    "ACCEPT_BATCH",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_LOG_READERS",
    "DEFAULT_LOG_VIEWERS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_METRIC_NAMES",
    "DEFAULT_METRIC_SAMPLES",
    "LISTEN_QUEUE",
    "LOG_BATCH_LINES",
    "LOG_BUFFER_BYTES",
    "LOG_BUFFER_LINES",
    "ConnectionLimits",
    "Listener",
    "connection_cap",
    "effective_limits",
    "protocol_class",
    "raise_open_file_limit",
]
