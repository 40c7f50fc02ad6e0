"""Named points of start-up where a test can stop a command and signal it (`env_names.PAUSE_AT`).

A signal that arrives while `kubetrain run` starts can land anywhere: before the CLI's handlers, between the
job's record and its supervisor, while the replicas are being launched. Tests cannot hit those moments by
sleeping; with `KUBETRAIN_TEST_PAUSE_AT=local:created` the command stops at that point, prints
`kubetrain: paused at local:created`, and waits for a SIGINT or SIGTERM. The signal is then raised again
under the handlers in force at that point, so it takes exactly the effect it would have had arriving there.
Unset (always, outside tests) a pause point is one dictionary lookup.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from .env_names import PAUSE_AT

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def pause_point(name: str) -> None:
    """Stop here if `KUBETRAIN_TEST_PAUSE_AT` names `name`, until a SIGINT or SIGTERM; then let that signal
    act as if it had arrived here. Only in the main thread (the only one Python runs handlers in)."""
    wanted = os.environ.get(PAUSE_AT)
    if not wanted or name not in wanted.split(",") or threading.current_thread() is not threading.main_thread():
        return
    received: list[int] = []

    def record(signum: int, frame: object) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, record) for sig in SIGNALS}
    try:
        print(f"kubetrain: paused at {name} (pid {os.getpid()})", file=sys.stderr, flush=True)
        while not received:  # the handler runs in this thread, between two of these sleeps
            time.sleep(0.01)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    signal.raise_signal(received[0])


__all__ = ["SIGNALS", "pause_point"]
