"""Whether this process is kubetrain's own program (the `kubetrain` command, a detached supervisor) or someone's
program that uses kubetrain as a library.

Some things are right only in a process kubetrain owns: making it the reaper of the job's orphans
(`backends.local.orphans`) changes how every orphaned descendant of the process is parented, which a user's
program has not asked for. The entry points claim their process; the library never does.
"""

from __future__ import annotations

_claimed = False


def claim_process() -> None:
    """Say that this process is kubetrain's own program, from its entry point, before any job starts."""
    global _claimed
    _claimed = True


def process_is_kubetrains() -> bool:
    """Whether an entry point of kubetrain claimed this process (`claim_process`)."""
    return _claimed


__all__ = ["claim_process", "process_is_kubetrains"]
