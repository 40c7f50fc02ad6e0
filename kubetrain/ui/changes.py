"""How the web view learns that something changed, without a page polling the server.

Each backend has its own signal, read by one thread per server (not per viewer): its change feed
(`Backend.changes`, started by `sources.Source`), which bumps a :class:`ChangeFeed`; every open page waits
on that feed and recomputes what it shows when it moves. Locally the signal is a commit to the job store
(`backends/local/changes.py`), on Kubernetes an event of the backend's informers on kubetrain's workloads
and pods (`backends/kubernetes/changes.py`).

Bursts are coalesced where the feed is read (`ChangeFeed.wait` returns the latest version), so a job
starting 64 replicas costs a page a few recomputations, not 64.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time


class ChangeFeed:
    """A version number that moves when something changed, awaited from the event loop, bumped from threads."""

    def __init__(self) -> None:
        self.version = 0
        self.changed_at = 0.0  # monotonic time of the latest bump (the latency benchmark reads it)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None
        self._waking = False
        self.parent: ChangeFeed | None = None
        """Bumped with this feed (the jobs table waits on one feed for every backend)."""

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wake waiters on `loop` (the server's event loop) when the feed moves."""
        self._loop = loop
        self._event = asyncio.Event()

    def bump(self) -> None:
        """Something changed (callable from any thread)."""
        with self._lock:
            self.version += 1
            self.changed_at = time.monotonic()
            # One wake-up in flight at a time: a burst of bumps (a history being read) costs the loop one.
            wake = not self._waking
            self._waking = True
        loop = self._loop
        if wake and loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._wake)
            except RuntimeError:  # the loop is closing: nobody is waiting any more
                self._waking = False
        if self.parent is not None:
            self.parent.bump()

    def _wake(self) -> None:
        with self._lock:
            self._waking = False
        if self._event is not None:
            self._event.set()
            self._event = asyncio.Event()

    async def wait(self, seen: int, timeout: float | None = None) -> int:
        """The version once it differs from `seen` (or after `timeout` seconds, unchanged)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.version == seen:
            event = self._event
            if event is None:
                raise RuntimeError("ChangeFeed.wait before attach()")
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), left)
        return self.version


__all__ = ["ChangeFeed"]
