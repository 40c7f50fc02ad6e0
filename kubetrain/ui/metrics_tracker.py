"""The samples of one job's metrics, followed once for every viewer of the job (the web view's plots and
its `metrics` events read them here)."""

from __future__ import annotations

import bisect
import math
import threading
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .changes import ChangeFeed
from .connections import DEFAULT_METRIC_NAMES, DEFAULT_METRIC_SAMPLES
from .sources import Source
from .svg import series_label

if TYPE_CHECKING:
    from ..metrics import MetricSample

KEEP = 20_000
"""The most samples kept per (metric, series), an even number: see `Thinned`."""


@dataclass(frozen=True)
class MetricLimits:
    """What one job's metrics may hold in the web view's memory (each with a knob on `kubetrain ui`)."""

    names: int = DEFAULT_METRIC_NAMES
    samples: int = DEFAULT_METRIC_SAMPLES


NO_STEP = -(2**63)
"""A kept sample's step when it had none (`array` holds no None); a step of exactly -2**63 reads as none."""


class Thinned:
    """One (metric, series)'s samples, at most `KEEP` of them plus the latest, evenly spaced over the whole run.

    Why: the web view follows a running job for as long as the server runs, page open or not, and a job
    logging every few milliseconds would otherwise grow the server without end (megabytes a minute). The plot
    draws at most `svg.MAX_POINTS` per line anyway, so more than `KEEP` evenly spaced samples show nothing
    more. Each kept sample stands for a window of `stride` samples; when `KEEP` are kept, neighbouring windows
    are merged (half the samples go, `stride` doubles), so the kept ones stay evenly spaced from the first
    sample on. The first and the latest samples are always kept (the legend shows the latest), and a window
    keeps a NaN or infinite sample over a finite one: a diverged moment is what a plot must not lose.

    The kept samples are held as columns of machine numbers (time, value, step, and who logged it as an index
    into the few (role, index, rank) the series has met), 26 bytes a sample instead of a `MetricSample`'s
    ~200: 2,000,000 samples are 52 MB, not 400. They are made samples again when read (`__iter__`), which a
    plot does for its one metric only."""

    __slots__ = (
        "latest",
        "latest_kept",
        "name",
        "origins",
        "seen",
        "steps",
        "stride",
        "times",
        "values",
        "who",
        "whom",
    )

    def __init__(self) -> None:
        self.name = ""
        self.times = array("d")
        self.values = array("d")
        self.steps = array("q")
        self.origins = array("I")
        self.who: list[tuple[str | None, int | None, int | None]] = []
        self.whom: dict[tuple[str | None, int | None, int | None], int] = {}
        self.stride = 1
        self.seen = 0
        self.latest: MetricSample | None = None
        self.latest_kept = False
        """Whether the latest sample is the last one kept (else it is yielded after them)."""

    def _origin(self, sample: MetricSample) -> int:
        key = (sample.role, sample.index, sample.rank)
        found = self.whom.get(key)
        if found is None:
            found = self.whom[key] = len(self.who)
            self.who.append(key)
        return found

    def _put(self, sample: MetricSample, at: int) -> None:
        step = NO_STEP if sample.step is None else sample.step
        self.times[at], self.values[at], self.steps[at] = sample.time, sample.value, step
        self.origins[at] = self._origin(sample)

    def add(self, sample: MetricSample) -> int:
        """Keeps `sample` as thinning says; returns how many more samples this holds now (-K..1)."""
        before = len(self.values) + (self.latest is not None and not self.latest_kept)
        self.name = sample.name
        self.latest_kept = True
        if self.seen % self.stride == 0:  # the first sample of a new window stands for it
            self.times.append(sample.time)
            self.values.append(sample.value)
            self.steps.append(NO_STEP if sample.step is None else sample.step)
            self.origins.append(self._origin(sample))
        elif len(self.values) > 1 and math.isfinite(self.values[-1]) and not math.isfinite(sample.value):
            self._put(sample, len(self.values) - 1)
        else:
            self.latest_kept = False
        self.seen += 1
        self.latest = sample
        if len(self.values) >= KEEP:
            self.halve()
        return len(self.values) + (not self.latest_kept) - before

    def halve(self) -> int:
        """Merge windows 2w and 2w+1 into window w (window 0's sample stays the first one): half the kept
        samples go, evenly, and `stride` doubles. How many went."""
        v = self.values
        if len(v) < 4:
            return 0
        pairs = zip(range(2, len(v), 2), range(3, len(v), 2), strict=False)
        keep = [0, *(b if math.isfinite(v[a]) and not math.isfinite(v[b]) else a for a, b in pairs)]
        gone = len(v) - len(keep)
        for column in ("times", "values", "steps", "origins"):
            old = getattr(self, column)
            setattr(self, column, array(old.typecode, (old[i] for i in keep)))
        self.latest_kept = self.latest_kept and keep[-1] == len(v) - 1
        self.stride *= 2
        return gone

    def __len__(self) -> int:
        return len(self.values) + (self.latest is not None and not self.latest_kept)

    def __iter__(self) -> Iterator[MetricSample]:
        from ..metrics.sample import MetricSample

        who = self.who
        for t, v, step, o in zip(self.times, self.values, self.steps, self.origins, strict=True):
            role, index, rank = who[o]
            yield MetricSample(self.name, v, None if step == NO_STEP else step, t, role, index, rank)
        if self.latest is not None and not self.latest_kept:
            yield self.latest


