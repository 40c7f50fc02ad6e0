"""Writing a replica's log file: records appended whole, rotated as the kubelet rotates, never a line lost silently.

The supervisor's process group writes every line a replica prints here first, before anything else sees it
(`format` says what a record is). A full disk must neither stop the job nor lose output unsaid, so a
writer counts what it could not write and marks the gap in the file once there is room (`Gap`); a log must
not fill the disk either, so it rotates past a size and keeps a count of what rotation removed, which
readers show (`format.rotated_away`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ...contract import env_names
from ...contract.logs import format_timestamp, parse_timestamp
from .format import MAX_LINE, ROTATED_SUFFIX, human_size, record_boundary, rotated_away, rotated_path

#: A replica's log is rotated once it passes this many bytes (the kubelet's containerLogMaxSize, 10Mi).
DEFAULT_MAX_SIZE = 10 * 1024 * 1024
#: Files kept per replica, the one being written included (the kubelet's containerLogMaxFiles).
DEFAULT_MAX_FILES = 5
# The supervisor that writes the logs takes the two above from env_names.LOG_MAX_SIZE / LOG_MAX_FILES.
#: Free space a log writer leaves on its filesystem: output stops being written (and is counted) below
#: it, so that the job's final status, its conditions and the truncation markers still fit. The job
#: store keeps a reserve file of its own besides (``disk_reserve.RESERVE_BYTES``) for when something else
#: fills the disk. The kubelet's answer to the same problem is its nodefs eviction threshold.
DISK_HEADROOM = 256 * 1024
# After a failed write, how long before writing is tried again (statvfs alone can be wrong: quotas).
_RETRY_AFTER = 0.5
# Errors that mean "no room": a full disk, a quota, a file size limit.
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)

_SIZE_UNITS = {"": 1, "K": 1000, "M": 1000**2, "G": 1000**3, "KI": 1024, "MI": 1024**2, "GI": 1024**3}


def parse_size(text: str) -> int:
    """``10Mi`` → 10485760, ``500K`` → 500000, ``4096`` → 4096. ValueError on anything else."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]i?)?\s*", text, re.IGNORECASE)
    if m is None:
        raise ValueError(f"not a size: {text!r} (give bytes, or a number with Ki, Mi, Gi, K, M or G)")
    return int(m.group(1)) * _SIZE_UNITS[(m.group(2) or "").upper()]


