"""Following replica logs as they grow (`logs -f`), across rotations, until the job ends.

A follower keeps the file being written open: when the writer rotates it, what was appended before the
rotation is still read from the open file, then the files written after it, so no line is skipped or read
twice however far the reader falls behind (`_Follower`).
"""

from __future__ import annotations

import heapq
import os
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ...contract.logs import GrepPattern, LogFilter, LogRecord, TimeBound, make_filter
from ..logfiles.format import parse_record
from ..logfiles.reader import complete_end, iter_range, open_log_files, rotation_marker


@dataclass
class _Follower:
    """One replica's log, followed: the file being written is kept open, so that when it is rotated
    what was appended to it before the rotation is still read, then the files after it."""

    key: str
    path: Path
    offset: int = 0
    pending: bytes = b""
    file: BinaryIO | None = None
    done_ino: int | None = None
    """The newest file read to its end (a rotated one), while no file is followed: the files after it are
    read before the one written now."""

    def history(self, flt: LogFilter, tail: int | None) -> Iterator[LogRecord]:
        """The records present now; later records are left to :meth:`read_new`."""
        try:
            self.file = open(self.path, "rb")  # noqa: SIM115 - kept open while following, see close()
        except FileNotFoundError:
            self.file = None
        # Fixed before the first record is yielded, so that history and following neither overlap nor
        # leave a gap; the rotated files are complete.
        if self.file is not None:
            self.offset = complete_end(self.file, os.fstat(self.file.fileno()).st_size)
        marker = rotation_marker(self.path, self.key)
        older = open_log_files(self.path, current=False)
        if self.file is not None:
            # Rotated since it was opened (it is among them): the history is what came before it; it and
            # the files after it are read by `read_new`.
            inodes = [os.fstat(f.fileno()).st_ino for f in older]
            mine = os.fstat(self.file.fileno()).st_ino
            if mine in inodes:
                for f in older[inodes.index(mine) :]:
                    f.close()
                older = older[: inodes.index(mine)]
        elif older:
            self.done_ino = os.fstat(older[-1].fileno()).st_ino
        try:
            sources = [(f, complete_end(f, os.fstat(f.fileno()).st_size)) for f in older]
            if self.file is not None:
                sources.append((self.file, self.offset))
            if tail is None:
                if marker is not None and flt.accepts(marker):
                    yield marker
                for f, end in sources:
                    yield from iter_range(f, 0, end, flt, None, self.key)
                return
            picked: list[LogRecord] = []
            for f, end in reversed(sources):
                if len(picked) >= tail:
                    break
                picked[:0] = iter_range(f, 0, end, flt, tail - len(picked), self.key)
            if marker is not None and len(picked) < tail and flt.accepts(marker):
                picked.insert(0, marker)
            yield from picked
        finally:
            for f in older:
                f.close()

    def read_new(self, flt: LogFilter) -> list[LogRecord]:
        out: list[LogRecord] = []
        if self.file is None:
            try:
                current = open(self.path, "rb")  # noqa: SIM115 - kept open while following
            except FileNotFoundError:
                return out
            # The files rotated since the last one read, up to the one now written: a slow reader (or one
            # that started before the log existed) may find several rotations done since it last looked.
            for f in self._rotated_since(os.fstat(current.fileno()).st_ino):
                with f:
                    self._parse(f.read(), flt, out)
                self.pending = b""  # a complete file's last record without its newline is not one
            self.file, self.offset, self.pending, self.done_ino = current, 0, b"", None
        self._read_rest(flt, out)
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return out  # between a rotation's rename and the new file: next round
        mine = os.fstat(self.file.fileno())
        if st.st_ino != mine.st_ino:
            # Rotated: the old file is complete now (the writer renames it only once done with it), and may
            # have grown, even filled up, between the read above and the look at its name: read to its end,
            # then the files written after it.
            self._read_rest(flt, out)
            self.pending = b""
            self.done_ino = mine.st_ino
            self.file.close()
            self.file = None
            return out + self.read_new(flt)
        if mine.st_size < self.offset:  # truncated in place: start over on the new content
            self.offset, self.pending = 0, b""
            self._read_rest(flt, out)
        return out

    def _rotated_since(self, current_ino: int) -> list[BinaryIO]:
        """The rotated files newer than ``done_ino`` and older than the file ``current_ino``, opened. When
        ``done_ino`` is no longer among them, rotation removed it (oldest first), so every rotated file left
        is newer than it: all of them are read, or their lines would be skipped uncounted."""
        files = open_log_files(self.path, current=False)
        inodes = [os.fstat(f.fileno()).st_ino for f in files]
        start = inodes.index(self.done_ino) + 1 if self.done_ino in inodes else 0
        end = inodes.index(current_ino) if current_ino in inodes else len(files)
        for f in files[:start] + files[end:]:
            f.close()
        return files[start:end]

    def _read_rest(self, flt: LogFilter, out: list[LogRecord]) -> None:
        assert self.file is not None
        self.file.seek(self.offset)
        data = self.file.read()
        self.offset += len(data)
        self._parse(data, flt, out)

    def _parse(self, data: bytes, flt: LogFilter, out: list[LogRecord]) -> None:
        data = self.pending + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self.pending = data
            return
        self.pending = data[cut + 1 :]
        for raw in data[:cut].split(b"\n"):
            rec = parse_record(raw, self.key)
            if rec is not None and flt.accepts(rec):
                out.append(rec)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


def follow_log(
    paths: Mapping[str, Path],
    until: Callable[[], bool],
    *,
    since: TimeBound | None = None,
    tail: int | None = None,
    grep: str | GrepPattern | None = None,
    streams: Collection[str] | None = None,
    poll_interval: float = 0.2,
) -> Iterator[LogRecord]:
    """``logs -f``: the existing records (filtered as in :func:`merge_logs`), then new ones as they come.

    ``until`` is the stop condition (e.g. "the job has finished"), not a time
    bound. The files are polled every ``poll_interval`` seconds: a reader in
    another process has no cheaper portable signal (the supervisor itself
    never polls). The new records of all files found in one round are merged
    in time order. Once ``until()`` is true, one last round is read, so the
    final lines of a job that just ended are not lost. Files that do not exist
    yet are waited for; a file replaced or truncated is read from its start.
    """
    flt = make_filter(since, None, grep, streams)
    followers = [_Follower(k, p) for k, p in paths.items()]
    # Each history generator fixes its file's end offset when first advanced;
    # prime them all before merging so no record is read twice.
    histories = [fol.history(flt, tail) for fol in followers]
    primed: list[Iterator[LogRecord]] = []
    for h in histories:
        first = next(h, None)
        if first is not None:
            primed.append(_chain_first(first, h))
    try:
        yield from heapq.merge(*primed, key=lambda r: r.time_ns)
        while True:
            stopping = until()
            batch: list[LogRecord] = []
            for fol in followers:
                batch.extend(fol.read_new(flt))
            batch.sort(key=lambda r: r.time_ns)
            yield from batch
            if stopping:
                return
            time.sleep(poll_interval)
    finally:
        for fol in followers:
            fol.close()


def _chain_first(first: LogRecord, rest: Iterator[LogRecord]) -> Iterator[LogRecord]:
    yield first
    yield from rest