class Samples:
    """The samples a tracker keeps, indexed by metric name, then series: sized and iterable like the list it
    replaces, its length counted without copying (each `metrics` event says it).

    Why the index: a job may log thousands of metrics, and a plot shows one. A plot's request takes its
    metric's samples (`of`) without looking at any other metric's; the names are kept sorted as they come, so
    a `metrics` event costs no sort either."""

    def __init__(self, samples: Iterable[Any] = (), limits: MetricLimits | None = None) -> None:
        self.by_name: dict[str, dict[str, Thinned]] = {}
        self.sorted_names: list[str] = []
        self.count = 0
        self.limits = limits or MetricLimits()
        self.omitted: set[str] = set()
        """Names past `limits.names`, counted (up to as many again: a name's text is not kept past that)."""
        self.omitted_samples = 0
        for s in samples:
            self.add(s)

    def add(self, sample: Any) -> None:
        name = str(sample.name)
        lines = self.by_name.get(name)
        if lines is None:
            if len(self.by_name) >= self.limits.names:
                self.omitted_samples += 1
                if len(self.omitted) < self.limits.names:
                    self.omitted.add(name)
                return
            lines = self.by_name[name] = {}
            bisect.insort(self.sorted_names, name)
        label = series_label(sample)
        one = lines.get(label)
        if one is None:
            one = lines[label] = Thinned()
        self.count += one.add(sample)
        if self.count > self.limits.samples:
            self._thin()

    def _thin(self) -> None:
        """Over the samples' bound: halve the longest series, then the next, until under it (or nothing is long
        enough to thin). Rare: halving the longest frees about half of it, room for as many new samples."""
        series = sorted((one for lines in self.by_name.values() for one in lines.values()), key=len, reverse=True)
        for one in series:
            if self.count <= self.limits.samples:
                return
            gone = one.halve()
            if not gone:
                return
            self.count -= gone

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

    limits: MetricLimits = field(default_factory=MetricLimits)
    samples: Samples = field(default_factory=Samples)
    feed: ChangeFeed = field(default_factory=ChangeFeed)
    running: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def names(self) -> list[str]:
        with self.lock:
            return self.samples.names()

    def omitted(self) -> int:
        """How many metric names were past the tracker's limit (their samples counted, not kept)."""
        with self.lock:
            return len(self.samples.omitted)

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
            self.samples = Samples(limits=self.limits)

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
        samples = Samples(source.metrics(job_id), self.limits)
        with self.lock:
            if not self.running:
                self.samples = samples
        self.feed.bump()


__all__ = ["KEEP", "MetricLimits", "MetricsTracker", "Samples", "Thinned"]
