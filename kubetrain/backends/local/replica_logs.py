"""The log files of a process group's replicas, and what is said when one could not take every line.

Every line a replica prints goes to its log first (`logfiles.writer.LogWriter`). On a full disk a writer counts
what it could not write rather than lose it unsaid; this says so twice, for two readers: once on the
terminal when the first log stops taking lines, and for each log closed with lines missing, in the job's
record (`LogNotice`, which the supervisor turns into a LogTruncated condition). A marker that found no room
when its log closed is written later (`mark_gaps`), once the job's end has given room back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..logfiles.writer import Gap, LogWriter, append_note


@dataclass(frozen=True)
class LogNotice:
    """Trouble writing a replica's log (a full disk): said once when it starts (``first``, for the
    terminal), and for each replica whose log closed with lines missing (for the job's record)."""

    key: str
    message: str
    first: bool


class ReplicaLogs:
    """The log writers of one process group, opened with its rotation settings, and their notices."""

    def __init__(
        self, job: str | None, on_notice: Callable[[LogNotice], None] | None, rotation: tuple[int, int]
    ) -> None:
        """`job`: the job id the notices name (`kubetrain describe ID`); `rotation`: (max size, max files)."""
        self._job = job
        self._on_notice = on_notice
        self._rotation = rotation
        self._said_full = False
        self._unmarked: list[tuple[Path, Gap]] = []

    def writer(self, key: str, path: Path) -> LogWriter:
        """The writer of process `key`'s log at `path` (appended to)."""
        max_size, max_files = self._rotation
        return LogWriter(path, max_size=max_size, max_files=max_files, on_gap=lambda gap: self._gap(key, gap))

    def _gap(self, key: str, gap: Gap) -> None:
        """A replica's log stopped taking lines: said once per group, for the terminal."""
        if self._said_full or self._on_notice is None:
            return
        self._said_full = True
        where = f"kubetrain describe {self._job}" if self._job else "its log"
        self._on_notice(
            LogNotice(key, f"{key}: output not written to the log: {gap.reason}; counted and marked ({where})", True)
        )

    def close(self, key: str, log: LogWriter) -> None:
        """Close a replica's log; lines it could not take are reported (once: closing again is a no-op)."""
        if not log.is_open:
            return
        log.close()
        if log.unmarked is not None:
            self._unmarked.append((log.path, log.unmarked))
        if log.gaps and self._on_notice is not None:
            lost = log.dropped
            self._on_notice(
                LogNotice(
                    key,
                    f"{key}: {lost.lines:,} line{'s' if lost.lines != 1 else ''} ({lost.bytes:,} bytes)"
                    f" of output not written to {log.path}: {lost.reason}; a marker in the log says where",
                    False,
                )
            )

    def mark_gaps(self) -> None:
        """Append the markers that found no room when their logs closed (the job store has given its
        reserve back by the time the job's end is recorded, so there is room now, usually)."""
        left = []
        for path, gap in self._unmarked:
            try:
                append_note(path, gap.text())
            except OSError:
                left.append((path, gap))
        self._unmarked = left
