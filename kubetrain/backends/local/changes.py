"""The local backend's change feed (`LocalBackend.changes`): a commit to the job store, seen without reading it.

Every change of a job, replica or condition is a committed transaction in the job store (SQLite, WAL).
`PRAGMA data_version` on a connection of our own changes exactly when *another* connection has committed
since we last asked: reading it is a few microseconds and touches no table, so a thread asks every
`INTERVAL` seconds. (The standard library has no file change notification; the WAL file's mtime would also
move on checkpoints, and data_version says "committed" precisely.)
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

INTERVAL = 0.1
"""Seconds between two looks at the store's data_version (one thread per feed)."""


class StoreChanges:
    """The job store's `PRAGMA data_version`, read every `interval` seconds on a connection of its own."""

    def __init__(self, db_path: Path, on_change: Callable[[], None], *, interval: float = INTERVAL) -> None:
        self.db_path = db_path
        self.on_change = on_change
        self.interval = interval
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> StoreChanges:
        self._thread = threading.Thread(target=self._run, name="kubetrain-store-changes", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)

    def _run(self) -> None:
        # Read-only: the feed never writes the store (actions go through the backend), and a read-only
        # connection cannot take a write lock by accident.
        conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, check_same_thread=False)
        try:
            seen = conn.execute("PRAGMA data_version").fetchone()[0]
            while not self._stop.wait(self.interval):
                now = conn.execute("PRAGMA data_version").fetchone()[0]
                if now != seen:
                    seen = now
                    self.on_change()
        except sqlite3.Error as exc:  # the store was moved aside or deleted: whoever shows the feed says so
            self.error = exc
            self.on_change()
        finally:
            conn.close()


__all__ = ["INTERVAL", "StoreChanges"]
