"""Following replica logs (``logs -f``, an attached run): `LogFollower`, driven by the job's watch
(:class:`~.watch.JobWatch`), not by polling:

- a replica whose pod does not exist yet, is unscheduled or whose container has not started is waited
  for (it is not an error);
- when a stream ends while the job goes on (the container restarted, the pod was replaced, the
  connection dropped), it is opened again on the replica's current container, from the last timestamp
  seen, and lines already printed are skipped (``sinceTime`` has second precision: equal timestamps are
  counted);
- it ends when the job has ended and every replica's last container has been read to its end (pods
  that only host a launcher's processes and never end are closed after a grace period).

Reading a log once, and the line format, are in :mod:`.logs`, below this module.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...contract.logs import (
    GrepPattern,
    LogRecord,
    format_seconds,
    make_filter,
)
from ...status import JobStatus
from .client.errors import ApiError
from .client.kube import Kube
from .log_choice import LAST_LINES, Choice, choose, key_of
from .status_map import Pod, PodIndex, main_container_status
from .workload import meta

if TYPE_CHECKING:
    from ..logfiles.kept import Keeper

from .logs import LogTarget, Since, close_response, iter_stream, tail_start
from .logs import since_seconds as seconds_back

# --------------------------------------------------------------------------------------------- follow


@dataclass
class _End:
    key: str
    uid: str
    error: BaseException | None


@dataclass
class _Tail:
    """The end of a one-shot read of a not-followed replica's last lines."""


@dataclass
class _Pod:
    """One pod of a replica (a replica has several when pods are replaced or a gang restarts)."""

    uid: str
    #: restartCount of the newest container instance read (-1: none yet)
    opened_restarts: int = -1
    finished: bool = False
    #: our stream of it ended (at this monotonic time) and we wait to see why; 0: it did not
    ended_at: float = 0.0
    # What a re-read skips (timestamps are the pod's node's: compared within one pod only).
    last_ns: int = 0
    at_last_ns: int = 0  #: how many lines carried exactly ``last_ns``
    skip_equal: int = 0  #: lines at ``last_ns`` still to skip on a re-read


#: How long a stream's end waits for the watch to explain it (the container ended or restarted) before the
#: log is opened again anyway (the server ended the stream, the connection dropped).
UNEXPLAINED_END_WAIT = 1.0


@dataclass
class _Replica:
    key: str
    active: Any = None  #: the response a thread reads, while one is open
    active_uid: str = ""
    opened_once: bool = False
    pods: dict[str, _Pod] = field(default_factory=dict)
    #: pods that had ended before the follow began: history, not followed
    history: set[str] = field(default_factory=set)


def _container_state(pod: Pod, container: str | None) -> tuple[bool, bool, int]:
    """(a container instance has started, it is running now, restartCount)."""
    cs = main_container_status(pod, container) or {}
    state = cs.get("state") or {}
    restarts = int(cs.get("restartCount") or 0)
    if state.get("running"):
        return True, True, restarts
    if state.get("terminated") or (cs.get("lastState") or {}).get("terminated"):
        return True, False, restarts
    return False, False, restarts


def _phase(pod: Pod) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


