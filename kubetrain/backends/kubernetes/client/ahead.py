"""A request sent ahead: a call run on a thread of its own while the caller does other work, its answer (or its
error) taken when needed. ``concurrent.futures`` would do it too, but its import (with logging's) is ~3 ms of every
short verb's start."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Ahead(Generic[T]):
    """``call()`` on a thread, started now: its request goes out before the caller goes on (the caller, decoding a
    page, would otherwise hold the GIL first). :meth:`result` waits for it and returns its answer, or raises what
    it raised, in the caller's thread."""

    def __init__(self, call: Callable[[], T], name: str) -> None:
        self._call = call
        self._answer: T | None = None
        self._error: BaseException | None = None
        self._sent = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._sent.wait()

    def _run(self) -> None:
        self._sent.set()
        try:
            self._answer = self._call()
        except BaseException as exc:  # raised where the answer is taken
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._answer  # type: ignore[return-value]


__all__ = ["Ahead"]
