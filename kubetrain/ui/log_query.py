"""A job page's log query read from its address (filters, the resume cursor) and the lines it sends: the
grep's hits (`TimedGrep`, which gives up on a line after `GREP_LINE_SECONDS`) and a line as its event."""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import regex  # type: ignore[import-untyped]

from ..contract.grep_bounds import GrepRefused, check_size
from ..contract.logs import LogRecord, SearchTooSlow
from ..terminal import sanitize

GREP_LINE_SECONDS = 1.0
"""How long the page's grep may search one line before it is given up as too slow (a usual expression takes
microseconds, a few milliseconds on a line of a megabyte; one that backtracks may take years)."""



def _count(name: str, value: str, meaning: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise ValueError(f"{name}: give {meaning}, a whole number from 0 (got {value!r})")
    return number


def log_filters(query: Mapping[str, str]) -> dict[str, Any]:
    """The log's filters from a stream's parameters (`role`, `index`, `grep`, `tail`; empty ones ignored).

    Raises ValueError saying, in the page's words (its fields, not the CLI's flags), which field is wrong
    and what it takes: the page shows the message beside the filters."""
    filters: dict[str, Any] = {}
    if query.get("role"):
        filters["role"] = query["role"]
    if query.get("index"):
        filters["index"] = _count("index", query["index"], "a replica's index")
        if "role" not in filters:
            raise ValueError("index: choose a role too (an index counts the replicas of one role)")
    if query.get("tail"):
        filters["tail"] = _count("tail", query["tail"], "how many of the last lines to show")
    if query.get("grep"):
        filters["grep"] = TimedGrep(query["grep"])
    return filters


def log_resume(query: Mapping[str, str]) -> dict[str, tuple[int, int]] | None:
    """Where a resumed log stream starts (`after`: what the page has received): per replica, the time of
    its last line in milliseconds since the epoch (exact in a page's numbers, where nanoseconds are not) and
    how many of its lines had that time. None: from the start.

    Raises ValueError (said beside the filters) for a cursor the page cannot have sent."""
    text = query.get("after")
    if not text:
        return None
    try:
        data = json.loads(text)
        cursor = {str(k): (int(v[0]), int(v[1])) for k, v in data.items()}
    except (ValueError, TypeError, AttributeError, IndexError, KeyError):
        raise ValueError("after: where the page's log stopped, as {replica: [time_ms, count]}") from None
    return cursor


def after_cursor(records: Iterable[LogRecord], cursor: Mapping[str, tuple[int, int]]) -> Iterator[LogRecord]:
    """The records a page that has `cursor`'s lines has not seen: per replica, those after its last line
    received (a replica's lines come in the order it wrote them, whatever the merge of the replicas)."""
    skipped: dict[str, int] = {}
    for record in records:
        seen = cursor.get(record.key)
        if seen is not None:
            ms = record.time_ns // 1_000_000
            if ms < seen[0]:
                continue
            if ms == seen[0] and skipped.get(record.key, 0) < seen[1]:
                skipped[record.key] = skipped.get(record.key, 0) + 1
                continue
        yield record


MAX_HITS = 64
"""Hits marked in one line at most (a grep such as `.` would otherwise mark every character)."""


def utf16(text: str, index: int) -> int:
    """A position in `text` as a page's script counts (UTF-16 code units; Python counts code points)."""
    return index if text.isascii() else len(text[:index].encode("utf-16-le")) // 2


def hits(grep: TimedGrep, text: str) -> list[list[int]]:
    """Where the grep matches in a line (as the page counts), so the page marks them: the same expression and
    engine that chose the line, never the page's own regular expressions (their syntax is not Python's)."""
    found: list[list[int]] = []
    try:
        for m in grep.pattern.finditer(text, timeout=grep.limit, concurrent=True):
            start, end = m.span()
            if end > start:
                found.append([utf16(text, start), utf16(text, end)])
                if len(found) >= MAX_HITS:
                    break
    except TimeoutError:
        pass  # the line was chosen; it is shown without its marks
    return found


def line_event(record: LogRecord, grep: TimedGrep | None) -> list[Any]:
    """A line as the page's log receives it: replica, stream, text (as on the terminal: no control character
    or text-reordering mark reaches the page as it is; the page sets text, never HTML), time in ms, and the
    grep's hits when there is a grep."""
    text = sanitize(record.text)
    line: list[Any] = [record.key, record.stream, text, record.time_ns // 1_000_000]
    if grep is not None:
        line.append(hits(grep, text))
    return line


class ViewerLeft(Exception):
    """The stream's viewer went away: ends its log's follower at the next line searched, also while the
    grep keeps every line out (the follower then yields nothing that would let the pipe stop it)."""


class TimedGrep:
    """The page's grep: a regular expression in Python's syntax (as `kubetrain logs --grep`), searched in each
    line with a time limit. Python's `re` holds the GIL while it searches and cannot be stopped: one
    expression that backtracks, such as `(X+)+Y` on a long line, would stop every other request, and Ctrl-C,
    for as long as it runs, which can be years. The `regex` module lets go of the GIL while it searches a
    str (`concurrent=True`) and gives up on a line after `limit` seconds (`SearchTooSlow`, said to the viewer)."""

    def __init__(self, text: str, limit: float = GREP_LINE_SECONDS, stop: threading.Event | None = None) -> None:
        # `re` judges the syntax, so that the page accepts what the CLI accepts and says it in the same words.
        # Its size is bounded before `regex` compiles it: `regex` copies a repeat's minimum count, and
        # `a{4294967294}` asked for gigabytes (`contract.grep_bounds`).
        try:
            check_size(text)
            re.compile(text)
            self.pattern: Any = regex.compile(text)
        except GrepRefused as exc:
            raise ValueError(f"grep: {exc}") from None
        except (re.error, regex.error) as exc:
            raise ValueError(f"grep: not a regular expression ({exc}): {text!r}") from None
        self.text = text
        self.limit = limit
        self.stop = stop

    def until(self, stop: threading.Event) -> TimedGrep:
        """The same grep for a follower that ends once `stop` is set (its viewer left)."""
        bound = copy.copy(self)
        bound.stop = stop
        return bound

    def search(self, text: str, /) -> object:
        if self.stop is not None and self.stop.is_set():
            raise ViewerLeft
        try:
            return self.pattern.search(text, timeout=self.limit, concurrent=True)
        except TimeoutError:
            raise SearchTooSlow("grep: this expression takes too long on the job's output", "make it simpler") from None

    def __repr__(self) -> str:
        return f"TimedGrep({self.text!r})"


