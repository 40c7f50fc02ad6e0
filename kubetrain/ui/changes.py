"""How the web view learns that something changed, without a page polling the server.

Each backend has its own signal, read by one thread per server (not per viewer), which bumps a
:class:`ChangeFeed`; every open page waits on that feed and recomputes what it shows when it moves.

- Local jobs: every change of a job, replica or condition is a committed transaction in the job store
  (SQLite, WAL). `PRAGMA data_version` on a connection of our own changes exactly when *another*
  connection has committed since we last asked: reading it is a few microseconds and touches no table, so a
  thread asks every `LOCAL_INTERVAL` seconds. (The standard library has no file change notification; the
  WAL file's mtime would also move on checkpoints, and data_version says "committed" precisely.)
- Kubernetes jobs: the backend's own informers (`backends.kubernetes.watch.Informer`: list, then watch from
  its resourceVersion, resuming after timeouts and relisting after 410 Gone) on every workload kind the
  cluster serves and on pods, selected by kubetrain's managed-by label in the namespace. Any event bumps
  the feed.

Bursts are coalesced where the feed is read (`ChangeFeed.wait` returns the latest version), so a job
starting 64 replicas costs a page a few recomputations, not 64.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..backends.kubernetes.backend import KubernetesBackend

LOCAL_INTERVAL = 0.1
"""Seconds between two looks at the local store's data_version (one thread per server)."""


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


class Watcher:
    """A thread that bumps a feed when its backend's signal says something changed."""

    def __init__(self, feed: ChangeFeed) -> None:
        self.feed = feed
        self.error: BaseException | None = None

    def start(self) -> Watcher:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


class LocalStoreWatcher(Watcher):
    """The local job store's `PRAGMA data_version`, read every `interval` seconds on a connection of its own."""

    def __init__(self, feed: ChangeFeed, db_path: Path, *, interval: float = LOCAL_INTERVAL) -> None:
        super().__init__(feed)
        self.db_path = db_path
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> LocalStoreWatcher:
        self._thread = threading.Thread(target=self._run, name="ui-local-store", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)

    def _run(self) -> None:
        # Read-only: the web view never writes the store through this connection (actions go through the
        # backend), and a read-only connection cannot take a write lock by accident.
        conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, check_same_thread=False)
        try:
            seen = conn.execute("PRAGMA data_version").fetchone()[0]
            while not self._stop.wait(self.interval):
                now = conn.execute("PRAGMA data_version").fetchone()[0]
                if now != seen:
                    seen = now
                    self.feed.bump()
        except sqlite3.Error as exc:  # the store was moved aside or deleted: say so on the page
            self.error = exc
            self.feed.bump()
        finally:
            conn.close()


class KubernetesWatcher(Watcher):
    """The backend's informers on kubetrain's workloads and pods of one namespace."""

    def __init__(self, feed: ChangeFeed, backend: KubernetesBackend) -> None:
        super().__init__(feed)
        self.backend = backend
        self._informers: list[Any] = []

    def start(self) -> KubernetesWatcher:
        from ..backends.kubernetes.client.resources import PODS
        from ..backends.kubernetes.lookup import workload_kinds
        from ..backends.kubernetes.watch import Informer
        from ..contract.labels import MANAGED_BY, MANAGER

        b = self.backend
        selector = f"{MANAGED_BY}={MANAGER}"
        for res in [*workload_kinds(b.kube, b.capabilities()), PODS]:
            informer = Informer(b.kube, res, b.namespace, selector, self.feed.bump, timeout_seconds=b.watch_timeout)
            self._informers.append(informer.start())
        return self

    def stop(self) -> None:
        for informer in self._informers:
            informer.stop()

    def snapshot(self) -> list[dict[str, Any]]:
        """Every workload object the informers hold (what the jobs table reads the framework from)."""
        return [obj for informer in self._informers[:-1] for obj in informer.snapshot()]

    @property
    def failure(self) -> BaseException | None:
        return next((i.error for i in self._informers if i.error is not None), None)


__all__ = ["LOCAL_INTERVAL", "ChangeFeed", "KubernetesWatcher", "LocalStoreWatcher", "Watcher"]
