"""The web view's ASGI app (Starlette): pages, server-sent events, metric plots and actions.

Routes (every one but the page addresses and `/static/` needs `Authorization: Bearer <token>`):

- `GET /` and `GET /jobs/{backend}/{id}`: the page addresses, answered to anyone with the one layout
  (`pages.SHELL`), whose script asks for the rest with the token.
- `GET /content?sort=&dir=&phase=&q=&page=&per=`: the jobs table as the query says (`job_list.py`);
  `GET /events?...&have=DIGEST`: its updates (event `jobs`: the rows that changed, with their HTML, and,
  when it moved, the rows' order; the summary under the table when it changed; see `table_diff.py`).
- `GET /jobs/{backend}/{id}/content?...`: a job's page (the query fills its log filters and plot axes);
  `GET .../events?role=&index=&grep=&tail=&after=&log=`: its one stream (`status`: the page's data and its
  pieces, rendered; `metrics`: the metric names and how many samples there are, which the page turns into
  new plot URLs; `lines`, then `end` or `failed`: the merged output with those filters, followed, after
  the page's last line with `after`, none with `log=off`). One stream per page: a browser holds at most 6
  connections to one host for all its tabs.
- `GET .../plot.svg?name=METRIC&x=step|time&scale=linear|log`: a plot;
  `GET .../metrics?name=METRIC&format=lines|csv|json`: its samples (`lines`: a line per series and attempt,
  for the interactive plot). `GET .../detail.json`, `GET /api/jobs`: the data.
- `POST .../{cancel|suspend|resume|delete}`: an action (from this origin, when a browser says where from).

Blocking backend calls run in threads; followers of logs and metrics run on threads of their own and hand
their records to the event loop (`call_soon_threadsafe`). The log's grep is searched with the `regex` module
(`TimedGrep`): it lets go of the GIL while it searches and gives up on a line after `GREP_LINE_SECONDS`.
Updates are sent when a source's change feed moves (`changes.py`); a quiet stream sends a comment every
`KEEPALIVE` seconds so a closed tab is noticed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import io
import json
import re
import threading
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    Sequence,
)
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import regex  # type: ignore[import-untyped]
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..contract.errors import KubetrainError
from ..contract.grep_bounds import GrepRefused, check_size
from ..contract.logs import LogRecord, SearchTooSlow
from ..metrics.csv_rows import write_csv
from ..terminal import sanitize
from . import pages, plot_data, svg
from .changes import ChangeFeed
from .connections import (
    DEFAULT_LOG_READERS,
    DEFAULT_LOG_VIEWERS,
    LOG_BATCH_LINES,
    LOG_BUFFER_BYTES,
    LOG_BUFFER_LINES,
)
from .job_list import ListQuery, select
from .metrics_tracker import MetricsTracker
from .security import Guard
from .sources import Source
from .table_diff import TableState, is_empty, row_key, rows_digest
from .views import ACTIONS

STATIC_DIR = Path(__file__).with_name("static")
ENDED = ("Succeeded", "Failed", "Cancelled")
"""The phases after which a job's metrics and log grow no more."""
KEEPALIVE = 15.0
"""Seconds of quiet after which a stream sends a comment (a closed tab then ends its stream)."""
COALESCE = 0.05
"""Seconds a stream waits after a change for the rest of its burst, so a burst costs one update."""
LOG_BATCH = LOG_BATCH_LINES
"""Lines per `lines` event at most (the page appends each event as one text block); a reader's slice."""
TURN_IDLE = 0.25
"""Seconds a reader waits for its log's next line before its turn counts as free (`ReadTurns`): reading
takes microseconds a line, so that long a wait is the end of a running job's output, not work."""
_END = object()
GREP_LINE_SECONDS = 1.0
"""How long the page's grep may search one line before it is given up as too slow (a usual expression takes
microseconds, a few milliseconds on a line of a megabyte; one that backtracks may take years)."""
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


# -- security middleware ------------------------------------------------------------------------------


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


PAGE_PATH = re.compile(r"/|/jobs/[^/]+/[^/]+")
"""The addresses a person opens: they answer anyone with `pages.SHELL`, which holds no job data."""
UNAUTHORIZED = (
    "kubetrain ui: this needs the page's token: open the address kubetrain ui printed at start "
    "(it ends with #token=...), or send Authorization: Bearer <token>"
)


def is_public(scope: Scope) -> bool:
    """What answers without the token: the page layout (a browser opening an address sends no header of the
    page's own) and kubetrain's own script and stylesheet. Nothing of a job."""
    if scope["method"] not in ("GET", "HEAD"):
        return False
    path = scope["path"]
    return path.startswith("/static/") or PAGE_PATH.fullmatch(path) is not None


