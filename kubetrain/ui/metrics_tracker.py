"""The samples of one job's metrics, followed once for every viewer of the job (the web view's plots and
its `metrics` events read them here)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from .changes import ChangeFeed
from .sources import Source


@dataclass
class MetricsTracker:
    """The samples of one job's metrics, followed once for every viewer of the job."""

    samples: list[Any] = field(default_factory=list)
    feed: ChangeFeed = field(default_factory=ChangeFeed)
    running: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def names(self) -> list[str]:
        with self.lock:
            return sorted({str(s.name) for s in self.samples})

    def snapshot(self) -> list[Any]:
        with self.lock:
            return list(self.samples)

    def follow(self, source: Source, job_id: str) -> None:
        """Read the job's metrics from the start and follow them on a thread, unless already doing so."""
        with self.lock:
            if self.running:
                return
            self.running = True
            self.samples = []

        def pump() -> None:
            try:
                for sample in source.metrics(job_id, follow=True):
                    with self.lock:
                        self.samples.append(sample)
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
        samples = list(source.metrics(job_id))
        with self.lock:
            if not self.running:
                self.samples = samples
        self.feed.bump()


__all__ = ["MetricsTracker"]