def rotation_from_env(environ: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(max size, max files) from ``KUBETRAIN_LOG_MAX_SIZE`` / ``KUBETRAIN_LOG_MAX_FILES``, else the
    kubelet's defaults. A value that does not parse is reported once and the default used: a log
    setting must not keep a job from running."""
    env = os.environ if environ is None else environ
    size, files = DEFAULT_MAX_SIZE, DEFAULT_MAX_FILES
    if env.get(env_names.LOG_MAX_SIZE):
        try:
            size = parse_size(env[env_names.LOG_MAX_SIZE])
        except ValueError as e:
            print(f"kubetrain: {env_names.LOG_MAX_SIZE}: {e}; using {DEFAULT_MAX_SIZE}", file=sys.stderr)
    if env.get(env_names.LOG_MAX_FILES):
        try:
            files = int(env[env_names.LOG_MAX_FILES])
            if files < 1:
                raise ValueError
        except ValueError:
            files = DEFAULT_MAX_FILES
            print(f"kubetrain: {env_names.LOG_MAX_FILES}: not a whole number >= 1; using {files}", file=sys.stderr)
    return size, files


@dataclass
class Gap:
    """Output a writer could not write: how much, of what, and why."""

    lines: int = 0  #: records not written (a line longer than MAX_LINE counts once per chunk)
    bytes: int = 0  #: the replica's bytes in them, newlines included
    reason: str = ""
    since_ns: int = 0  #: when the first of them was read

    def add(self, lines: int, nbytes: int, time_ns: int) -> None:
        if not self.lines:
            self.since_ns = time_ns
        self.lines += lines
        self.bytes += nbytes

    def text(self) -> str:
        return (
            f"kubetrain: {self.lines:,} line{'s' if self.lines != 1 else ''} ({human_size(self.bytes)}) of output"
            f" not written here: {self.reason}"
        )


class LogWriter:
    """Appends records to one replica's log file.

    Records are buffered per pump round and written with one ``write(2)`` on
    :meth:`flush`, so a reader never sees half a record, and nothing sits in a
    user-space buffer if the supervisor is killed.

    Never losing a line silently: when the filesystem has less than
    ``headroom`` bytes free, or a write fails for want of room (a full disk, a
    quota), the batch is not written but counted (a write cut short is
    truncated back to the last whole record, so the file stays parsable). Once
    there is room again, and at the latest when the writer closes, a marker
    record (``kubetrain: N lines (B) of output not written here: <why>``)
    goes in where the gap is; :attr:`gaps` keeps every gap, for the caller to
    report. ``on_gap`` is called once, when the first gap opens.

    Rotation, as the kubelet's: once the file passes ``max_size`` bytes it is
    renamed ``.1`` (``.1`` to ``.2``, and so on) and a new one started; at
    most ``max_files`` files are kept, the current one included. What the
    oldest file held is added to the ``.rotated`` record beside the log
    (:func:`rotated_away`), which readers show first. ``max_size`` 0: no rotation.
    """

    def __init__(
        self,
        path: Path,
        *,
        max_size: int = 0,
        max_files: int = DEFAULT_MAX_FILES,
        headroom: int = DISK_HEADROOM,
        on_gap: Callable[[Gap], None] | None = None,
        rotation_why: str | None = None,
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.rotation_why = rotation_why
        """What sets ``max_size`` and ``max_files``, for readers to say with what rotation removed (None: the
        replica log's own settings, which the reader names)."""
        self.max_size = max_size
        self.max_files = max(1, max_files)
        self.headroom = headroom
        self._on_gap = on_gap
        self._fd = self._open()
        self._size = os.fstat(self._fd).st_size
        # (record, the replica's bytes in it, when it was read), until the next flush
        self._buf: list[tuple[bytes, int, int]] = []
        self._gap: Gap | None = None
        #: Every gap closed so far, with the one still open (if any) last.
        self.gaps: list[Gap] = []
        self.unmarked: Gap | None = None
        self._retry_at = 0.0

    def _open(self) -> int:
        # Private to the user: replicas print their environment, credentials included.
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    @property
    def dropped(self) -> Gap:
        """Every gap so far summed up (reason: the last one's)."""
        total = Gap(reason=self.gaps[-1].reason if self.gaps else "")
        for gap in self.gaps:
            total.lines += gap.lines
            total.bytes += gap.bytes
        return total

    def add(self, time_ns: int, stream: str, line: bytes, partial: bool = False) -> None:
        record = b"%s %s %s %s\n" % (format_timestamp(time_ns), stream.encode(), b"P" if partial else b"F", line)
        self._buf.append((record, len(line) + (0 if partial else 1), time_ns))

    def flush(self) -> None:
        if not self._buf or self._fd < 0:
            return
        batch, self._buf = self._buf, []
        i = 0
        while i < len(batch):
            # Rotation cuts at record boundaries, so no file passes max_size (save by a record longer than it).
            if self.max_size and self._size and self._size + len(batch[i][0]) > self.max_size:
                self._rotate()
            room = self.max_size - self._size if self.max_size else None
            j, size = i, 0
            while j < len(batch) and (room is None or j == i or size + len(batch[j][0]) <= room):
                size += len(batch[j][0])
                j += 1
            self._flush_records(batch[i:j], size)
            i = j

    def _flush_records(self, records: list[tuple[bytes, int, int]], size: int) -> None:
        why = self._no_room(size)
        if why is None and self._gap is not None:
            why = self._write_gap_marker()
        if why is None:
            why = self._write(b"".join(r[0] for r in records))
        if why is not None:
            self._count_gap(len(records), sum(r[1] for r in records), records[0][2], why)

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            if self._gap is not None:
                # The replica is done: the marker goes in now, into the headroom kept for it.
                self._write_gap_marker(force=True)
            #: A gap whose marker could not be written even then (a disk something else filled to the
            #: last block, and no record of ours to cut): for the caller to append once there is room.
            self.unmarked = self._gap
            os.close(self._fd)
            self._fd = -1

    # -- room ---------------------------------------------------------------------------------------

    def _no_room(self, size: int) -> str | None:
        """Why ``size`` more bytes must not be written now, or None."""
        if self._gap is not None and time.monotonic() < self._retry_at:
            return self._gap.reason
        try:
            st = os.fstatvfs(self._fd)
        except OSError:
            return None
        free = st.f_bavail * st.f_frsize
        # Once stopped, wait for twice the headroom: writing a little and stopping again, over and
        # over, would spread the output in small pieces between markers.
        need = self.headroom * (2 if self._gap is not None else 1) + size
        if st.f_blocks and free < need:
            where = self.path.parent
            return f"the disk is full (less than {human_size(self.headroom)} free on the filesystem of {where})"
        return None

    def _write(self, data: bytes) -> str | None:
        """Write ``data`` whole; on a failure for want of room, undo the part written and say why."""
        view = memoryview(data)
        while view:
            try:
                n = os.write(self._fd, view)
            except InterruptedError:
                continue
            except OSError as e:
                if view.nbytes != len(data):
                    with contextlib.suppress(OSError):
                        os.ftruncate(self._fd, self._size)
                self._retry_at = time.monotonic() + _RETRY_AFTER
                if e.errno in _NO_ROOM:
                    return f"{os.strerror(e.errno or 0).lower()} ({self.path.parent})"
                return f"cannot write {self.path}: {e.strerror}"
            view = view[n:]
        self._size += len(data)
        return None

    def _count_gap(self, lines: int, nbytes: int, time_ns: int, why: str) -> None:
        if self._gap is None:
            self._gap = Gap(reason=why)
            self.gaps.append(self._gap)
            if self._on_gap is not None:
                self._on_gap(self._gap)
        self._gap.add(lines, nbytes, time_ns)

    def _write_gap_marker(self, force: bool = False) -> str | None:
        """Close the open gap with its marker record. ``force``: even into the headroom, cutting the
        file's last records if that is what it takes (they are then counted in the marker)."""
        gap = self._gap
        assert gap is not None
        record = b"%s stderr F %s\n" % (format_timestamp(time.time_ns()), gap.text().encode())
        why = self._write(record)
        if why is not None and force:
            self._make_room(gap, len(record))
            record = b"%s stderr F %s\n" % (format_timestamp(time.time_ns()), gap.text().encode())
            why = self._write(record)
        if why is None:
            self._gap = None
        return why

    def _make_room(self, gap: Gap, size: int) -> None:
        """Cut whole records off the end of the file (a block's worth more than ``size``), counting them
        in ``gap``: on a disk someone else filled, the marker must still fit."""
        want = self._size - size - os.fstatvfs(self._fd).f_bsize
        if want <= 0:
            cut = 0
        else:
            with open(self.path, "rb") as f:
                cut = record_boundary(f, want)
        with open(self.path, "rb") as f:
            f.seek(cut)
            for raw in f.read(self._size - cut).split(b"\n")[:-1]:
                rec = raw.split(b" ", 3)
                gap.add(1, (len(rec[3]) if len(rec) == 4 else 0) + (rec[2:3] == [b"F"]), gap.since_ns)
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, cut)
            self._size = cut

    # -- rotation -----------------------------------------------------------------------------------

    def _rotate(self) -> None:
        """log → log.1 → log.2 …; the file past ``max_files`` is removed and accounted for."""
        keep = self.max_files - 1
        if keep <= 0:
            _forget(self.path, self.path, self.max_size, self.max_files, self.rotation_why)
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            self._size = 0
            return
        oldest = rotated_path(self.path, keep)
        if oldest.exists():
            _forget(self.path, oldest, self.max_size, self.max_files, self.rotation_why)
        for n in range(keep - 1, -1, -1):
            with contextlib.suppress(FileNotFoundError):
                os.rename(rotated_path(self.path, n), rotated_path(self.path, n + 1))
        os.close(self._fd)
        self._fd = self._open()
        self._size = 0


def _forget(log: Path, path: Path, max_size: int, max_files: int, why: str | None = None) -> None:
    """Remove ``path``, a rotated file of ``log``, adding what it held to the ``.rotated`` record."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return
    lines = data.count(b"\n")
    last = data[: data.rfind(b"\n")].rsplit(b"\n", 1)[-1] if lines else b""
    until = parse_timestamp(last.split(b" ", 1)[0]) or 0
    before = rotated_away(log)
    record: dict[str, int | str] = {
        "lines": before["lines"] + lines,
        "bytes": before["bytes"] + len(data),
        "files": before["files"] + 1,
        "until_ns": max(before["until_ns"], until),
        "max_size": max_size,
        "max_files": max_files,
    }
    if why:
        record["why"] = why
    side = log.with_name(log.name + ROTATED_SUFFIX)
    tmp = side.with_name(side.name + ".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, side)
    if path == log:
        return  # truncated in place by the caller (one file kept)
    path.unlink(missing_ok=True)


def append_note(path: Path, text: str, stream: str = "stderr") -> None:
    """Append one record to a log file from outside a running process group."""
    writer = LogWriter(path, headroom=0)
    try:
        for line in text.splitlines() or [""]:
            writer.add(time.time_ns(), stream, line.encode("utf-8", "replace"))
    finally:
        writer.close()


def _split_long(line: bytes, out: list[tuple[bytes, bool]]) -> bytes:
    """Move ``MAX_LINE``-sized partial chunks of ``line`` to ``out``; return the rest (<= ``MAX_LINE``)."""
    while len(line) > MAX_LINE:
        # Never cut inside a UTF-8 sequence: back off over continuation bytes.
        at = MAX_LINE
        while at > MAX_LINE - 4 and (line[at] & 0xC0) == 0x80:
            at -= 1
        out.append((line[:at], True))
        line = line[at:]
    return line


class LineAssembler:
    """Turns the chunks read from one pipe into lines, keeping an unfinished line for the next chunk."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> list[tuple[bytes, bool]]:
        """Return the ``(line, partial)`` pairs completed by ``data``."""
        out: list[tuple[bytes, bool]] = []
        buf = self._pending + data if self._pending else data
        cut = buf.rfind(b"\n")
        if cut >= 0:
            for line in buf[:cut].split(b"\n"):
                if len(line) > MAX_LINE:
                    line = _split_long(line, out)
                out.append((line, False))
            buf = buf[cut + 1 :]
        if len(buf) > MAX_LINE:
            buf = _split_long(buf, out)
        self._pending = buf
        return out

    def finish(self) -> list[tuple[bytes, bool]]:
        """The unfinished last line, if any, at end of output."""
        rest, self._pending = self._pending, b""
        return [(rest, True)] if rest else []
