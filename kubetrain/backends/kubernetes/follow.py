"""Following a job by watch: ``wait`` until a condition holds, ``follow`` it to its end (output into a sink,
kubetrain's messages to ``on_event``), ``logs -f``.

Everything here reads one :class:`~.watch.JobWatch` (a list + watch of the workload and of its pods), and
never polls: a job that ends between two looks is never missed. Pending causes visible on the pods are
reported at once; the ones that cost requests (events, Kueue, the flavor's own objects) once replicas
have been Pending a while, then every ``diagnose_every`` seconds.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ...contract.logs import GrepPattern, LogRecord, LogSink
from ...contract.pause import pause_point
from ...status import JobPhase, JobStatus, ReplicaPhase
from .client.errors import KubernetesError
from .client.resources import Resource
from .describe import last_lines, pending_reason
from .flavors import Flavor, flavor_of
from .log_follower import LogFollower
from .logs import Since
from .lookup import Located, PodScope, job_not_found, ordered
from .status_map import PodCache, PodIndex, group_pods, job_status, meta, roles_of

if TYPE_CHECKING:
    from ..logfiles.kept import Keeper
    from .cluster import Cluster
    from .watch import JobWatch

State = Callable[[], tuple[JobStatus | None, PodIndex, dict[str, str | None]]]
"""The job as the watch sees it now: (status or None when its workload is gone, pods by replica,
role → main container)."""


class JobState:
    """The job as the watch sees it now (a `State`), with its flavor resolved once: handed in (a job just
    submitted or located) or read from the first root the watch holds, then kept for every later look.

    Worked out once per change of the watch (the follow loop and the log follower look at the same version:
    one computation serves both), and incrementally: what was worked out per pod is kept until that pod changes
    (:class:`~.status_map.PodCache`), so a look after one pod of 10,000 changed works out one pod again.

    Paced: a look still walks every pod (tens of milliseconds at 10,000), and while pods change by thousands
    (a big job starting) a look at every change would leave the watch's thread too little time to read the
    changes, which then arrive seconds late. So the next look starts no sooner than ``PACE`` times the last
    one's length after it (the watch's thread has the rest); a look is always of the latest version, and a
    reader woken by a change always gets a look at a version at least as new."""

    PACE = 2.0

    def __init__(self, jw: JobWatch, name: str, flavor: Flavor | None = None) -> None:
        self.jw, self.name, self.flavor = jw, name, flavor
        self._cache = PodCache()
        self._lock = threading.Lock()
        self._seen: tuple[int, JobStatus | None, PodIndex, dict[str, str | None]] | None = None
        self._next_look = 0.0

    def __call__(self) -> tuple[JobStatus | None, PodIndex, dict[str, str | None]]:
        with self._lock:  # the follow loop and the log follower's thread share it (and its cache)
            seen = self._seen
            if seen is None or seen[0] != self.jw.version:
                wait = self._next_look - time.monotonic()
                if wait > 0:
                    time.sleep(wait)  # the watch's thread reads on meanwhile (see the class's docstring)
                start = time.monotonic()
                version = self.jw.version  # read before the snapshot: a change during the work is seen next time
                seen = (version, *self._work_out())
                self._seen = seen
                end = time.monotonic()
                self._next_look = end + self.PACE * (end - start)
            _, status, grouped, containers = seen
        # A copy of the status: readers change it (a Pending cause becomes its reason); the rest is read only.
        return (copy.copy(status) if status is not None else None), grouped, containers

    def _work_out(self) -> tuple[JobStatus | None, PodIndex, dict[str, str | None]]:
        workloads, pods, _deleted = self.jw.snapshot()
        if not workloads:
            return None, PodIndex({}, {}), {}
        objs = ordered(workloads)
        if self.flavor is None:
            self.flavor = flavor_of(objs[0])
        roles = roles_of(self.flavor, objs)
        grouped = group_pods(pods, roles, self._cache)
        status = job_status(objs, pods, job_id=self.name, namespace=self.jw.namespace, flavor=self.flavor,
                            grouped=grouped, cache=self._cache)
        return status, grouped, {r.role: r.container for r in roles}


def job_state(jw: JobWatch, name: str, flavor: Flavor | None = None) -> JobState:
    return JobState(jw, name, flavor)


def wait(backend: Cluster, name: str, namespace: str | None, *,
         until: Callable[[JobStatus], bool] | None = None, timeout: float | None = None) -> JobStatus:
    """Block until ``until(status)`` (default: the job has ended). ``until`` sees Pending causes visible on
    the pods (``reason``); the status returned (also on timeout) is explained as by ``status``."""
    until = until or (lambda s: s.phase.is_terminal)
    deadline = None if timeout is None else time.monotonic() + timeout
    with backend.watch(name, namespace) as jw:
        seen = 0
        status: JobStatus | None = None
        state = job_state(jw, name)
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            # Nothing happening is news too: wake when the job would have waited the untouched time.
            idle = backend.until_untouched(status, jw)
            seen = jw.wait_change(seen, timeout=left if idle is None else idle if left is None else min(left, idle))
            if jw.error is not None:
                raise as_error(jw.error)
            timed_out = deadline is not None and time.monotonic() >= deadline
            if not jw.wait_synced(0):
                if timed_out:
                    break
                continue
            status = state()[0]
            if status is None:
                return deleted_status(name, jw, state.flavor)
            workloads, pods, _ = jw.snapshot()
            status = pending_reason(status, backend.diagnose_pending(status, ordered(workloads), pods, reads=False,
                                                                     flavor=state.flavor))
            if until(status) or timed_out:
                if status.phase.is_terminal:
                    status = settle(jw, state, status)
                    workloads, pods, _ = jw.snapshot()
                break
    if status is None:
        return backend.status_in(name, namespace)
    return backend.explain(status, ordered(workloads), pods, flavor=state.flavor)


def follow(
    backend: Cluster,
    name: str,
    namespace: str | None,
    *,
    sink: LogSink | None = None,
    on_event: Callable[[str], None] | None = None,
    timeout: float | None = None,
    cancel_on_interrupt: bool = False,
    resource: Resource | None = None,
    on_status: Callable[[JobStatus], None] | None = None,
    scope: PodScope | None = None,
    flavor: Flavor | None = None,
) -> JobStatus:
    """Follow a job to its end: every replica's output into ``sink``, status changes and Pending causes
    (one line per cause, with a hint) to ``on_event``. Returns the final status. Ctrl-C cancels the job
    when ``cancel_on_interrupt``. ``resource``: the job's workload kind when known (as after a submit), which
    saves looking the job up, and ``flavor`` its flavor (else read from the watched root, once). ``on_status``:
    the job's status each time the watch sees the workload or a pod change (pods scheduled, pulling, starting,
    running, ending), with the Pending causes the pods show."""
    say = on_event or (lambda text: None)
    deadline = None if timeout is None else time.monotonic() + timeout
    jw = backend.watch(name, namespace, resource=resource, scope=scope)
    state = job_state(jw, name, flavor)
    log_thread: threading.Thread | None = None
    follower: LogFollower | None = None
    if sink is not None:
        follower = LogFollower(backend.kube, jw.namespace, jw, state, grace=backend.options.log_grace,
                               max_streams=backend.options.max_log_requests, note=say, job=name,
                               keep=keeper(backend, jw, name, "kubetrain run"))
        out = sink

        def pump() -> None:
            assert follower is not None
            for rec in follower:
                out.record(rec)
                out.flush()

        log_thread = threading.Thread(target=pump, name="kubetrain-logs", daemon=True)
        log_thread.start()
    status: JobStatus | None = None
    try:
        pause_point("kubernetes:following")  # a test hook (env_names.PAUSE_AT): the watch open, Ctrl-C cancels
        status = _follow_loop(backend, jw, state, name, say, deadline, on_status)
    except KeyboardInterrupt:
        if not cancel_on_interrupt:
            raise
        say(f"interrupted: cancelling job {name}")
        status = backend.cancel_in(name, jw.namespace)
    finally:
        if log_thread is not None and follower is not None:
            log_thread.join(backend.options.log_grace + 2.0)
            follower.stop()
        jw.stop()
    if status.phase is JobPhase.FAILED and status.first_failure is not None:
        workloads, pods, _ = jw.snapshot()
        objs = ordered(workloads) if workloads else ordered(list(jw.workloads.deleted.values()))
        roles = roles_of(state.flavor, objs) if objs else []
        status.first_failure.last_lines = last_lines(backend.kube, status, pods, roles)
    return status


def _follow_loop(backend: Cluster, jw: JobWatch, state: JobState, name: str, say: Callable[[str], None],
                 deadline: float | None, on_status: Callable[[JobStatus], None] | None = None) -> JobStatus:
    report = on_status or (lambda status: None)
    seen = 0
    last_phase: JobPhase | None = None
    # Each replica's phase at the last look, by role and index (10,000 names as keys would weigh 1 MB).
    replica_phases: dict[str, list[ReplicaPhase | None]] = {}
    said: set[str] = set()
    # Causes that cost requests (events, Kueue, PodGroups) are looked up once replicas have been Pending for
    # a while, then every `diagnose_every` seconds; what the pods show is reported at once, for free.
    last_read = time.monotonic()
    status: JobStatus | None = None
    while True:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        wait_for = backend.options.diagnose_every if left is None else min(left, backend.options.diagnose_every)
        idle = backend.until_untouched(status, jw)  # nothing happening is news too, once long enough
        seen = jw.wait_change(seen, timeout=wait_for if idle is None else min(wait_for, idle))
        if jw.error is not None:
            raise as_error(jw.error)
        if not jw.wait_synced(0):
            continue
        status, grouped, _ = state()
        if status is None:
            return deleted_status(name, jw, state.flavor)
        if status.phase.is_terminal:
            status = settle(jw, state, status)
        for r in status.replicas:
            phases = replica_phases.setdefault(r.role, [])
            if r.index >= len(phases):
                phases.extend([None] * (r.index + 1 - len(phases)))
            before = phases[r.index]
            if before is not r.phase and r.phase.is_terminal:
                say(f"{r.name} {r.phase.value.lower()}"  # succeeded, failed, cancelled
                    + (f": {r.describe_exit()}" if r.phase is ReplicaPhase.FAILED and r.describe_exit() else ""))
            elif before is not None and before is not r.phase and r.phase is ReplicaPhase.RUNNING and r.restarts:
                say(f"{r.name} restarted ({r.restarts} restart{'s' if r.restarts != 1 else ''})")
            phases[r.index] = r.phase
        if status.phase is not last_phase:
            say(f"job {name} {status.phase.value}" + (f" ({status.reason})" if status.reason else ""))
            last_phase = status.phase
        if status.phase.is_terminal:
            report(status)
            stop_hosting(backend, jw, state.flavor)
            return status
        if any(r.phase is ReplicaPhase.PENDING for r in status.replicas):
            workloads, pods, _ = jw.snapshot()
            reads = time.monotonic() - last_read >= backend.options.diagnose_every
            if reads:
                last_read = time.monotonic()
            diagnoses = backend.diagnose_pending(status, ordered(workloads), pods, reads=reads, flavor=state.flavor,
                                                 grouped=grouped)
            for d in diagnoses:
                line = d.line()
                if line not in said:
                    said.add(line)
                    say(f"pending: {line}")
            pending_reason(status, diagnoses)  # the job's reason: why it waits, as `status` says
        report(status)
        if deadline is not None and time.monotonic() >= deadline:
            return status


def settle(jw: JobWatch, state: State, status: JobStatus, quiet: float = 0.1, timeout: float = 2.0,
           explain: float = 5.0) -> JobStatus:
    """The workload and pod watches are separate streams: when the engine says the job has ended, give
    the pods' last changes a moment to arrive (until every replica has ended, or the pods have been
    quiet for ``quiet`` seconds: pods that host a launcher's processes never end by themselves). A failed
    job whose failed replica has not been seen yet waits longer for it (up to ``explain`` seconds, woken by
    each change, not by a clock): on a busy machine the pod's update can trail the job's, and the failure
    would go unexplained."""
    start = time.monotonic()
    seen = jw.version
    while True:
        unsettled = any(not r.phase.is_terminal and r.reason not in ("NoPod", "NotStarted", "Suspended")
                        for r in status.replicas)
        unexplained = status.phase is JobPhase.FAILED and status.first_failure is None
        if not (unsettled or unexplained):
            return status
        left = start + (explain if unexplained else timeout) - time.monotonic()
        if left <= 0:
            return status
        now = jw.wait_change(seen, timeout=left if unexplained else min(quiet, left))
        if now == seen:
            if not unexplained:
                return status
            continue
        seen = now
        latest = state()[0]
        if latest is not None:
            status = latest


def stop_hosting(backend: Cluster, jw: JobWatch, flavor: Flavor | None) -> None:
    """The root has ended: let its flavor stop what only hosted its processes (the job flavor's other
    roles' Jobs would run on)."""
    workloads, _, _ = jw.snapshot()
    objs = ordered(workloads)
    if objs and flavor is not None:
        flavor.stop_hosts(backend.kube, jw.namespace, objs)


def deleted_status(name: str, jw: JobWatch, flavor: Flavor | None = None) -> JobStatus:
    deleted = list(jw.workloads.deleted.values())
    _, pods, _ = jw.snapshot()
    if deleted:
        return job_status(ordered(deleted), pods, job_id=name, namespace=jw.namespace, deleted=True, flavor=flavor)
    raise job_not_found(name, jw.namespace)


def follow_logs(backend: Cluster, loc: Located, role: str | None, index: int | None, tail: int | None,
                since: Since | None, grep: str | GrepPattern | None,
                stop: threading.Event | None = None,
                note: Callable[[str], None] | None = None,
                hidden: Callable[[LogRecord], bool] | None = None) -> Iterator[LogRecord]:
    """``logs -f``: until the job ends (or ``stop`` is set), across restarts; Pending replicas are waited for.
    At most ``backend.options.max_log_requests`` replicas are streamed; ``note`` hears which, when some are left out."""
    jw = backend.watch(loc.name, loc.namespace, resource=loc.resource, scope=loc.pods)
    try:
        jw.wait_synced(30)
        follower = LogFollower(backend.kube, loc.namespace, jw, job_state(jw, loc.name, loc.flavor), role=role,
                               index=index, tail=tail, since=since, grep=grep, grace=backend.options.log_grace,
                               stop=stop, max_streams=backend.options.max_log_requests, note=note, job=loc.name,
                               keep=keeper(backend, jw, loc.name, "kubetrain logs -f"), hidden=hidden)
        yield from follower
    finally:
        jw.stop()


def keeper(backend: Cluster, jw: JobWatch, name: str, by: str) -> Keeper | None:
    """Where a follower keeps what it reads of the job's logs on this machine (`logfiles.kept`), filed under
    the cluster's context, the namespace and the job's uid (read from the watch at the first line); None when
    `KUBETRAIN_KEPT_LOGS_MAX_SIZE` is 0."""
    from ..logfiles.kept import Keeper, max_bytes_from_env

    limit = max_bytes_from_env()
    if limit <= 0:
        return None

    def uid() -> str | None:
        workloads = jw.snapshot()[0]
        if not workloads:
            return None
        return str(meta(ordered(workloads)[0]).get("uid") or "") or None

    return Keeper(backend.context, jw.namespace, name, uid, by=by, max_bytes=limit)


def as_error(exc: BaseException) -> KubernetesError:
    if isinstance(exc, KubernetesError):
        return exc
    return KubernetesError(f"watching the job failed: {type(exc).__name__}: {exc}")


__all__ = ["JobState", "State", "as_error", "deleted_status", "follow", "follow_logs", "job_state", "settle",
           "stop_hosting", "wait"]
