"""Find and kill every process a local process group started, and the watchdog that does it on a crash.

Process groups are not enough to find all of a replica's processes: torchrun
starts each worker in a new session (``start_new_session=True``), daemons call
``setsid()``, and once a leader is dead its children are reparented to init,
so neither the group nor the parent/child tree leads to them any more. What
they all keep is the environment they inherited. Every replica is therefore
started with ``KUBETRAIN_LOCAL_TAG`` in its environment; the value is a
space-separated list of tags ``<token>:<serial>``, one per enclosing
kubetrain process group (nested kubetrain runs append theirs), ``<token>``
naming the group and ``<serial>`` the one spawn. Any process whose
``/proc/<pid>/environ`` carries a tag is a descendant of that spawn. Only a
process that rebuilds its environment from scratch (``env -i``) or that is
unreadable to us (set-uid) escapes.

Killing goes through a pidfd opened *before* the final environment check, so
a pid that is reused between the scan and the signal is never hit.

Run as a program (``python -I -S _watchdog.py <token>``), this module is the
watchdog: it blocks reading its stdin, a pipe whose only writer is the
supervisor. End of file means the supervisor is gone, however it died
(SIGKILL and the OOM killer included); the watchdog then SIGKILLs every
process tagged with ``<token>`` and exits. It imports nothing but the standard
library so that it starts in about 20 ms and cannot fail on a package import.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from collections.abc import Collection

TAG_VAR = "KUBETRAIN_LOCAL_TAG"
"""`contract.env_names.LOCAL_TAG`, written out: this file also runs as a script outside the package."""
_TAG_PREFIX = TAG_VAR.encode() + b"="


def make_tag(token: str, serial: int) -> str:
    """The tag of one spawn of process group ``token``."""
    return f"{token}:{serial}"


def add_tag(env_value: str | None, tag: str) -> str:
    """Append ``tag`` to an inherited ``KUBETRAIN_LOCAL_TAG`` value, keeping outer groups' tags."""
    return f"{env_value} {tag}" if env_value else tag


def _tags_of(environ: bytes) -> list[bytes]:
    for entry in environ.split(b"\0"):
        if entry.startswith(_TAG_PREFIX):
            return entry[len(_TAG_PREFIX) :].split()
    return []


def _matches(environ: bytes, token: bytes, serials: frozenset[bytes] | None) -> bool:
    if _TAG_PREFIX not in environ:
        return False
    for tag in _tags_of(environ):
        group, _, serial = tag.partition(b":")
        if group == token and (serials is None or serial in serials):
            return True
    return False


def _read_environ(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read()
    except OSError:  # gone, a kernel thread, or not ours to read
        return b""


def signal_tagged(
    token: str,
    sig: int,
    serials: Collection[int] | None = None,
    *,
    keep: dict[int, int] | None = None,
    spare: Collection[int] = (),
) -> int:
    """Send ``sig`` to every live process tagged with ``token`` (only the given spawn ``serials`` if set).

    Returns how many processes were signalled. When ``keep`` is given, the
    pidfds of the signalled processes are stored in it (pid -> pidfd, the
    caller closes them) and processes already in it are not signalled again.
    Processes whose pid is in ``spare`` are left alone.
    """
    token_b = token.encode()
    wanted = None if serials is None else frozenset(str(s).encode() for s in serials)
    me = os.getpid()
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid == me or (keep is not None and pid in keep) or pid in spare:
            continue
        # Cheap filter first; the pidfd and the second read make it race-free.
        if not _matches(_read_environ(pid), token_b, wanted):
            continue
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            # The pidfd pins the process we check now: if it dies and the pid is
            # reused, pidfd_send_signal fails with ESRCH instead of hitting the new one.
            if not _matches(_read_environ(pid), token_b, wanted):
                os.close(pidfd)
                continue
            signal.pidfd_send_signal(pidfd, sig)
        except OSError:
            os.close(pidfd)
            continue
        count += 1
        if keep is not None:
            keep[pid] = pidfd
        else:
            os.close(pidfd)
    return count


def kill_tagged(
    token: str, serials: Collection[int] | None = None, *, wait: float = 0.0, spare: Collection[int] = ()
) -> int:
    """SIGKILL every process tagged with ``token`` (or only ``serials``); return how many were killed.

    With ``wait`` > 0, sweep again until a pass finds nothing new and wait up
    to ``wait`` seconds for the killed processes to be gone, so that children
    forked while the first pass ran are caught too.
    """
    killed: dict[int, int] = {}
    deadline = time.monotonic() + wait
    try:
        while True:
            found = signal_tagged(token, signal.SIGKILL, serials, keep=killed, spare=spare)
            if wait <= 0:
                return len(killed)
            if found == 0:
                break
            if time.monotonic() >= deadline:
                return len(killed)
        _wait_pidfds(list(killed.values()), deadline)
        # A process forked by a victim just before the SIGKILL landed was not
        # visible to the passes above; one more pass after they are dead catches it.
        extra: dict[int, int] = {}
        signal_tagged(token, signal.SIGKILL, serials, keep=extra, spare=spare)
        _wait_pidfds(list(extra.values()), deadline)
        killed.update(extra)
        return len(killed)
    finally:
        for fd in killed.values():
            os.close(fd)


def _wait_pidfds(pidfds: list[int], deadline: float) -> None:
    """Wait until every pidfd reports its process exited, or the deadline passes."""
    pending = set(pidfds)
    poller = select.poll()
    for fd in pending:
        poller.register(fd, select.POLLIN)
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        for fd, _ in poller.poll(left * 1000):
            poller.unregister(fd)
            pending.discard(fd)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: _watchdog.py TOKEN  (stdin: a pipe from the supervisor)", file=sys.stderr)
        return 2
    token = argv[1]
    # Terminal signals aimed at the supervisor must not take the watchdog down
    # with it: its whole point is to outlive the supervisor. (It also runs in
    # its own session, so these only come from an explicit kill.)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    while True:
        try:
            if not os.read(0, 4096):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    kill_tagged(token, wait=10.0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
