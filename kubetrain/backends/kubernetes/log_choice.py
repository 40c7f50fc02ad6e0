"""Which replicas' logs a follow streams: a bounded number, chosen to serve the user.

One log stream costs a connection, a thread and their buffers on this machine and a request the API server
holds open: a job of 1,000 replicas followed stream by stream took 266 MB and 899 threads. As ``kubectl logs
-f`` (``--max-log-requests``, default 5), kubetrain follows at most ``limit`` replicas: rank 0 of each role
first (where most training scripts print), then the next indexes, role by role. The ``--role/--index``
filters say which replicas are candidates; the limit still holds among them. The others are not lost: a
replica that fails or restarts has its last lines read once (the follower does it, when the watch sees it),
and the note says how to see them all.

Pure: no request, no thread.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

DEFAULT_MAX_LOG_REQUESTS = 5
"""As kubectl's ``--max-log-requests``."""

LAST_LINES = 20
"""How many of a not-followed replica's last lines are shown when it fails or restarts."""


def key_of(role: str, index: int) -> str:
    return f"{role}-{index}"


def ranked(replicas: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    """``replicas`` (role, index) in the order they are chosen: index 0 of every role (roles as first seen),
    then index 1 of every role, and so on."""
    order: dict[str, int] = {}
    unique: dict[tuple[str, int], None] = {}
    for role, index in replicas:
        order.setdefault(role, len(order))
        unique[(role, index)] = None
    return sorted(unique, key=lambda ri: (ri[1], order[ri[0]]))


@dataclass
class Choice:
    """The replicas followed (``followed``, keys ``role-index``) among the candidates seen so far."""

    limit: int | None
    followed: set[str]
    candidates: int = 0

    def update(self, replicas: Iterable[tuple[str, int]]) -> bool:
        """Take in the candidates known now (replicas appear as the job's objects and pods do): fill the free
        places in rank order. True when a followed replica was added.

        Bounded, only the first places are ranked (`heapq.nsmallest`): ranking all 10,000 replicas of a job
        made a sort key for each, megabytes for a moment at the start of a big job, to keep five."""
        order: dict[str, int] = {}
        unique: dict[tuple[str, int], None] = {}
        for ri in replicas:
            order.setdefault(ri[0], len(order))
            unique[ri] = None
        self.candidates = max(self.candidates, len(unique))

        def rank(ri: tuple[str, int]) -> tuple[int, int]:
            return ri[1], order[ri[0]]

        if self.limit is None:
            everyone = sorted(unique, key=rank)
        elif len(self.followed) >= self.limit:
            return False
        else:  # enough to fill the free places, whichever of them are followed already
            everyone = heapq.nsmallest(self.limit, unique, key=rank)
        added = False
        for role, index in everyone:
            if self.limit is not None and len(self.followed) >= self.limit:
                break
            key = key_of(role, index)
            if key not in self.followed:
                self.followed.add(key)
                added = True
        return added

    @property
    def left_out(self) -> int:
        return max(0, self.candidates - len(self.followed))

    def note(self, job: str) -> str:
        """One line for stderr: what is followed, and how to see the rest."""
        names = ", ".join(sorted(self.followed, key=_rank_key))
        return (f"following the logs of {len(self.followed)} of {self.candidates} replicas ({names}); a replica that "
                f"fails or restarts shows its last {LAST_LINES} lines. The others: --max-log-requests "
                f"{self.candidates}, or kubetrain logs -f {job} --role ROLE --index N")


def _rank_key(key: str) -> tuple[int, str]:
    role, _, index = key.rpartition("-")
    return int(index), role


def choose(limit: int | None) -> Choice:
    if limit is not None and limit < 1:
        raise ValueError(f"max log requests {limit}: 1 or more")
    return Choice(limit, set())


__all__ = ["DEFAULT_MAX_LOG_REQUESTS", "LAST_LINES", "Choice", "choose", "key_of", "ranked"]
