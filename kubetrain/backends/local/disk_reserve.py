"""Room kept on a filling disk for the job store's own writes.

A job's final status must be recorded even when its replicas (their checkpoints, their output) filled
the disk. So a file of `RESERVE_BYTES` is created with each job, and given back as soon as a write finds
less than `RESERVE_LOW` free, or a commit fails for lack of room: that write then fits.
"""

from __future__ import annotations

import os
from pathlib import Path

RESERVE_NAME = "jobs.db.reserve"
RESERVE_BYTES = 256 * 1024
RESERVE_LOW = 128 * 1024


class DiskReserve:
    """The reserve file of the store in `root`."""

    def __init__(self, root: Path) -> None:
        self.path = root / RESERVE_NAME
        self._root = root

    def keep_room(self) -> None:
        """Before a write: on a disk nearly full, give the reserve back so that this write fits."""
        try:
            st = os.statvfs(self._root)
        except OSError:
            return
        if st.f_blocks and st.f_bavail * st.f_frsize < RESERVE_LOW:
            self.release()

    def release(self) -> bool:
        """Remove the reserve file; True if there was one."""
        try:
            os.unlink(self.path)
        except OSError:
            return False
        return True

    def ensure(self) -> None:
        """Create the reserve file where there is none (and room for it); never fails."""
        path = self.path
        if path.exists():
            return
        try:
            st = os.statvfs(self._root)
            if st.f_blocks and st.f_bavail * st.f_frsize < RESERVE_BYTES + 2 * RESERVE_LOW:
                return  # taking it now would leave the disk nearly full: the next job tries again
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except OSError:
            return
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        except OSError:
            os.close(fd)
            fd = -1
            path.unlink(missing_ok=True)
        finally:
            if fd >= 0:
                os.close(fd)
