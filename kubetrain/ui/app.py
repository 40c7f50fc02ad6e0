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
import contextlib
import io
import json
import threading
import time
from collections.abc import (
    AsyncIterator,
    Iterator,
    Sequence,
)
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..contract.errors import KubetrainError
from ..metrics.csv_rows import write_csv
from . import pages, plot_data, svg
from .changes import ChangeFeed
from .connections import (
    DEFAULT_LOG_READERS,
    DEFAULT_LOG_VIEWERS,
)
from .job_list import ListQuery, select
from .log_query import TimedGrep, after_cursor, line_event, log_filters, log_resume
from .log_streams import LOG_BATCH, LogReaders, Pipe, ReadTurns
from .metrics_tracker import MetricLimits, MetricsTracker
from .middleware import ASGIApp, GuardMiddleware
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
        metric_limits: MetricLimits | None = None,
    ) -> None:
        self.sources = {s.name: s for s in sources}
        self.metric_limits = metric_limits or MetricLimits()
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
            tracker = self.trackers[key] = MetricsTracker(limits=self.metric_limits)
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
                            {"names": tracker.names(), "version": metrics_seen, "samples": len(tracker.samples),
                             "omitted": tracker.omitted()},
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