class GuardMiddleware:
    """Host check, the token (`Authorization: Bearer`, never a cookie) and the same-origin check for actions
    (`security.Guard`), and the response headers that keep pages from being framed, cached or running
    anything not served here."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        g = self.guard
        host = _header(scope, b"host")
        if not g.host_allowed(host):
            await _plain(send, 403, "kubetrain ui answers only to localhost addresses (Host header refused)")
            return
        public = is_public(scope)
        if not public and not g.authorized(_header(scope, b"authorization")):
            # 401, not 403: the page's script tells a refused token (its server restarted with a new one)
            # from a refused request. A bearer challenge makes no browser ask for a password.
            await _plain(send, 401, UNAUTHORIZED, [(b"www-authenticate", b'Bearer realm="kubetrain ui"')])
            return
        if scope["method"] not in ("GET", "HEAD") and not g.same_origin(
            _header(scope, b"origin"), _header(scope, b"sec-fetch-site"), host
        ):
            await _plain(send, 403, "cross-site request refused")
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not public and not any(k == b"cache-control" for k, _ in headers):
                    headers.append((b"cache-control", b"no-store"))  # a job's data stays out of caches
                headers += SECURITY_HEADERS
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


async def _plain(send: Send, status: int, text: str, extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = (text + "\n").encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*headers, *extra, *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})


# -- following on threads -------------------------------------------------------------------------------


class ReadTurns:
    """Turns at reading logs, taken by the log streams' reader threads: at most `limit` read at once, the
    others wait, first come first served. A reader gives its turn back after each `slice` of lines and
    whenever it waits for its page to take what it holds, so 50 pages opened on a 1M-line log each get
    their first lines within a round of slices, while at most `limit` threads contend with the event loop
    for the GIL (50 at once left `/api/jobs` unanswered for a minute). A reader that has waited `idle`
    seconds for its next line (at the end of a running job's output) reads nothing meanwhile: its turn
    counts as free, so the followers of quiet running jobs never keep the other pages from their logs."""

    def __init__(self, limit: int = DEFAULT_LOG_READERS, slice: int = LOG_BATCH, idle: float = TURN_IDLE) -> None:
        self.limit = limit
        self.slice = slice
        self.idle = idle
        self.holders: set[Pipe] = set()
        self._queue: collections.deque[object] = collections.deque()
        self._cond = threading.Condition()

    def _reading(self) -> int:
        """Holders reading now: not waiting for a next line for `idle` seconds or more."""
        now = time.monotonic()
        return sum(1 for p in self.holders if p.next_since is None or now - p.next_since < self.idle)

    def take(self, pipe: Pipe) -> bool:
        """Wait for a turn for `pipe`'s reader; False: the pipe was stopped meanwhile."""
        with self._cond:
            ticket = object()
            self._queue.append(ticket)
            while not (self._queue[0] is ticket and self._reading() < self.limit):
                if pipe.stopped.is_set():
                    self._queue.remove(ticket)
                    self._cond.notify_all()
                    return False
                # Woken by a turn given back, or after `idle`: a holder may have gone idle meanwhile.
                self._cond.wait(self.idle)
            self._queue.popleft()
            self.holders.add(pipe)
            self._cond.notify_all()
            return True

    def give_back(self, pipe: Pipe) -> None:
        with self._cond:
            self.holders.discard(pipe)
            self._cond.notify_all()

    def wake(self) -> None:
        """Let waiting readers look at their `stopped` again."""
        with self._cond:
            self._cond.notify_all()


class Pipe:
    """Items from a blocking iterator on a thread of its own, handed to the event loop in batches.

    Bounded, and nothing lost: once it holds `limit` items or `limit_bytes` of their text, its thread waits
    until the stream has taken some (which it does as fast as its viewer reads: uvicorn waits for a slow
    client's socket to drain), so a viewer that reads slowly costs this buffer and no more, however long
    the log. (It dropped the oldest of up to 200,000 lines per viewer before: 50 viewers of a 1M-line log
    held 2.9 GB.)"""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        limit: int = LOG_BUFFER_LINES,
        limit_bytes: int = LOG_BUFFER_BYTES,
        turns: ReadTurns | None = None,
    ) -> None:
        self.loop = loop
        self.turns = turns
        self.next_since: float | None = None
        """Since when its reader has waited for the iterator's next item (None: it is not waiting)."""
        self.items: collections.deque[Any] = collections.deque()
        self.limit = limit
        self.limit_bytes = limit_bytes
        self.held_bytes = 0
        self.done = False
        self.error: BaseException | None = None
        self.stopped = threading.Event()
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._ready = asyncio.Event()

    def run(self, iterator: Callable[[], Iterator[Any]], name: str) -> Pipe:
        def pump() -> None:
            turns, held, count = self.turns, False, 0
            try:
                items = iter(iterator())
                while not self.stopped.is_set():
                    if turns is not None and not held:
                        if not turns.take(self):
                            break
                        held, count = True, 0
                    self.next_since = time.monotonic()
                    item = next(items, _END)
                    self.next_since = None
                    if item is _END or self.stopped.is_set():
                        break
                    count += 1
                    if held and turns is not None and (count >= turns.slice or not self.has_room(item)):
                        turns.give_back(self)  # its slice is used, or it is about to wait for its page
                        held = False
                    if not self.put(item):
                        break
            except BaseException as exc:  # shown to the viewer, not lost on a thread
                self.error = exc
            finally:
                if held and turns is not None:
                    turns.give_back(self)
                self.done = True
                self._notify()

        threading.Thread(target=pump, name=name, daemon=True).start()
        return self

    @staticmethod
    def size(item: Any) -> int:
        """An item's weight against `limit_bytes`: a log line's text and a little for the rest."""
        if isinstance(item, list) and len(item) > 2 and isinstance(item[2], str):
            return len(item[2]) + 64
        return 64

    def has_room(self, item: Any) -> bool:
        """Whether `put(item)` would hold it at once. One item always fits an empty pipe, however large: a
        line longer than the bound still goes."""
        if not self.items:
            return True
        return len(self.items) < self.limit and self.held_bytes + self.size(item) <= self.limit_bytes

    def put(self, item: Any) -> bool:
        """Hold `item` for the stream, once there is room (False: the stream ended while waiting)."""
        weight = self.size(item)
        with self._room:
            while not self.has_room(item):
                if self.stopped.is_set():
                    return False
                self._room.wait()
            was_empty = not self.items
            self.items.append(item)
            self.held_bytes += weight
        if was_empty:
            self._notify()
        return True

    def stop(self) -> None:
        """The stream has ended: its thread stops at its next item, or at once if it waits for room."""
        with self._room:
            self.stopped.set()
            self._room.notify_all()
        if self.turns is not None:
            self.turns.wake()

    def _notify(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._ready.set)

    def wake(self) -> None:
        self._notify()

    def take(self, most: int) -> list[Any]:
        """Up to `most` of the items read so far (none: nothing new)."""
        self._ready.clear()
        with self._room:
            batch = [self.items.popleft() for _ in range(min(most, len(self.items)))]
            self.held_bytes -= sum(self.size(item) for item in batch)
            if self.items:
                self._ready.set()
            if batch:
                self._room.notify_all()
        return batch

    async def ready(self, timeout: float) -> None:
        """Once there are items to take or the iterator has ended (or after `timeout` seconds)."""
        if not self.items and not self.done:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), timeout)

    @property
    def pending(self) -> bool:
        """Items to take, or an end not yet taken."""
        return bool(self.items) or self.done

    @property
    def finished(self) -> bool:
        return self.done and not self.items


