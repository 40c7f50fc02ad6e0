"""Reading metrics files: all of them now, or following them as replicas write (the local backend's `metrics`).

A file is read in whole lines only: a record being written (the writer's one `write(2)` not yet complete, as
seen by a reader on another core) is left for the next read, never parsed torn.
"""

from __future__ import annotations

import heapq
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from .sample import MetricSample, parse_file_line

POLL_INTERVAL = 0.2
"""Seconds between looks at the files while following (as `kubetrain logs -f` on local log files)."""


class MetricFile:
    """One metrics file, read on from where the last read stopped."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.offset = 0

    def read_new(self) -> list[MetricSample]:
        """The samples of the whole lines written since the last read ([] while the file does not exist)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1
        if end == 0:
            return []
        self.offset += end
        return [s for line in data[:end].splitlines() for s in parse_file_line(line)]


def read_files(paths: Mapping[str, str | os.PathLike[str]] | list[Path]) -> list[MetricSample]:
    """Every sample in `paths` (a key → path map, or paths), merged in time order."""
    files = list(paths.values()) if isinstance(paths, Mapping) else list(paths)
    per_file = [MetricFile(p).read_new() for p in files]
    return list(heapq.merge(*per_file, key=lambda s: s.time))


def follow_files(
    paths: Mapping[str, str | os.PathLike[str]] | list[Path],
    ended: Callable[[], bool],
    *,
    poll_interval: float = POLL_INTERVAL,
) -> Iterator[MetricSample]:
    """What the files hold, then the samples written from now on, until `ended()` and the files hold no more.
    Files that do not exist yet (a replica not started) are waited for. Each round's samples come in time
    order; the files are polled every `poll_interval` seconds while nothing is new."""
    files = [MetricFile(p) for p in (paths.values() if isinstance(paths, Mapping) else paths)]
    while True:
        # `ended` is asked before reading: what was written before the end is read in this round.
        done = ended()
        new = list(heapq.merge(*(f.read_new() for f in files), key=lambda s: s.time))
        yield from new
        if done:
            return
        if not new:
            time.sleep(poll_interval)


__all__ = ["POLL_INTERVAL", "MetricFile", "follow_files", "read_files"]
