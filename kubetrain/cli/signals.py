"""SIGINT and SIGTERM for the whole of a command, from its first line.

Without this, a signal during start-up met whichever handler was in force at that instant: Python's own
(a KeyboardInterrupt, sometimes a traceback), none at all for SIGTERM (the process died on the spot, a job
just recorded left Pending with nobody to start it), asyncio's or uvicorn's (the web view ended with
status 0). `main` installs one handler for both before anything else: each raises `Interrupted(signum)`, a
KeyboardInterrupt, in the main thread, so every path that already ends cleanly on Ctrl-C (a local job not
started yet is recorded Cancelled, a followed Kubernetes job is cancelled, `metrics --watch` prints its
latest table) ends the same way on SIGTERM, and the exit status is 128 + the signal: 130 or 143.

Code that needs the signals itself (the local supervisor, uvicorn) installs its own for as long as it runs
and puts these back after.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from ..contract.errors import Interrupted
from ..contract.pause import SIGNALS

_received: list[int] = []


def _interrupt(signum: int, frame: object) -> None:
    _received.append(signum)
    raise Interrupted(signum)


def received() -> int | None:
    """The last signal this command was interrupted by, if any: for an exit status when the interruption
    was caught on the way (a followed Kubernetes job is cancelled and the run returns its status)."""
    return _received[-1] if _received else None


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` inside; the previous handlers are back after (a caller that
    runs `main` in its own process, a test, keeps its own). Outside the main thread, where no handler can be
    set, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()
    previous = {sig: signal.signal(sig, _interrupt) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


__all__ = ["interruptible", "received"]