class LogReaders:
    """How many event streams have a log at once (`limit`); the next ones wait, first come first served,
    while their pages get the job's status and plots. Each such stream holds a reader thread, the files it
    follows and a buffer (`Pipe`): this bounds them all, whatever the connections."""

    def __init__(self, limit: int = DEFAULT_LOG_VIEWERS) -> None:
        self.limit = limit
        self.reading = 0
        self.queue: collections.deque[asyncio.Future[None]] = collections.deque()

    def try_enter(self) -> asyncio.Future[None] | None:
        """None: a reader may start now (counted); else a future done once it may (then counted)."""
        if self.reading < self.limit and not self.queue:
            self.reading += 1
            return None
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.queue.append(turn)
        return turn

    def waiting_message(self) -> str:
        reading = "1 page is reading a log" if self.limit == 1 else f"{self.limit} pages are reading logs"
        return (
            f"waiting to read the log: {reading} at once (kubetrain ui --max-log-viewers); it starts when one "
            "of them is closed or has read its log to the end"
        )

    def leave(self, turn: asyncio.Future[None] | None) -> None:
        """A reader ended, or a waiting stream went before its turn (`turn`, not done yet)."""
        if turn is not None and not turn.done():
            with contextlib.suppress(ValueError):
                self.queue.remove(turn)
            turn.cancel()
            return
        self.reading -= 1
        while self.queue and self.reading < self.limit:
            following = self.queue.popleft()
            if not following.cancelled():
                self.reading += 1
                following.set_result(None)


# -- the app -----------------------------------------------------------------------------------------------


