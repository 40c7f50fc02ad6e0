"""Reading metrics files: all of them now, or following them as replicas write (the local backend's `metrics`).

A file is read in whole lines only: a record being written (the writer's one `write(2)` not yet complete, as
seen by a reader on another core) is left for the next read, never parsed torn.

The files are written by the replicas, so every read treats them as hostile: a replica may replace its file
with a symlink to `/dev/zero`, a FIFO or a device, or name another path in its environment. A file is opened
without following a symlink and without blocking (`O_NOFOLLOW | O_NONBLOCK`), read only if it is a regular
file, only up to the size it had when opened (so one that grows while read cannot keep a read going), and
only inside the folder the backend gave (`within`). What is refused is said once to `on_refused`.
"""

from __future__ import annotations

import errno
import heapq
import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from .sample import MetricSample, as_from, parse_file_line, replica_of

POLL_INTERVAL = 0.2
"""Seconds between looks at the files while following (as `kubetrain logs -f` on local log files)."""
READ_CHUNK = 8 * 1024 * 1024
"""Bytes read per look at one file at most: a reader that fell behind catches up in steps of this size,
so the memory a read holds is bounded whatever the file's size."""

Paths = Mapping[str, str | os.PathLike[str]] | list[Path]
"""Files to read: `{key: path}` (the key names the process that writes it, `worker-1` or `worker-1.0`, and
is the samples' role and index whatever the records say) or plain paths."""
Refused = Callable[[Path, str], None]


class MetricFile:
    """One metrics file, read on from where the last read stopped."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        key: str = "",
        within: Path | None = None,
        on_refused: Refused | None = None,
    ) -> None:
        self.path = Path(path)
        self.offset = 0
        self.origin = replica_of(key) if key else None
        self.within = within
        self.on_refused = on_refused
        self.refused = False
        self.behind = False
        """The last read stopped at `READ_CHUNK` bytes with more written: read again before waiting."""

    def _refuse(self, why: str) -> list[MetricSample]:
        if not self.refused:
            self.refused = True
            if self.on_refused is not None:
                self.on_refused(self.path, why)
        return []

    def read_new(self) -> list[MetricSample]:
        """The samples of the whole lines written since the last read, up to `READ_CHUNK` bytes of them
        ([] while the file does not exist, and for a file that is refused)."""
        self.behind = False
        if self.refused:
            return []
        if self.within is not None and not _inside(self.path, self.within):
            return self._refuse(f"outside the job's folder {self.within}")
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return []
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return self._refuse("a symbolic link (a metrics file is read only as the replica's own file)")
            return self._refuse(exc.strerror or str(exc))
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return self._refuse("not a regular file (a FIFO, a device or a folder)")
            size = min(info.st_size - self.offset, READ_CHUNK)
            if size <= 0:
                return []
            self.behind = info.st_size - self.offset > READ_CHUNK
            data = os.pread(fd, size, self.offset)
        finally:
            os.close(fd)
        end = data.rfind(b"\n") + 1
        if end == 0:
            if size == READ_CHUNK:  # one "line" longer than a whole chunk: not a record; skip past it
                self.offset += size
            return []
        self.offset += end
        samples = [s for line in data[:end].splitlines() for s in parse_file_line(line)]
        if self.origin is not None:
            samples = [as_from(s, *self.origin) for s in samples]
        return samples


def _inside(path: Path, folder: Path) -> bool:
    """`path` names a file in `folder` (or below), its own name not followed: a link there is refused when
    opened, and one on the way to it would lead out of the folder."""
    try:
        return Path(os.path.realpath(path.parent)).is_relative_to(os.path.realpath(folder))
    except OSError:
        return False


def _files(paths: Paths, within: Path | None, on_refused: Refused | None) -> list[MetricFile]:
    if isinstance(paths, Mapping):
        return [MetricFile(p, key=k, within=within, on_refused=on_refused) for k, p in paths.items()]
    return [MetricFile(p, within=within, on_refused=on_refused) for p in paths]


def read_files(
    paths: Paths, *, within: Path | None = None, on_refused: Refused | None = None
) -> list[MetricSample]:
    """Every sample in `paths`, merged in time order."""
    per_file = []
    for f in _files(paths, within, on_refused):
        samples = f.read_new()
        while f.behind:
            samples += f.read_new()
        per_file.append(samples)
    return list(heapq.merge(*per_file, key=lambda s: s.time))


def follow_files(
    paths: Paths,
    ended: Callable[[], bool],
    *,
    poll_interval: float = POLL_INTERVAL,
    within: Path | None = None,
    on_refused: Refused | None = None,
) -> Iterator[MetricSample]:
    """What the files hold, then the samples written from now on, until `ended()` and the files hold no more.
    Files that do not exist yet (a replica not started) are waited for. Each round's samples come in time
    order; the files are polled every `poll_interval` seconds while nothing is new."""
    files = _files(paths, within, on_refused)
    while True:
        # `ended` is asked before reading: what was written before the end is read in this round.
        done = ended()
        new = list(heapq.merge(*(f.read_new() for f in files), key=lambda s: s.time))
        yield from new
        if any(f.behind for f in files):
            continue
        if done:
            return
        if not new:
            time.sleep(poll_interval)


__all__ = ["POLL_INTERVAL", "READ_CHUNK", "MetricFile", "follow_files", "read_files"]
