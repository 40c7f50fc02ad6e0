"""Following logs for the web view's pages on threads of their own: a reader hands its records to the event
loop through a bounded `Pipe` that waits for its page, and `LogReaders` lets a few readers read at a time, in
turns (`ReadTurns`), so many pages on big logs cost bounded memory and every page gets its lines."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from .connections import (
    DEFAULT_LOG_READERS,
    DEFAULT_LOG_VIEWERS,
    LOG_BATCH_LINES,
    LOG_BUFFER_BYTES,
    LOG_BUFFER_LINES,
)

LOG_BATCH = LOG_BATCH_LINES
"""Lines per `lines` event at most (the page appends each event as one text block); a reader's slice."""
TURN_IDLE = 0.25
"""Seconds a reader waits for its log's next line before its turn counts as free (`ReadTurns`): reading
takes microseconds a line, so that long a wait is the end of a running job's output, not work."""
_END = object()



class ReadTurns:
    """Turns at reading logs, taken by the log streams' reader threads: at most `limit` read at once, the
    others wait, first come first served. A reader gives its turn back after each `slice` of lines and
    whenever it waits for its page to take what it holds, so 50 pages opened on a 1M-line log each get
    their first lines within a round of slices, while at most `limit` threads contend with the event loop
    for the GIL (50 at once left `/api/jobs` unanswered for a minute). A reader that has waited `idle`
    seconds for its next line (at the end of a running job's output) reads nothing meanwhile: its turn
    counts as free, so the followers of quiet running jobs never keep the other pages from their logs."""

    def __init__(self, limit: int = DEFAULT_LOG_READERS, slice: int = LOG_BATCH, idle: float = TURN_IDLE) -> None:
        self.limit = limit
        self.slice = slice
        self.idle = idle
        self.holders: set[Pipe] = set()
        self._queue: collections.deque[object] = collections.deque()
        self._cond = threading.Condition()

    def _reading(self) -> int:
        """Holders reading now: not waiting for a next line for `idle` seconds or more."""
        now = time.monotonic()
        return sum(1 for p in self.holders if p.next_since is None or now - p.next_since < self.idle)

    def take(self, pipe: Pipe) -> bool:
        """Wait for a turn for `pipe`'s reader; False: the pipe was stopped meanwhile."""
        with self._cond:
            ticket = object()
            self._queue.append(ticket)
            while not (self._queue[0] is ticket and self._reading() < self.limit):
                if pipe.stopped.is_set():
                    self._queue.remove(ticket)
                    self._cond.notify_all()
                    return False
                # Woken by a turn given back, or after `idle`: a holder may have gone idle meanwhile.
                self._cond.wait(self.idle)
            self._queue.popleft()
            self.holders.add(pipe)
            self._cond.notify_all()
            return True

    def give_back(self, pipe: Pipe) -> None:
        with self._cond:
            self.holders.discard(pipe)
            self._cond.notify_all()

    def wake(self) -> None:
        """Let waiting readers look at their `stopped` again."""
        with self._cond:
            self._cond.notify_all()


