"""The samples of one job's metrics, followed once for every viewer of the job (the web view's plots and
its `metrics` events read them here)."""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .changes import ChangeFeed
from .sources import Source
from .svg import series_label

if TYPE_CHECKING:
    from ..metrics import MetricSample

KEEP = 20_000
"""The most samples kept per (metric, series), an even number: see `Thinned`."""


@dataclass
class Thinned:
    """One (metric, series)'s samples, at most `KEEP` of them plus the latest, evenly spaced over the whole run.

    Why: the web view follows a running job for as long as the server runs, page open or not, and a job
    logging every few milliseconds would otherwise grow the server without end (megabytes a minute). The plot
    draws at most `svg.MAX_POINTS` per line anyway, so more than `KEEP` evenly spaced samples show nothing
    more. Each kept sample stands for a window of `stride` samples; when `KEEP` are kept, neighbouring windows
    are merged (half the samples go, `stride` doubles), so the kept ones stay evenly spaced from the first
    sample on. The first and the latest samples are always kept (the legend shows the latest), and a window
    keeps a NaN or infinite sample over a finite one: a diverged moment is what a plot must not lose."""

    kept: list[Any] = field(default_factory=list)
    stride: int = 1
    seen: int = 0
    latest: Any = None

    def add(self, sample: Any) -> None:
        if self.seen % self.stride == 0:  # the first sample of a new window stands for it
            self.kept.append(sample)
        elif len(self.kept) > 1 and _finite(self.kept[-1]) and not _finite(sample):
            self.kept[-1] = sample
        self.seen += 1
        self.latest = sample
        if len(self.kept) >= KEEP:
            # Windows 2w and 2w+1 become window w; window 0's sample stays the first one.
            pairs = zip(self.kept[2::2], self.kept[3::2], strict=True)
            self.kept = [self.kept[0], *(b if _finite(a) and not _finite(b) else a for a, b in pairs)]
            self.stride *= 2

    def __len__(self) -> int:
        return len(self.kept) + (self.latest is not None and self.latest is not self.kept[-1])

    def __iter__(self) -> Iterator[Any]:
        yield from self.kept
        if self.latest is not None and self.latest is not self.kept[-1]:
            yield self.latest


def _finite(sample: MetricSample) -> bool:
    return math.isfinite(sample.value)


class Samples:
    """The samples a tracker keeps, indexed by metric name, then series: sized and iterable like the list it
    replaces, its length counted without copying (each `metrics` event says it).

    Why the index: a job may log thousands of metrics, and a plot shows one. A plot's request takes its
    metric's samples (`of`) without looking at any other metric's; the names are kept sorted as they come, so
    a `metrics` event costs no sort either."""

    def __init__(self, samples: Iterable[Any] = ()) -> None:
        self.by_name: dict[str, dict[str, Thinned]] = {}
        self.sorted_names: list[str] = []
        self.count = 0
        for s in samples:
            self.add(s)

    def add(self, sample: Any) -> None:
        name = str(sample.name)
        lines = self.by_name.get(name)
        if lines is None:
            lines = self.by_name[name] = {}
            bisect.insort(self.sorted_names, name)
        label = series_label(sample)
        one = lines.get(label)
        if one is None:
            one = lines[label] = Thinned()
        before = len(one)
        one.add(sample)
        self.count += len(one) - before

    def names(self) -> list[str]:
        return list(self.sorted_names)

    def of(self, name: str) -> list[Any]:
        """The kept samples of metric `name` (every series), [] for a name never logged."""
        return [s for one in self.by_name.get(name, {}).values() for s in one]

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Any]:
        for lines in self.by_name.values():
            for one in lines.values():
                yield from one


@dataclass
class MetricsTracker:
    """The samples of one job's metrics, followed once for every viewer of the job, at most `KEEP` per
    (metric, series) (`Thinned` says why and how)."""

    samples: Samples = field(default_factory=Samples)
    feed: ChangeFeed = field(default_factory=ChangeFeed)
    running: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def names(self) -> list[str]:
        with self.lock:
            return self.samples.names()

    def snapshot(self) -> list[Any]:
        with self.lock:
            return list(self.samples)

    def of(self, name: str) -> list[Any]:
        """Metric `name`'s samples (a copy of that metric's only: a plot of one metric among thousands costs
        what that metric holds)."""
        with self.lock:
            return self.samples.of(name)

    def follow(self, source: Source, job_id: str) -> None:
        """Read the job's metrics from the start and follow them on a thread, unless already doing so."""
        with self.lock:
            if self.running:
                return
            self.running = True
            self.samples = Samples()

        def pump() -> None:
            try:
                for sample in source.metrics(job_id, follow=True):
                    with self.lock:
                        self.samples.add(sample)
                    self.feed.bump()
            except Exception:
                pass
            finally:
                with self.lock:
                    self.running = False
                self.feed.bump()

        threading.Thread(target=pump, name=f"ui-metrics-{job_id}", daemon=True).start()

    def load(self, source: Source, job_id: str) -> None:
        """Read an ended job's metrics once (nothing more will come: no thread follows them)."""
        samples = Samples(source.metrics(job_id))
        with self.lock:
            if not self.running:
                self.samples = samples
        self.feed.bump()


__all__ = ["KEEP", "MetricsTracker", "Samples", "Thinned"]