def _count(name: str, value: str, meaning: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise ValueError(f"{name}: give {meaning}, a whole number from 0 (got {value!r})")
    return number


def log_filters(query: Mapping[str, str]) -> dict[str, Any]:
    """The log's filters from a stream's parameters (`role`, `index`, `grep`, `tail`; empty ones ignored).

    Raises ValueError saying, in the page's words (its fields, not the CLI's flags), which field is wrong
    and what it takes: the page shows the message beside the filters."""
    filters: dict[str, Any] = {}
    if query.get("role"):
        filters["role"] = query["role"]
    if query.get("index"):
        filters["index"] = _count("index", query["index"], "a replica's index")
        if "role" not in filters:
            raise ValueError("index: choose a role too (an index counts the replicas of one role)")
    if query.get("tail"):
        filters["tail"] = _count("tail", query["tail"], "how many of the last lines to show")
    if query.get("grep"):
        filters["grep"] = TimedGrep(query["grep"])
    return filters


def log_resume(query: Mapping[str, str]) -> dict[str, tuple[int, int]] | None:
    """Where a resumed log stream starts (`after`: what the page has received): per replica, the time of
    its last line in milliseconds since the epoch (exact in a page's numbers, where nanoseconds are not) and
    how many of its lines had that time. None: from the start.

    Raises ValueError (said beside the filters) for a cursor the page cannot have sent."""
    text = query.get("after")
    if not text:
        return None
    try:
        data = json.loads(text)
        cursor = {str(k): (int(v[0]), int(v[1])) for k, v in data.items()}
    except (ValueError, TypeError, AttributeError, IndexError, KeyError):
        raise ValueError("after: where the page's log stopped, as {replica: [time_ms, count]}") from None
    return cursor


def after_cursor(records: Iterable[LogRecord], cursor: Mapping[str, tuple[int, int]]) -> Iterator[LogRecord]:
    """The records a page that has `cursor`'s lines has not seen: per replica, those after its last line
    received (a replica's lines come in the order it wrote them, whatever the merge of the replicas)."""
    skipped: dict[str, int] = {}
    for record in records:
        seen = cursor.get(record.key)
        if seen is not None:
            ms = record.time_ns // 1_000_000
            if ms < seen[0]:
                continue
            if ms == seen[0] and skipped.get(record.key, 0) < seen[1]:
                skipped[record.key] = skipped.get(record.key, 0) + 1
                continue
        yield record


MAX_HITS = 64
"""Hits marked in one line at most (a grep such as `.` would otherwise mark every character)."""


def utf16(text: str, index: int) -> int:
    """A position in `text` as a page's script counts (UTF-16 code units; Python counts code points)."""
    return index if text.isascii() else len(text[:index].encode("utf-16-le")) // 2


def hits(grep: TimedGrep, text: str) -> list[list[int]]:
    """Where the grep matches in a line (as the page counts), so the page marks them: the same expression and
    engine that chose the line, never the page's own regular expressions (their syntax is not Python's)."""
    found: list[list[int]] = []
    try:
        for m in grep.pattern.finditer(text, timeout=grep.limit, concurrent=True):
            start, end = m.span()
            if end > start:
                found.append([utf16(text, start), utf16(text, end)])
                if len(found) >= MAX_HITS:
                    break
    except TimeoutError:
        pass  # the line was chosen; it is shown without its marks
    return found


def line_event(record: LogRecord, grep: TimedGrep | None) -> list[Any]:
    """A line as the page's log receives it: replica, stream, text (as on the terminal: no control character
    or text-reordering mark reaches the page as it is; the page sets text, never HTML), time in ms, and the
    grep's hits when there is a grep."""
    text = sanitize(record.text)
    line: list[Any] = [record.key, record.stream, text, record.time_ns // 1_000_000]
    if grep is not None:
        line.append(hits(grep, text))
    return line


class ViewerLeft(Exception):
    """The stream's viewer went away: ends its log's follower at the next line searched, also while the
    grep keeps every line out (the follower then yields nothing that would let the pipe stop it)."""


class TimedGrep:
    """The page's grep: a regular expression in Python's syntax (as `kubetrain logs --grep`), searched in each
    line with a time limit. Python's `re` holds the GIL while it searches and cannot be stopped: one
    expression that backtracks, such as `(X+)+Y` on a long line, would stop every other request, and Ctrl-C,
    for as long as it runs, which can be years. The `regex` module lets go of the GIL while it searches a
    str (`concurrent=True`) and gives up on a line after `limit` seconds (`SearchTooSlow`, said to the viewer)."""

    def __init__(self, text: str, limit: float = GREP_LINE_SECONDS, stop: threading.Event | None = None) -> None:
        # `re` judges the syntax, so that the page accepts what the CLI accepts and says it in the same words.
        # Its size is bounded before `regex` compiles it: `regex` copies a repeat's minimum count, and
        # `a{4294967294}` asked for gigabytes (`contract.grep_bounds`).
        try:
            check_size(text)
            re.compile(text)
            self.pattern: Any = regex.compile(text)
        except GrepRefused as exc:
            raise ValueError(f"grep: {exc}") from None
        except (re.error, regex.error) as exc:
            raise ValueError(f"grep: not a regular expression ({exc}): {text!r}") from None
        self.text = text
        self.limit = limit
        self.stop = stop

    def until(self, stop: threading.Event) -> TimedGrep:
        """The same grep for a follower that ends once `stop` is set (its viewer left)."""
        bound = copy.copy(self)
        bound.stop = stop
        return bound

    def search(self, text: str, /) -> object:
        if self.stop is not None and self.stop.is_set():
            raise ViewerLeft
        try:
            return self.pattern.search(text, timeout=self.limit, concurrent=True)
        except TimeoutError:
            raise SearchTooSlow("grep: this expression takes too long on the job's output", "make it simpler") from None

    def __repr__(self) -> str:
        return f"TimedGrep({self.text!r})"


def _status(exc: KubetrainError, otherwise: int = 503) -> int:
    """The HTTP status of a backend's refusal: 404 for a job that is not there (every backend raises a
    `LookupError` then), else `otherwise` (503: the backend could not answer; 409 for an action)."""
    return 404 if isinstance(exc, LookupError) else otherwise


def _sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


class WebView:
    """The app's state: the sources (one per backend), the security guard, the metric trackers."""

    def __init__(
        self,
        sources: Sequence[Source],
        guard: Guard,
        *,
        log_viewers: int = DEFAULT_LOG_VIEWERS,
        log_readers: int = DEFAULT_LOG_READERS,
    ) -> None:
        self.sources = {s.name: s for s in sources}
        self.guard = guard
        self.readers = LogReaders(log_viewers)
        self.turns = ReadTurns(log_readers)
        self.any_change = ChangeFeed()
        self.trackers: dict[tuple[str, str], MetricsTracker] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.closing = False
        self.pipes: set[Pipe] = set()

    def close_streams(self) -> None:
        """End every open event stream (before the server stops: it would otherwise wait for them)."""
        self.closing = True
        for source in self.sources.values():
            source.feed.bump()
        for tracker in list(self.trackers.values()):
            tracker.feed.bump()
        for pipe in list(self.pipes):
            pipe.wake()

    # -- lifecycle --------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        self.loop = asyncio.get_running_loop()
        self.any_change.attach(self.loop)
        await asyncio.to_thread(pages.warm)
        for source in self.sources.values():
            source.feed.attach(self.loop)
            source.feed.parent = self.any_change
            await asyncio.to_thread(source.start)
        try:
            yield
        finally:
            for source in self.sources.values():
                await asyncio.to_thread(source.close)

    def source(self, request: Request) -> Source:
        """The source the address names; an address naming a backend this view does not show is a 404."""
        name = request.path_params["backend"]
        source = self.sources.get(name)
        if source is None:
            raise HTTPException(404, f"no backend {name!r} in this view (it shows: {', '.join(self.sources)})")
        return source

    # -- the jobs table ----------------------------------------------------------------------------------

    async def all_rows(self) -> tuple[list[Any], list[str]]:
        rows: list[Any] = []
        errors: list[str] = []
        for source in self.sources.values():
            try:
                rows += await asyncio.to_thread(source.rows)
            except Exception as exc:  # one unreachable cluster must not hide the local jobs
                errors.append(f"{source.name}: {exc}")
        rows.sort(key=lambda r: r.created_at or 0.0, reverse=True)
        return rows, errors

    async def shell(self, request: Request) -> Response:
        return HTMLResponse(pages.SHELL)

    async def jobs_content(self, request: Request) -> Response:
        query = ListQuery.parse(request.query_params)
        rows, errors = await self.all_rows()
        page = select(rows, query, time.time())
        digest = rows_digest([r.to_json() for r in page.rows])
        events = "/events?" + urlencode({**page.query.params(), "have": digest})
        return HTMLResponse(pages.jobs_page(page, list(self.sources), errors, events))

    async def api_jobs(self, request: Request) -> Response:
        rows, errors = await self.all_rows()
        return JSONResponse({"jobs": [r.to_json() for r in rows], "errors": errors})

    async def jobs_events(self, request: Request) -> Response:
        """The jobs table's updates, for the table the query asks for (its order, filters and page): the rows
        that changed, rendered, and the summary under the table when it changed (`table_diff`)."""
        # The page says what it shows by the digest of the rows it was rendered with: if they are still the
        # rows, the first event changes nothing (see `table_diff`); else the page gets every row once.
        have = request.query_params.get("have", "")
        query = ListQuery.parse(request.query_params)

        async def stream() -> AsyncIterator[str]:
            seen = self.any_change.version
            state: TableState | None = None
            last_errors: list[str] | None = None
            last_summary: str | None = None
            while not self.closing:
                rows, errors = await self.all_rows()
                page = select(rows, query, time.time())
                current = [r.to_json() for r in page.rows]
                summary = pages.jobs_summary_html(page)
                if state is None:
                    state = TableState.of(current) if have and have == rows_digest(current) else TableState()
                    event = state.changes(current, errors)
                    always = True  # always one: the page is now live
                else:
                    event = state.changes(current, errors)
                    always = errors != last_errors or summary != last_summary
                if always or not is_empty(event):
                    event["html"] = {row_key(r): pages.job_row_html(r) for r in event["upsert"]}
                    event["count"] = page.matching
                    event["fragments"] = {"jobs-summary": summary} if summary != last_summary else {}
                    last_summary = summary
                    yield _sse("jobs", event)
                last_errors = errors
                now = await self.any_change.wait(seen, KEEPALIVE)
                if now == seen:
                    yield ": keepalive\n\n"
                    continue
                await asyncio.sleep(COALESCE)
                seen = self.any_change.version

        return StreamingResponse(stream(), media_type="text/event-stream", headers=SSE_HEADERS)

    # -- a job -------------------------------------------------------------------------------------------

    def tracker(self, source: Source, job_id: str) -> MetricsTracker:
        key = (source.name, job_id)
        tracker = self.trackers.get(key)
        if tracker is None:
            if len(self.trackers) > 64:  # the oldest finished ones go
                for k, t in list(self.trackers.items())[:16]:
                    if not t.running:
                        del self.trackers[k]
            tracker = self.trackers[key] = MetricsTracker()
            if self.loop is not None:
                tracker.feed.attach(self.loop)
        return tracker

    async def job_content(self, request: Request) -> Response:
        try:
            source = self.source(request)
        except HTTPException as exc:
            return HTMLResponse(pages.message_page("No such backend", str(exc.detail)), status_code=exc.status_code)
        job_id = request.path_params["job_id"]
        try:
            detail = await asyncio.to_thread(source.detail, job_id)
            spec = await asyncio.to_thread(source.spec, job_id)
        except KubetrainError as exc:
            title = "Job not found" if isinstance(exc, LookupError) else "The backend did not answer"
            return HTMLResponse(pages.message_page(title, str(exc)), status_code=_status(exc))
        tracker = self.tracker(source, detail.row.id)
        if not tracker.running:
            if detail.row.phase not in ENDED:
                tracker.follow(source, detail.row.id)
            elif not tracker.samples:
                # Read before the page is drawn, so an ended job's page comes with its plots (a follow
                # would start from nothing and draw them only at the stream's first event).
                await asyncio.to_thread(tracker.load, source, detail.row.id)
        page = pages.job_page(detail, spec, tracker.names(), tracker.feed.version, dict(request.query_params))
        return HTMLResponse(page)

    async def detail_json(self, request: Request) -> Response:
        source = self.source(request)
        try:
            detail = await asyncio.to_thread(source.detail, request.path_params["job_id"])
        except KubetrainError as exc:
            return JSONResponse({"error": str(exc)}, status_code=_status(exc))
        return JSONResponse(detail.to_json())

    async def job_events(self, request: Request) -> Response:
        """The job page's one stream: `status`, `metrics` and its log (`lines`, then `end` or `failed`), with
        the log's filters as the stream's parameters. One connection per page, because a browser opens at
        most 6 to one host across all of its tabs (HTTP/1.1; HTTP/2 only over TLS): with a stream per
        panel, the fourth tab on a running job would wait for a connection and never load."""
        source = self.source(request)
        job_id = request.path_params["job_id"]
        query = dict(request.query_params)
        filters: dict[str, Any] | None = None
        resume: dict[str, tuple[int, int]] | None = None
        filter_error: str | None = None
        with_log = query.get("log") != "off"  # a page whose log has ended asks for none on a new stream
        try:
            # On a thread: an expression within its bounds still takes up to a tenth of a second to compile.
            filters = await asyncio.to_thread(log_filters, query)
            resume = log_resume(query)
        except ValueError as exc:
            filters, filter_error = None, str(exc)
        if resume is not None and filters is not None:
            filters.pop("tail", None)  # after the page's last line: every line since, as the unbroken stream
        grep = filters.get("grep") if filters is not None else None
        loop = asyncio.get_running_loop()

        def read_log(stop: threading.Event, log_filter: dict[str, Any]) -> Iterator[list[Any]]:
            # On the follower's thread, as the grep: finding a line's hits may take as long as choosing it.
            records = source.logs(job_id, stop, **log_filter)
            if resume is not None:
                records = after_cursor(records, resume)
            return (line_event(r, grep) for r in records)

        def start_log() -> Pipe:
            pipe = Pipe(loop, turns=self.turns)
            assert filters is not None
            log_filter = dict(filters)
            if isinstance(grep, TimedGrep):
                log_filter["grep"] = grep.until(pipe.stopped)
            # The follower ends when the page goes (`stopped`), not at the job's next line.
            pipe.run(partial(read_log, pipe.stopped, log_filter), name=f"ui-logs-{job_id}")
            self.pipes.add(pipe)
            return pipe

        async def stream() -> AsyncIterator[str]:
            pipe: Pipe | None = None
            # The log's turn among the streams reading one (`LogReaders`): counted while `reader`.
            turn: asyncio.Future[None] | None = None
            reader = False
            if filters is not None and with_log:
                turn, reader = self.readers.try_enter(), True
                if turn is None:
                    pipe = start_log()
                else:
                    yield _sse("waiting", {"message": self.readers.waiting_message()})
            elif with_log:
                yield _sse("failed", {"message": filter_error})
            status_seen = -1
            last: Any = None
            tracker: MetricsTracker | None = None
            metrics_seen = -1
            try:
                while not self.closing:
                    if source.feed.version != status_seen:
                        status_seen = source.feed.version
                        try:
                            detail = await asyncio.to_thread(source.detail, job_id)
                        except KubetrainError as exc:
                            yield _sse("gone", {"message": str(exc), "deleted": isinstance(exc, LookupError)})
                            return
                        # The data (for scripts reading the stream) and the page's pieces, rendered.
                        data = detail.to_json()
                        data["html"] = pages.status_fragments(detail)
                        if data != last:
                            last = data
                            yield _sse("status", data)
                        if tracker is None:
                            tracker = self.tracker(source, detail.row.id)
                        if (
                            tracker is not None
                            and not tracker.running
                            and detail.row.phase not in ENDED
                        ):
                            tracker.follow(source, detail.row.id)
                    if tracker is not None and tracker.feed.version != metrics_seen:
                        metrics_seen = tracker.feed.version
                        yield _sse(
                            "metrics",
                            {"names": tracker.names(), "version": metrics_seen, "samples": len(tracker.samples)},
                        )
                    if reader and pipe is None and turn is not None and turn.done():
                        pipe = start_log()  # its turn came
                    if pipe is not None:
                        while batch := pipe.take(LOG_BATCH):
                            yield _sse("lines", batch)
                        if pipe.finished:
                            if pipe.error is not None:
                                yield _sse("failed", {"message": str(pipe.error)})
                            else:
                                yield _sse("end", {})
                            self.pipes.discard(pipe)
                            pipe = None
                            self.readers.leave(turn)
                            reader = False
                    waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(source.feed.wait(status_seen, KEEPALIVE))]
                    if tracker is not None:
                        waits.append(asyncio.ensure_future(tracker.feed.wait(metrics_seen, KEEPALIVE)))
                    if pipe is not None:
                        waits.append(asyncio.ensure_future(pipe.ready(KEEPALIVE)))
                    elif reader and turn is not None:
                        waits.append(asyncio.shield(turn))  # cancelling the wait leaves the turn
                    try:
                        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        for w in waits:
                            w.cancel()
                    fed = source.feed.version != status_seen or (
                        tracker is not None and tracker.feed.version != metrics_seen
                    )
                    if fed:
                        # The rest of a burst of changes, so that it costs the page one update; log lines
                        # need no wait: each event takes every line read by then.
                        await asyncio.sleep(COALESCE)
                    elif pipe is None or not pipe.pending:
                        yield ": keepalive\n\n"
            finally:
                if pipe is not None:
                    pipe.stop()
                    self.pipes.discard(pipe)
                if reader:
                    self.readers.leave(turn)

        return StreamingResponse(stream(), media_type="text/event-stream", headers=SSE_HEADERS)

    async def metric_samples(self, source: Source, job_id: str, name: str) -> list[Any]:
        """Metric `name`'s samples, from the job's tracker, which reads the job's metrics once (and follows a
        running job's while a page views it) and keeps them by name: a request takes its metric's samples
        and looks at no other metric's (a job may log thousands). A running job nobody views is read whole
        each time (no follower to keep its tracker current); an ended one once, into its tracker."""
        tracker = self.trackers.get((source.name, job_id))
        if tracker is None or not (tracker.running or tracker.samples):
            detail = await asyncio.to_thread(source.detail, job_id)
            if detail.row.phase not in ENDED:
                every = await asyncio.to_thread(lambda: list(source.metrics(job_id)))
                return [s for s in every if s.name == name]
            tracker = self.tracker(source, detail.row.id)
            if not tracker.running and not tracker.samples:
                await asyncio.to_thread(tracker.load, source, detail.row.id)
        return await asyncio.to_thread(tracker.of, name)  # made samples again: up to 20,000 per series

    async def metric_svg(self, request: Request) -> Response:
        # The metric's name is a parameter, not a path segment: a name may hold `/`, `?` or a newline
        # (`kubetrain.metrics.log(**{"eval/loss": ...})` is common) and a path segment cannot.
        source = self.source(request)
        job_id = request.path_params["job_id"]
        name = request.query_params.get("name")
        if not name:
            return JSONResponse({"error": "which metric? give ?name=<metric>"}, status_code=400)
        x = "time" if request.query_params.get("x") == "time" else "step"
        scale = "log" if request.query_params.get("scale") == "log" else "linear"
        try:
            samples = await self.metric_samples(source, job_id, name)
        except KubetrainError as exc:
            return JSONResponse({"error": str(exc)}, status_code=_status(exc))
        body = await asyncio.to_thread(svg.plot, samples, name, x, scale)
        return Response(body, media_type="image/svg+xml", headers={"Cache-Control": "no-store"})

    async def metric_data(self, request: Request) -> Response:
        """`GET .../metrics?name=METRIC&format=lines|csv|json`: one metric's samples, as the interactive plot
        draws them (`plot_data`), or every kept sample as `kubetrain metrics ID -o csv|json` gives them."""
        source = self.source(request)
        job_id = request.path_params["job_id"]
        name = request.query_params.get("name")
        fmt = request.query_params.get("format", "lines")
        if not name:
            return JSONResponse({"error": "which metric? give ?name=<metric>"}, status_code=400)
        if fmt not in ("lines", "csv", "json"):
            return JSONResponse({"error": f"format {fmt!r}: one of lines, csv, json"}, status_code=400)
        try:
            samples = await self.metric_samples(source, job_id, name)
        except KubetrainError as exc:
            return JSONResponse({"error": str(exc)}, status_code=_status(exc))
        samples.sort(key=lambda s: s.time)  # as `kubetrain metrics` gives them: in time order
        headers = {"Cache-Control": "no-store"}
        if fmt == "lines":
            lines = await asyncio.to_thread(plot_data.plot_series, samples)
            return JSONResponse({"name": name, "lines": lines}, headers=headers)
        # A header is Latin-1: the file's name keeps ASCII letters, digits and -_. of the job's and the metric's.
        safe = (c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in f"{job_id}-{name}")
        filename = "".join(safe)[:120]
        headers["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
        if fmt == "json":
            return JSONResponse([s.to_dict() for s in samples], headers=headers)
        out = io.StringIO()
        write_csv(samples, out)
        return Response(out.getvalue(), media_type="text/csv; charset=utf-8", headers=headers)

    async def action(self, request: Request) -> Response:
        source = self.source(request)
        job_id = request.path_params["job_id"]
        action = request.path_params["action"]
        if action not in ACTIONS:
            return JSONResponse({"error": f"unknown action {action!r}"}, status_code=404)
        try:
            phase = await asyncio.to_thread(source.act, job_id, action)
        except KubetrainError as exc:
            # No such job: 404; a job that cannot do that now (cancel a finished one): 409.
            return JSONResponse({"error": str(exc)}, status_code=_status(exc, otherwise=409))
        return JSONResponse({"job": job_id, "action": action, "phase": phase})

    def app(self) -> ASGIApp:
        job = "/jobs/{backend}/{job_id}"
        routes = [
            Route("/", self.shell),
            Route("/content", self.jobs_content),
            Route("/events", self.jobs_events),
            Route("/api/jobs", self.api_jobs),
            Route(job, self.shell),
            Route(job + "/content", self.job_content),
            Route(job + "/detail.json", self.detail_json),
            Route(job + "/events", self.job_events),
            Route(job + "/plot.svg", self.metric_svg),
            Route(job + "/metrics", self.metric_data),
            Route(job + "/{action}", self.action, methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
        ]
        app = Starlette(routes=routes, lifespan=self.lifespan)
        # No redirect from `/path/` to `/path`: a redirect's address is built from the request's own, which
        # a stranger writes (`//host/x/`, `/\\host/`, a CR/LF decoded from `%0d%0a`); every address here is
        # one the pages make, without a trailing slash: anything else is a plain 404.
        app.router.redirect_slashes = False
        return GuardMiddleware(app, self.guard)


def create_app(sources: Sequence[Source], guard: Guard) -> ASGIApp:
    """The web view over `sources` (opened backends), guarded by `guard`."""
    return WebView(sources, guard).app()


__all__ = ["GuardMiddleware", "Pipe", "WebView", "create_app"]
