"""The live status line of an attached `kubetrain run` on a terminal: how far the job is, in one line.

    ⠿ Running · 2/2 replicas running · restarts 1 · 0:42 · step 120 loss 0.3127 samples_per_s 812

`Progress` is a small state machine fed by what a run already produces: the replicas' keys (from the
output sink), the run's events (`Backend.run(on_status=...)`: `created` names the job, `status` events say
which replicas run, restarts, on Kubernetes why pods are still pending: scheduling, pulling the image,
starting) and metric samples. It reads no message text: a reworded message changes nothing here.
`line()` is pure formatting of that state; `kubetrain.terminal.OutputSink` draws it under the merged
output (its `status_line` hook). `MetricLines` is the run's sink without the metric lines replicas print
(on Kubernetes), which it hands to a `Progress`. Standard library only, and nothing here writes to a
terminal.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

from .contract.logs import LogRecord, LogSink
from .metrics.sample import parse_log_line
from .metrics.wire import MARKER

if TYPE_CHECKING:
    from .backends.base import RunEvent
    from .metrics.sample import MetricSample
    from .status import JobStatus

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
MAX_METRICS = 3
"""Metrics shown on the line, the first logged first (the rest: `kubetrain metrics ID`)."""

_PENDING_WORDS = {
    "ContainerCreating": "starting",
    "PodInitializing": "starting",
    "ErrImagePull": "pulling image (failing)",
    "ImagePullBackOff": "pulling image (back-off)",
    "Unschedulable": "unschedulable",
    "NotStarted": "starting",
    "NoPod": "waiting for pods",
}
_SCHEDULING = "scheduling"
"""A Pending replica with no reason and no node yet: a pod the scheduler has not placed."""


def format_elapsed(seconds: float) -> str:
    """`0:07`, `12:34`, `1:02:03`."""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """What the status line says, updated from any thread (the sink's, the backend's that runs the job, the
    metrics follower's)."""

    def __init__(self, started: float | None = None) -> None:
        self.started = time.monotonic() if started is None else started
        self.job_id: str | None = None
        self.phase = "Pending"
        self.total = 0
        self.running: int | None = None
        self.restarts = 0
        self.waiting: Counter[str] = Counter()
        """Why replicas are not running yet, e.g. {"pulling image": 2} (from the status' replica reasons)."""
        self.step: int | None = None
        self.latest: dict[str, float] = {}
        self._best_source: dict[str, tuple[bool, int, str, int]] = {}
        self._lock = threading.Lock()
        self._ticks = 0
        self.job_known = threading.Event()

    # -- what it is fed -------------------------------------------------------------------------------

    def keys(self, keys: Iterable[str]) -> None:
        """The replicas' output keys (before any status says how many replicas there are)."""
        with self._lock:
            self.total = max(self.total, len(list(keys)))

    def event(self, event: RunEvent) -> None:
        """One of the run's events (`Backend.run(on_status=...)`): the job's id, its status; messages and
        warnings are the terminal's to show, not the line's."""
        if event.job_id is not None and self.job_id is None:
            with self._lock:
                self.job_id = event.job_id
            self.job_known.set()
        if event.status is not None:
            self.status(event.status)

    def status(self, status: JobStatus) -> None:
        """The job's status now."""
        with self._lock:
            self.phase = status.reason if status.reason == "BackOff" else status.phase.value
            self.total = len(status.replicas) or self.total
            self.running = sum(1 for r in status.replicas if r.phase.value == "Running")
            self.restarts = status.total_restarts()
            self.waiting = Counter(
                _PENDING_WORDS.get(r.reason, _words(r.reason))
                if r.reason
                else (_SCHEDULING if r.host is None and status.placed_by_scheduler else "pending")
                for r in status.replicas
                if r.phase.value == "Pending"
            )

    def sample(self, sample: MetricSample) -> None:
        """A metric sample: the line shows each metric's latest value from its first source (lowest rank), and
        the step of the latest of the values it shows. That step may go down: a restarted replica starts its
        steps over (or from its checkpoint), and the line pairs the values shown with their own step."""
        order = (sample.rank is None, sample.rank or 0, sample.role or "", sample.index or 0)
        with self._lock:
            best = self._best_source.get(sample.name)
            if best is not None and order > best:
                return
            self._best_source[sample.name] = order
            self.latest[sample.name] = sample.value
            shown = list(self.latest).index(sample.name) < MAX_METRICS  # a metric not shown: not its step
            if shown and sample.step is not None:
                self.step = sample.step

    # -- the line -------------------------------------------------------------------------------------

    def line(self, width: int = 100, now: float | None = None) -> str:
        """The status line, at most `width` characters (a longer one would wrap, and a wrapped line cannot be
        redrawn in place)."""
        from .metrics.summary import display_name, format_value

        with self._lock:
            elapsed = (time.monotonic() if now is None else now) - self.started
            self._ticks += 1
            parts = [f"{SPINNER[self._ticks % len(SPINNER)]} {self.phase}"]
            if self.total:
                running = "?" if self.running is None else str(self.running)
                parts.append(f"{running}/{self.total} running")
            if self.waiting:
                parts.append(", ".join(f"{n} {why}" for why, n in sorted(self.waiting.items())))
            if self.restarts:
                parts.append(f"restarts {self.restarts}")
            parts.append(format_elapsed(elapsed))
            if self.latest:
                shown = list(self.latest.items())[:MAX_METRICS]
                values = " ".join(f"{display_name(name, 24)} {format_value(value)}" for name, value in shown)
                parts.append((f"step {self.step} " if self.step is not None else "") + values)
        text = " · ".join(parts)
        return text if len(text) <= width else text[: max(0, width - 1)] + "…"


class MetricLines:
    """The run's sink, minus the lines `kubetrain.metrics.log` writes into replicas' output (on Kubernetes, or
    wherever a replica has no metrics file): they go to `progress` when there is one (the status line),
    never to the screen, as `kubetrain logs` hides them (`kubetrain metrics ID` shows them). `kubetrain run`
    and `kubetrain.run` both wrap their sink in it."""

    def __init__(self, inner: LogSink, progress: Progress | None = None) -> None:
        self.inner = inner
        self.progress = progress

    def add_keys(self, keys: Collection[str]) -> None:
        if self.progress is not None:
            self.progress.keys(keys)
        self.inner.add_keys(keys)

    def line(self, key: str, stream: str, text: str) -> None:
        if text.startswith(MARKER):
            if self.progress is not None:
                for sample in parse_log_line(text, key) or ():
                    self.progress.sample(sample)
            return
        self.inner.line(key, stream, text)

    def record(self, rec: LogRecord) -> None:
        self.line(rec.key, rec.stream, rec.text)

    def flush(self) -> None:
        self.inner.flush()


def _words(reason: str) -> str:
    """`ContainerCreating` → `container creating`: a reason as words."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", reason).lower()


__all__ = ["MAX_METRICS", "MetricLines", "Progress", "format_elapsed"]
