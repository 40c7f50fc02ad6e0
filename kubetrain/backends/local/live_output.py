"""Replicas' live output, handed to a sink (the terminal) by a thread of its own, never by the control loop.

The supervisor's loop reads the replicas' pipes, writes the log files and watches exits, cancels and
deadlines. If it also wrote to the terminal, a terminal that stops reading (``kubetrain run | less``
left on its first page, ``| sleep 400``, a stopped ``ssh``) would stop it in ``write(2)``: the pipes
would fill, the replicas block, the log files stall, and a cancel wait for the terminal. So the loop
only queues lines here; a writer thread feeds them to the sink. The queue is bounded: when the sink
cannot keep up, lines are dropped from the live output only, counted per replica, and a line in
their place says how many and where they are (``kubetrain logs ID``): the log files have every one.

kubetrain's own messages to an attached run (``on_event``: a restart's back-off, a log truncated) are
written from the same loop and go to the same terminal, so they take the same road: :class:`Messages`
is a :class:`LiveOutput` whose sink is the ``on_event`` callback.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Collection

from ...contract.logs import LogRecord, LogSink

#: Bytes of text queued for the sink at most; past it lines are dropped from the live output.
BUFFER_BYTES = 1 << 20
#: How long :meth:`LiveOutput.close` waits for a sink that takes nothing (a terminal nobody reads):
#: while lines are being taken it waits on, so a slow terminal still shows everything.
STALL = 2.0

_Keys = list[str]  # a list, never a 3-tuple: three keys must not pass for a line
_Line = tuple[str, str, str]


class LiveOutput:
    """A :class:`~kubetrain.contract.logs.LogSink` that never blocks its caller: it queues (bounded) and a
    daemon thread delivers to ``sink``. Safe to call from several threads."""

    def __init__(
        self,
        sink: LogSink,
        *,
        job: str | None = None,
        limit: int = BUFFER_BYTES,
        unit: str = "line",
        prefix: str = "kubetrain: ",
        hint: str | None = None,
    ) -> None:
        """``unit``, ``prefix``, ``hint``: the words of the line that stands for dropped ones ("kubetrain: …
        3 lines not shown here; `kubetrain logs ID` has them" by default)."""
        self._sink = sink
        self._hint = hint or (f"`kubetrain logs {job}` has them" if job else "`kubetrain logs` has them")
        self._unit = unit
        self._prefix = prefix
        self._limit = limit
        self._cond = threading.Condition()
        self._items: deque[_Keys | _Line] = deque()
        self._queued = 0  # bytes of text in _items
        self._dropped: dict[str, int] = {}  # replica key -> lines not shown since its last shown one
        self._wanted = False  # a flush was asked for
        self._busy = False  # the writer is inside the sink
        self._delivered = 0  # batches delivered: what a stalled sink stops
        self._closing = False
        self._closed = False
        self._thread: threading.Thread | None = None
        #: Lines not shown, over the whole run (the log files have them).
        self.dropped_total = 0

    # -- LogSink ----------------------------------------------------------------------------------------

    def add_keys(self, keys: Collection[str]) -> None:
        with self._cond:
            if not self._closed:
                self._items.append(list(keys))

    def line(self, key: str, stream: str, text: str) -> None:
        size = len(text) + 1
        with self._cond:
            if self._closed:
                return
            if key in self._dropped:
                note = self._note(key)
                if self._queued + size + len(note) > self._limit:
                    self._drop(key)
                    return
                del self._dropped[key]
                self._items.append((key, "stderr", note))
                self._queued += len(note)
            elif self._queued + size > self._limit:
                self._drop(key)
                return
            self._items.append((key, stream, text))
            self._queued += size

    def record(self, rec: LogRecord) -> None:
        self.line(rec.key, rec.stream, rec.text)

    def flush(self) -> None:
        """Ask the writer to deliver what is queued; returns at once."""
        with self._cond:
            if self._closed:
                return
            self._wanted = True
            self._cond.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="kubetrain-live-output", daemon=True)
                self._thread.start()

    # -- the end ----------------------------------------------------------------------------------------

    def close(self, stall: float = STALL) -> bool:
        """Deliver what is queued, with a line for what was dropped; True when all of it was. Waits as
        long as the sink takes lines, and at most ``stall`` seconds for one that takes none."""
        with self._cond:
            if self._closed:
                return not self._items and not self._busy
            for key in list(self._dropped):
                self._items.append((key, "stderr", self._note(key)))
            self._dropped.clear()
        self.flush()
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            seen, since = self._delivered, time.monotonic()
            while self._items or self._busy:
                if self._delivered != seen:
                    seen, since = self._delivered, time.monotonic()
                left = since + stall - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            done = not self._items and not self._busy
            # Given up on a sink that takes nothing: the lines are in the log files.
            self.dropped_total += sum(1 for item in self._items if isinstance(item, tuple))
            self._items.clear()
            self._closed = True
            self._cond.notify_all()
        return done

    # -- internals --------------------------------------------------------------------------------------

    def _drop(self, key: str) -> None:
        self._dropped[key] = self._dropped.get(key, 0) + 1
        self.dropped_total += 1

    def _note(self, key: str) -> str:
        n = self._dropped[key]
        return f"{self._prefix}… {n:,} {self._unit}{'s' if n != 1 else ''} not shown here; {self._hint}"

    def _run(self) -> None:
        sink = self._sink
        while True:
            with self._cond:
                while not self._items and not self._wanted and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                batch = list(self._items)
                self._items.clear()
                self._queued = 0
                self._wanted = False
                self._busy = True
            try:
                for item in batch:
                    if isinstance(item, tuple):
                        sink.line(*item)
                    else:
                        sink.add_keys(item)
                sink.flush()
            finally:
                with self._cond:
                    self._busy = False
                    self._delivered += 1
                    self._cond.notify_all()


class _ToCallback:
    """A LogSink that hands each line's text to a callback (``on_event``)."""

    def __init__(self, callback: Callable[[str], None]) -> None:
        self._callback = callback

    def add_keys(self, keys: Collection[str]) -> None:
        pass

    def line(self, key: str, stream: str, text: str) -> None:
        self._callback(text)

    def record(self, rec: LogRecord) -> None:
        self._callback(rec.text)

    def flush(self) -> None:
        pass


class Messages:
    """kubetrain's messages to an attached run (its ``on_event``), delivered by a thread: calling it never
    blocks, so a terminal nobody reads (``kubetrain run job.yaml 2>&1 | sleep 400``) cannot stall the
    supervisor's control loop in a write (a cancel, Ctrl-C, the deadline then wait for the terminal).
    In order; past :data:`BUFFER_BYTES` queued, messages are dropped and counted, as replicas' lines are."""

    _KEY = "kubetrain"

    def __init__(self, on_event: Callable[[str], None], *, job: str | None = None) -> None:
        hint = f"`kubetrain describe {job}` has the job's state" if job else "`kubetrain describe` has the job's state"
        self._live = LiveOutput(_ToCallback(on_event), job=job, unit="message", prefix="", hint=hint)

    def __call__(self, text: str) -> None:
        self._live.line(self._KEY, "stderr", text)
        self._live.flush()

    def close(self, stall: float = STALL) -> bool:
        """Deliver what is queued (waiting at most ``stall`` seconds for a sink that takes nothing); True
        when all of it was. Messages sent afterwards are dropped."""
        return self._live.close(stall)


__all__ = ["BUFFER_BYTES", "STALL", "LiveOutput", "Messages"]