class LogFollower:
    """``logs -f`` over a :class:`~.watch.JobWatch`: yields the records of every selected replica until the
    job has ended and each replica's containers have been read to their end.

    Per replica, its pods are read oldest first, one stream at a time: a pod that replaced another (job
    flavor), or the pods of a gang restart, follow the lines of the one before. A container that
    restarted while we were not reading it is read through ``previous`` first.

    At most ``max_streams`` replicas are followed (:mod:`.log_choice`: rank 0 of each role first; None: every
    one); ``note`` is told once which, when some are left out. A replica left out that fails or restarts has
    its last lines read once, when the watch sees it (a failed container, or the one before a restart)."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        watch: Any,
        state: Callable[[], tuple[JobStatus | None, PodIndex, dict[str, str | None]]],
        *,
        role: str | None = None,
        index: int | None = None,
        tail: int | None = None,
        since: Since | None = None,
        grep: str | GrepPattern | None = None,
        grace: float = 5.0,
        stop: threading.Event | None = None,
        max_streams: int | None = None,
        note: Callable[[str], None] | None = None,
        job: str = "",
        keep: Keeper | None = None,
        hidden: Callable[[LogRecord], bool] | None = None,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.watch = watch
        self.state = state
        self.role, self.index, self.tail = role, index, tail
        self.filter = make_filter(since, grep=grep)
        self.grace = grace
        self._q: queue.Queue[object] = queue.Queue()
        self._replicas: dict[str, _Replica] = {}
        self._stopped = threading.Event()
        self._asked_to_stop = stop
        """Set by the reader (another thread) to end the following: the watcher below notices it."""
        self._first_step = True
        self._choice: Choice = choose(max_streams)
        self._note, self._noted, self._job = note, False, job
        #: not-followed pods' container instances already shown (uid, restartCount), and each pod's
        #: restartCount when first seen (restarts before the follow began are history)
        self._shown: set[tuple[str, int]] = set()
        self._restarts_seen: dict[str, int] = {}
        self._tails_running = 0
        self._sizes = (-1, -1)
        #: replica → its current pod, or (current pod, earlier pods), as last looked at (the objects: a change
        #: makes new ones)
        self._looked: dict[tuple[str, int], Pod | tuple[Pod, list[Pod]]] = {}
        self._tail_pool: ThreadPoolExecutor | None = None
        self._keep = keep
        """Where every line read is kept (before the filters: the kept log is the replica's, not this
        reader's view of it), for `logs` once the pods are gone; closed when the follow ends."""
        self._hidden = hidden
        """Lines the caller leaves out (metric lines): `tail` does not count them, as the one-shot read does not."""

    def stop(self) -> None:
        self._stopped.set()
        self._q.put(None)

    def _watch_changes(self, seen: int) -> None:
        """Wake the loop on each change after version ``seen``: the version read before the loop's first look,
        not when this thread gets to run (a change in between would otherwise wake nobody, and a replica seen
        Pending by that look would never be opened)."""
        while not self._stopped.is_set():
            if self._asked_to_stop is not None and self._asked_to_stop.is_set():
                self.stop()  # wakes the main loop, which then ends
                return
            now = self.watch.wait_change(seen, timeout=1.0)
            if now != seen:
                seen = now
                self._q.put("changed")

    # -- opening streams ----------------------------------------------------------------------------

    def _open(self, rep: _Replica, pod: Pod, container: str | None, *, follow: bool, restarts: int,
              previous_first: bool) -> None:
        m = meta(pod)
        uid, name = m.get("uid", ""), m.get("name", "")
        ps = rep.pods[uid]
        first = not rep.opened_once
        since_time = format_seconds(ps.last_ns) if ps.last_ns else None
        since_seconds = seconds_back(self.filter.since) if first and since_time is None else None
        tail = self.tail if first else None
        rep.opened_once = True
        ps.skip_equal = ps.at_last_ns
        ps.opened_restarts = restarts
        rep.active_uid = uid
        rep.active = True  # reserved until the thread has its response

        def pump() -> None:
            error: BaseException | None = None
            try:
                if previous_first:
                    try:
                        prev = self.kube.pod_log(name, self.namespace, container=container, previous=True,
                                                 since_time=since_time)
                        for rec in iter_stream(prev, rep.key):
                            self._q.put((uid, rec))
                    except ApiError:
                        pass  # no previous instance after all
                lines, back, after, start, equal = tail, since_seconds, since_time, None, 0
                if tail and (self.filter.grep is not None or self._hidden is not None):
                    # tailLines counts the lines left out too: start where the last `tail` lines shown begin.
                    start = tail_start(self.kube, self.namespace, LogTarget(rep.key, name, container), tail,
                                       self._visible, since_seconds)
                    lines = None
                    if start is not None:
                        back, after = None, format_seconds(start.time_ns)
                resp = self.kube.pod_log(name, self.namespace, container=container, follow=follow,
                                         tail_lines=lines, since_seconds=back, since_time=after)
                rep.active = resp
                if self._stopped.is_set():
                    close_response(resp)
                for rec in iter_stream(resp, rep.key):
                    if start is not None and start.skips(rec, equal):
                        equal += rec.time_ns == start.time_ns
                        continue
                    self._q.put((uid, rec))
                    if self._stopped.is_set():
                        break
            except Exception as exc:  # a refused request or a dropped stream: the main loop decides
                error = exc
            self._q.put(_End(rep.key, uid, error))

        threading.Thread(target=pump, name=f"log-{rep.key}", daemon=True).start()

    def _visible(self, rec: LogRecord) -> bool:
        return self.filter.accepts(rec) and (self._hidden is None or not self._hidden(rec))

    def _is_new(self, uid: str, rec: LogRecord) -> bool:
        """False for a line already read (a re-read of the same pod)."""
        ps = self._replicas[rec.key].pods[uid]
        if rec.time_ns < ps.last_ns:
            return False
        if rec.time_ns == ps.last_ns:
            if ps.skip_equal > 0:
                ps.skip_equal -= 1
                return False
            ps.at_last_ns += 1
        else:
            ps.last_ns, ps.at_last_ns, ps.skip_equal = rec.time_ns, 1, 0
        return True

    def _step(self, status: JobStatus | None, grouped: PodIndex, containers: dict[str, str | None]) -> bool:
        """Open what can be opened; True when nothing is left to read."""
        ended = status is None or status.phase.is_terminal
        first_step, self._first_step = self._first_step, False
        outstanding = self._tails_running > 0
        replicas = status.replicas if status is not None else []
        if self._keep is not None and replicas:
            self._keep.replicas = max(self._keep.replicas, len(replicas))
        # The candidates are ranked again only when their number moves (replicas appear as the job's objects and
        # pods do; the choice only grows): ranking 10,000 replicas at every step was most of a step's time.
        sizes = (len(replicas), len(grouped.current))
        if sizes != self._sizes:
            self._sizes = sizes
            # Streamed, not listed: 10,000 replicas' places at once were a megabyte for a moment.
            every = itertools.chain(((r.role, r.index) for r in replicas), grouped.current)
            self._choice.update(ri for ri in every if self._selects(*ri))
        if not self._noted and status is not None and self._choice.left_out and self._note is not None:
            self._noted = True
            self._note(self._choice.note(self._job))
        # Replicas not followed: only those whose pods changed since the last step are looked at (the watch's
        # state hands out the same pod objects until a pod changes), for a failure or a restart to show.
        looked = self._looked
        for ri, current in grouped.current.items():
            earlier = grouped.earlier.get(ri)
            seen = current if not earlier else (current, earlier)  # the pair only where there are earlier pods
            before = looked.get(ri)
            if before is seen or (earlier and isinstance(before, tuple) and before[0] is current
                                  and before[1] is earlier):
                continue
            looked[ri] = seen
            key = key_of(*ri)
            if self._selects(*ri) and key not in self._choice.followed:
                self._show_last_lines(key, [*(earlier or []), current], containers.get(ri[0]), first_step)
        followed = sorted(ri for ri in map(_split_key, self._choice.followed) if ri in grouped.current)
        for role, index in followed:
            current = grouped.current[(role, index)]
            key = key_of(role, index)
            container = containers.get(role)
            pods = [*grouped.earlier.get((role, index), []), current]
            rep = self._replicas.setdefault(key, _Replica(key))
            if first_step:
                rep.history = {meta(p).get("uid", "") for p in pods[:-1]}
            if rep.active is not None:
                outstanding = True
                continue
            for pod in pods:
                uid = meta(pod).get("uid", "")
                if uid in rep.history:
                    continue
                started, running, restarts = _container_state(pod, container)
                is_current = pod is current
                if uid not in rep.pods:
                    # Following starts at the container running now; instances that ended before are history.
                    rep.pods[uid] = _Pod(uid, opened_restarts=restarts - 1 if first_step else -1)
                ps = rep.pods[uid]
                if ps.finished and restarts <= ps.opened_restarts:
                    continue
                if not started:
                    if is_current and not ended and _phase(pod) not in ("Succeeded", "Failed"):
                        outstanding = True  # Pending: wait for it
                        break
                    ps.finished = True
                    continue
                previous_first = restarts >= 1 and ps.opened_restarts < restarts - 1  # a restart we missed
                if ps.ended_at:
                    # Our stream ended: the container ended, restarted, or the stream was cut. The watch
                    # tells which, usually within milliseconds; until it does, wait (bounded).
                    if _phase(pod) in ("Succeeded", "Failed") or not is_current or (
                            not running and restarts <= ps.opened_restarts):
                        ps.finished, ps.ended_at = True, 0.0
                        continue
                    if restarts <= ps.opened_restarts and time.monotonic() - ps.ended_at < UNEXPLAINED_END_WAIT:
                        outstanding = True
                        break
                    # It restarted (or the end stays unexplained): the API may already serve a newer instance
                    # than the watch shows, so the one before it is read too (from the last second we have,
                    # lines already shown skipped).
                    previous_first = True
                    ps.ended_at = 0.0
                follow = running and is_current and not ended
                self._open(rep, pod, container, follow=follow, restarts=restarts, previous_first=previous_first)
                outstanding = True
                break
        return not outstanding

    def _selects(self, role: str, index: int) -> bool:
        return (self.role is None or role == self.role) and (self.index is None or index == self.index)

    def _show_last_lines(self, key: str, pods: list[Pod], container: str | None, first_step: bool) -> None:
        """A replica not followed: read the last lines of a container instance the watch shows failed (exited
        non-zero, or its pod Failed) or restarted, once per instance. Status is the watch's: nothing here
        decides what happened to the replica, only what to show of it."""
        for pod in pods:
            uid, name = meta(pod).get("uid", ""), meta(pod).get("name", "")
            cs = main_container_status(pod, container) or {}
            restarts = int(cs.get("restartCount") or 0)
            seen = self._restarts_seen.get(uid, restarts if first_step else 0)
            terminated = (cs.get("state") or {}).get("terminated") or {}
            failed = _phase(pod) == "Failed" or int(terminated.get("exitCode") or 0) != 0
            if failed and (uid, restarts) not in self._shown:
                self._shown.add((uid, restarts))
                self._read_tail(key, name, container, previous=False)
            for instance in range(seen, restarts):  # each instance that ended in a restart, once
                if (uid, instance) not in self._shown:
                    self._shown.add((uid, instance))
                    if instance == restarts - 1:  # the API keeps the one before the current container only
                        self._read_tail(key, name, container, previous=True)
            if max(seen, restarts):  # kept for the pods that restarted only: 0 is what a pod not kept reads
                self._restarts_seen[uid] = max(seen, restarts)

    def _read_tail(self, key: str, pod: str, container: str | None, *, previous: bool) -> None:
        if self._tail_pool is None:  # few threads, however many replicas fail at once
            self._tail_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="log-tail")
        self._tails_running += 1

        def read() -> None:
            try:
                resp = self.kube.pod_log(pod, self.namespace, container=container, previous=previous,
                                         tail_lines=LAST_LINES)
                for rec in iter_stream(resp, key):
                    self._q.put(rec)
            except Exception:  # gone, or no instance to read: the watch still reports the failure
                pass
            self._q.put(_Tail())

        self._tail_pool.submit(read)

    def _ended(self, end: _End) -> None:
        rep = self._replicas[end.key]
        rep.active, rep.active_uid = None, ""
        rep.pods[end.uid].ended_at = time.monotonic()

    def _next_deadline(self) -> float | None:
        """Seconds until an unexplained stream end is due to be reopened, if any waits."""
        waits = [ps.ended_at + UNEXPLAINED_END_WAIT for rep in self._replicas.values() for ps in rep.pods.values()
                 if ps.ended_at and not ps.finished]
        return max(0.0, min(waits) - time.monotonic()) if waits else None

    # -- the loop -----------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[LogRecord]:
        self.watch.wait_synced(60.0)
        watcher = threading.Thread(target=self._watch_changes, args=(self.watch.version,), name="log-watch",
                                   daemon=True)
        watcher.start()
        ended_at: float | None = None
        try:
            while not self._stopped.is_set():
                status, grouped, containers = self.state()
                done = self._step(status, grouped, containers)
                ended = status is None or status.phase.is_terminal
                if ended and ended_at is None:
                    ended_at = time.monotonic()
                if ended and done:
                    return
                timeout = self._next_deadline()
                if ended_at is not None:
                    left = max(0.0, self.grace - (time.monotonic() - ended_at))
                    if left == 0.0:
                        return  # the job is over; what still streams hosts a launcher's processes
                    timeout = left if timeout is None else min(timeout, left)
                item = self._get(timeout if timeout is None else max(timeout, 0.001))
                keep = self._keep
                while item is not None:
                    if isinstance(item, tuple):
                        uid, rec = item
                        if self._is_new(uid, rec):
                            if keep is not None:
                                keep.add(rec)
                            if self.filter.accepts(rec):
                                yield rec
                    elif isinstance(item, LogRecord):  # a not-followed replica's last lines
                        if keep is not None:
                            keep.add(item)
                        if self.filter.accepts(item):
                            yield item
                    elif isinstance(item, _Tail):
                        self._tails_running -= 1
                    elif isinstance(item, _End):
                        self._ended(item)
                    item = self._get(0)
                if keep is not None:
                    keep.flush()  # nothing more to read for now: what was read is on disk
        finally:
            self.stop()
            if self._keep is not None:
                self._keep.close()
            if self._tail_pool is not None:
                self._tail_pool.shutdown(wait=False, cancel_futures=True)
            for rep in self._replicas.values():
                if rep.active is not None and rep.active is not True:
                    close_response(rep.active)

    def _get(self, timeout: float | None) -> object:
        try:
            return self._q.get_nowait() if timeout == 0 else self._q.get(timeout=timeout)
        except queue.Empty:
            return None


def _split_key(key: str) -> tuple[str, int]:
    role, _, index = key.rpartition("-")
    return role, int(index)


__all__ = ["LogFollower"]