class Pipe:
    """Items from a blocking iterator on a thread of its own, handed to the event loop in batches.

    Bounded, and nothing lost: once it holds `limit` items or `limit_bytes` of their text, its thread waits
    until the stream has taken some (which it does as fast as its viewer reads: uvicorn waits for a slow
    client's socket to drain), so a viewer that reads slowly costs this buffer and no more, however long
    the log. (It dropped the oldest of up to 200,000 lines per viewer before: 50 viewers of a 1M-line log
    held 2.9 GB.)"""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        limit: int = LOG_BUFFER_LINES,
        limit_bytes: int = LOG_BUFFER_BYTES,
        turns: ReadTurns | None = None,
    ) -> None:
        self.loop = loop
        self.turns = turns
        self.next_since: float | None = None
        """Since when its reader has waited for the iterator's next item (None: it is not waiting)."""
        self.items: collections.deque[Any] = collections.deque()
        self.limit = limit
        self.limit_bytes = limit_bytes
        self.held_bytes = 0
        self.done = False
        self.error: BaseException | None = None
        self.stopped = threading.Event()
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._ready = asyncio.Event()

    def run(self, iterator: Callable[[], Iterator[Any]], name: str) -> Pipe:
        def pump() -> None:
            turns, held, count = self.turns, False, 0
            try:
                items = iter(iterator())
                while not self.stopped.is_set():
                    if turns is not None and not held:
                        if not turns.take(self):
                            break
                        held, count = True, 0
                    self.next_since = time.monotonic()
                    item = next(items, _END)
                    self.next_since = None
                    if item is _END or self.stopped.is_set():
                        break
                    count += 1
                    if held and turns is not None and (count >= turns.slice or not self.has_room(item)):
                        turns.give_back(self)  # its slice is used, or it is about to wait for its page
                        held = False
                    if not self.put(item):
                        break
            except BaseException as exc:  # shown to the viewer, not lost on a thread
                self.error = exc
            finally:
                if held and turns is not None:
                    turns.give_back(self)
                self.done = True
                self._notify()

        threading.Thread(target=pump, name=name, daemon=True).start()
        return self

    @staticmethod
    def size(item: Any) -> int:
        """An item's weight against `limit_bytes`: a log line's text and a little for the rest."""
        if isinstance(item, list) and len(item) > 2 and isinstance(item[2], str):
            return len(item[2]) + 64
        return 64

    def has_room(self, item: Any) -> bool:
        """Whether `put(item)` would hold it at once. One item always fits an empty pipe, however large: a
        line longer than the bound still goes."""
        if not self.items:
            return True
        return len(self.items) < self.limit and self.held_bytes + self.size(item) <= self.limit_bytes

    def put(self, item: Any) -> bool:
        """Hold `item` for the stream, once there is room (False: the stream ended while waiting)."""
        weight = self.size(item)
        with self._room:
            while not self.has_room(item):
                if self.stopped.is_set():
                    return False
                self._room.wait()
            was_empty = not self.items
            self.items.append(item)
            self.held_bytes += weight
        if was_empty:
            self._notify()
        return True

    def stop(self) -> None:
        """The stream has ended: its thread stops at its next item, or at once if it waits for room."""
        with self._room:
            self.stopped.set()
            self._room.notify_all()
        if self.turns is not None:
            self.turns.wake()

    def _notify(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._ready.set)

    def wake(self) -> None:
        self._notify()

    def take(self, most: int) -> list[Any]:
        """Up to `most` of the items read so far (none: nothing new)."""
        self._ready.clear()
        with self._room:
            batch = [self.items.popleft() for _ in range(min(most, len(self.items)))]
            self.held_bytes -= sum(self.size(item) for item in batch)
            if self.items:
                self._ready.set()
            if batch:
                self._room.notify_all()
        return batch

    async def ready(self, timeout: float) -> None:
        """Once there are items to take or the iterator has ended (or after `timeout` seconds)."""
        if not self.items and not self.done:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), timeout)

    @property
    def pending(self) -> bool:
        """Items to take, or an end not yet taken."""
        return bool(self.items) or self.done

    @property
    def finished(self) -> bool:
        return self.done and not self.items


class LogReaders:
    """How many event streams have a log at once (`limit`); the next ones wait, first come first served,
    while their pages get the job's status and plots. Each such stream holds a reader thread, the files it
    follows and a buffer (`Pipe`): this bounds them all, whatever the connections."""

    def __init__(self, limit: int = DEFAULT_LOG_VIEWERS) -> None:
        self.limit = limit
        self.reading = 0
        self.queue: collections.deque[asyncio.Future[None]] = collections.deque()

    def try_enter(self) -> asyncio.Future[None] | None:
        """None: a reader may start now (counted); else a future done once it may (then counted)."""
        if self.reading < self.limit and not self.queue:
            self.reading += 1
            return None
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.queue.append(turn)
        return turn

    def waiting_message(self) -> str:
        reading = "1 page is reading a log" if self.limit == 1 else f"{self.limit} pages are reading logs"
        return (
            f"waiting to read the log: {reading} at once (kubetrain ui --max-log-viewers); it starts when one "
            "of them is closed or has read its log to the end"
        )

    def leave(self, turn: asyncio.Future[None] | None) -> None:
        """A reader ended, or a waiting stream went before its turn (`turn`, not done yet)."""
        if turn is not None and not turn.done():
            with contextlib.suppress(ValueError):
                self.queue.remove(turn)
            turn.cancel()
            return
        self.reading -= 1
        while self.queue and self.reading < self.limit:
            following = self.queue.popleft()
            if not following.cancelled():
                self.reading += 1
                following.set_result(None)


