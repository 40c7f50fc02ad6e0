"""The status model as people read it: kubectl's ages, the `kubetrain list` table, `kubetrain describe`.

Every backend's status reads the same on the terminal, because it is the same `JobStatus` printed by the
same code. Standard library only, like the model (`kubetrain.status`).
"""

from __future__ import annotations

import time as _time
from collections.abc import Iterable, Sequence

from .status import JobPhase, JobStatus, ReplicaStatus


def format_age(seconds: float | None) -> str:
    """kubectl's age format: "45s", "5m12s", "42m", "3h5m", "20h", "2d", "3d4h", "400d", "2y10d".

    Same thresholds as Kubernetes' ``HumanDuration``, so ``kubetrain list`` reads like
    ``kubectl get``. ``None`` (time unknown) gives "<unknown>".
    """
    if seconds is None:
        return "<unknown>"
    secs = int(seconds)
    if secs < -1:
        # A clock skew of a second is "now"; more means a wrong clock somewhere.
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 120:
        return f"{secs}s"
    minutes = secs // 60
    if minutes < 10:
        s = secs % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = secs // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def _age_since(t: float | None, now: float) -> str:
    return format_age(None if t is None else now - t)


def _columns(rows: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    """Left-aligned columns separated by three spaces, as kubectl prints them."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [cell.ljust(w) for cell, w in zip(row, widths, strict=True)]
        out.append((indent + "   ".join(cells)).rstrip())
    return out


def _or_none(value: object) -> str:
    return "<none>" if value is None or value == "" else str(value)


def format_table(statuses: Iterable[JobStatus], wide: bool = False, now: float | None = None) -> str:
    """``kubetrain list``: NAME PHASE REPLICAS RESTARTS AGE (+ BACKEND NAMESPACE REASON when wide).

    NAME is the job id, the handle every other command takes. "No jobs found." when empty.
    """
    now = _time.time() if now is None else now
    header = ["NAME", "PHASE", "REPLICAS", "RESTARTS", "AGE"]
    if wide:
        header += ["BACKEND", "NAMESPACE", "REASON"]
    rows = [header]
    for s in statuses:
        row = [
            s.job_id,
            s.phase_text(),
            s.replicas_column(),
            str(s.total_restarts()),
            _age_since(s.created_at, now),
        ]
        if wide:
            row += [s.backend, _or_none(s.namespace), _or_none(s.reason)]
        rows.append(row)
    if len(rows) == 1:
        return "No jobs found."
    return "\n".join(_columns(rows))


def _timestamp(t: float | None, now: float) -> str:
    if t is None:
        return "<none>"
    stamp = _time.strftime("%Y-%m-%d %H:%M:%S %z", _time.localtime(t))
    return f"{stamp} ({format_age(now - t)} ago)"


def _pid_host(r: ReplicaStatus) -> str:
    if r.pid is not None and r.host:
        return f"{r.pid}@{r.host}"
    if r.pid is not None:
        return str(r.pid)
    return r.host or "-"


EVERY_REPLICA_UP_TO = 20
"""`kubetrain status` prints a line per replica up to this many; past it, a line per role with the replicas
that are not in that role's usual state (`-o wide`: every replica)."""


def replica_lines(status: JobStatus, wide: bool = False) -> list[str]:
    """The replicas as `kubetrain status` shows them: a line each for a small job (or `wide`); for a big one a
    line per role, "worker: 998 Running", then every replica of that role that is in another state, so a
    thousand replicas take a few lines and the odd one out is never hidden."""
    def detail(r: ReplicaStatus) -> str:
        return r.describe_exit() or (r.reason or "")

    if wide or len(status.replicas) <= EVERY_REPLICA_UP_TO:
        return [f"  {r.name:<16} {r.phase.value:<10} {detail(r)}".rstrip() for r in status.replicas]
    by_role: dict[str, list[ReplicaStatus]] = {}
    for r in status.replicas:
        by_role.setdefault(r.role, []).append(r)
    lines = []
    for role, replicas in by_role.items():
        states: dict[tuple[str, str], int] = {}
        for r in replicas:
            key = (r.phase.value, detail(r))
            states[key] = states.get(key, 0) + 1
        usual = max(states, key=lambda k: states[k])
        shown = f"{usual[0]} ({usual[1]})" if usual[1] else usual[0]
        lines.append(f"  {role}: {states[usual]} of {len(replicas)} {shown}")
        lines += [f"    {r.name:<16} {r.phase.value:<10} {detail(r)}".rstrip()
                  for r in replicas if (r.phase.value, detail(r)) != usual]
    lines.append(f"  (a line per replica: kubetrain status {status.job_id} -o wide)")
    return lines


def format_describe(status: JobStatus, now: float | None = None) -> str:
    """``kubetrain describe``: everything about one job, in kubectl-describe sections."""
    now = _time.time() if now is None else now
    s = status
    restarts = str(s.backoff_count) if s.backoff_limit is None else f"{s.backoff_count}/{s.backoff_limit}"
    fields: list[tuple[str, str]] = [
        ("Name", s.job_id),
        ("Backend", s.backend),
    ]
    if s.namespace is not None:
        fields.append(("Namespace", s.namespace))
    fields += [
        ("Phase", s.phase_text()),
        ("Reason", _or_none(s.reason)),
        ("Message", _or_none(s.message)),
        ("Restarts", restarts),
        ("Created", _timestamp(s.created_at, now)),
        ("Started", _timestamp(s.started_at, now)),
        ("Finished", _timestamp(s.finished_at, now)),
    ]
    if s.started_at is not None:
        end = s.finished_at if s.finished_at is not None else now
        fields.append(("Duration", format_age(end - s.started_at)))
    width = max(len(k) for k, _ in fields) + 2
    lines = [f"{(k + ':').ljust(width)}{v}" for k, v in fields]

    lines.append("Replicas:")
    if s.replicas:
        rows = [["ROLE", "INDEX", "PHASE", "EXIT", "RESTARTS", "PID/HOST", "REASON"]]
        for r in s.replicas:
            rows.append(
                [
                    r.role,
                    str(r.index),
                    str(r.phase),
                    r.describe_exit() or "-",
                    str(r.restarts),
                    _pid_host(r),
                    r.reason or "-",
                ]
            )
        lines += _columns(rows, indent="  ")
    else:
        lines.append("  <none>")

    lines.append("Counts:")
    counts = s.counts()
    if counts:
        rows = [["ROLE", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN"]]
        for role, c in counts.items():
            numbers = (c.pending, c.running, c.succeeded, c.failed, c.cancelled, c.unknown)
            rows.append([role, *(str(n) for n in numbers)])
        lines += _columns(rows, indent="  ")
    else:
        lines.append("  <none>")

    lines.append("Conditions:")
    if s.conditions:
        rows = [["TYPE", "STATUS", "REASON", "TIME", "MESSAGE"]]
        for cond in s.conditions:
            stamp = _time.strftime("%Y-%m-%d %H:%M:%S", _time.localtime(cond.time))
            rows.append([cond.type, str(cond.status), cond.reason or "-", stamp, cond.message or ""])
        lines += _columns(rows, indent="  ")
    else:
        lines.append("  <none>")

    if s.first_failure is not None:
        if s.phase is JobPhase.FAILED:
            lines.append("Failure:")
            lines += ["  " + line for line in s.first_failure.explain(s.job_id).splitlines()]
        else:  # the job recovered (restarted) or is still running: a past failure, not the job's outcome
            lines.append("Last failure:")
            explained = s.first_failure.explain().splitlines()
            lines += ["  " + s.first_failure.headline()] + ["  " + line for line in explained[1:]]
    return "\n".join(lines)
