"""Container logs kept per pod uid and container: the current instance and the previous one."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class LogLine:
    ts: float
    text: str  # one line, ending in "\n"


def rfc3339nano(ts: float) -> str:
    dt = datetime.fromtimestamp(ts, UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{dt.microsecond * 1000:09d}Z"


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


class LogBook:
    """Log lines keyed by (pod uid, container); a restart moves the current log to ``previous``.

    Keyed by uid, not name, so a pod recreated under the same name starts with an empty log, as
    it does on a node.
    """

    def __init__(self) -> None:
        self.current: dict[tuple[str, str], list[LogLine]] = {}
        self.previous: dict[tuple[str, str], list[LogLine]] = {}

    def append(self, uid: str, container: str, text: str, ts: float | None = None) -> None:
        now = time.time() if ts is None else ts
        lines = self.current.setdefault((uid, container), [])
        for part in text.splitlines(keepends=True):
            lines.append(LogLine(now, part if part.endswith("\n") else part + "\n"))

    def restart(self, uid: str, container: str) -> None:
        self.previous[(uid, container)] = self.current.pop((uid, container), [])

    def lines(self, uid: str, container: str, previous: bool = False) -> list[LogLine] | None:
        book = self.previous if previous else self.current
        if previous:
            return book.get((uid, container))
        return book.get((uid, container), [])

    def drop(self, uid: str) -> None:
        for book in (self.current, self.previous):
            for key in [k for k in book if k[0] == uid]:
                del book[key]

    def clear(self) -> None:
        self.current.clear()
        self.previous.clear()


def select(lines: list[LogLine], *, tail: int | None, since: float | None) -> list[LogLine]:
    if since is not None:
        lines = [line for line in lines if line.ts >= since]
    if tail is not None:
        lines = lines[-tail:] if tail > 0 else []
    return lines


def render(lines: list[LogLine], timestamps: bool) -> str:
    if timestamps:
        return "".join(f"{rfc3339nano(line.ts)} {line.text}" for line in lines)
    return "".join(line.text for line in lines)
