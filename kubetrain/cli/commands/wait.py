"""`kubetrain wait`: block until jobs reach a condition or phase, as `kubectl wait` does for any resource.

`--for=condition=NAME[=true|false]` (a phase, or a condition `describe` lists: Running, Succeeded, Failed,
Cancelled, Suspended, Restarting, ...), `--for=phase=NAME`, `--for=delete`. Exit status as kubectl's: 0 when
every job met it, 1 when one did not within `--timeout` (default 30s, as kubectl: 0 checks once, a negative
one waits a week) or cannot be read. Unlike kubectl, a job that has ended without meeting it is reported at
once (a Failed job will never be Succeeded): nobody waits out a timeout for an answer already known.

No polling loop of its own when the backend has a change feed (`Backend.changes`: the local store's commits,
the cluster's watch): each change wakes it; a slow re-check stays as a backstop.
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
import time
from typing import TYPE_CHECKING, NamedTuple

from ...contract.errors import EXIT_USAGE, KubetrainError
from ..errors import CliError
from ..options import add_backend, open_backend_for

if TYPE_CHECKING:
    from ...backends.base import Backend
    from ...status import JobStatus

EPILOG = """\
examples:
  kubetrain wait 3f2a --for=condition=Succeeded --timeout 10m
  kubetrain wait demo-x7k2q --for=condition=Running --backend k8s -n ml
  kubetrain wait 3f2a 9c1e --for=phase=Succeeded --timeout=-1     # both, however long it takes
  kubetrain wait 3f2a --for=delete

Exit status: 0 every job met the condition, 1 one did not (timed out, ended otherwise, not found),
2 bad input, 130/143 interrupted."""

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Cancelled", "Suspended")
CONDITIONS = (*PHASES, "Created", "Restarting", "DeadlineExceeded", "ReplicaLost", "Scaled", "LogTruncated")
"""What `--for=condition=` is offered (completion, help); any condition type a backend writes is taken."""
ALIASES = {"complete": "Succeeded", "completed": "Succeeded"}
"""Kubernetes Job's name for success, as `kubectl wait --for=condition=Complete job/x` writes it."""

DEFAULT_TIMEOUT = 30.0
"""kubectl's default."""
FOREVER = 7 * 24 * 3600.0
"""A negative --timeout: kubectl's "a week"."""
RECHECK = 2.0
"""Seconds between checks when no change has woken us: a backstop for a change feed that missed one."""
RECHECK_UNFED = 0.25
"""...and when the backend's change feed could not start."""


class Wanted(NamedTuple):
    kind: str  # "condition", "phase" or "delete"
    name: str = ""
    value: bool = True

    def __str__(self) -> str:
        if self.kind == "delete":
            return "delete"
        return f"{self.kind}={self.name}" + ("" if self.value else "=false")


def parse_for(text: str) -> Wanted:
    """`--for`'s value, as kubectl writes it."""
    if text == "delete":
        return Wanted("delete")
    kind, _, rest = text.partition("=")
    if kind == "condition" and rest:
        name, _, value = rest.partition("=")
        if value.lower() not in ("", "true", "false"):
            raise CliError(f"--for={text}: the condition's value is true or false, not {value!r}", EXIT_USAGE)
        name = ALIASES.get(name.lower(), name)
        known = {c.lower(): c for c in CONDITIONS}
        return Wanted("condition", known.get(name.lower(), name), value.lower() != "false")
    if kind == "phase" and rest:
        phase = {p.lower(): p for p in PHASES}.get(ALIASES.get(rest.lower(), rest).lower())
        if phase is None:
            raise CliError(f"--for={text}: a job's phase is one of {', '.join(PHASES)}", EXIT_USAGE)
        return Wanted("phase", phase)
    raise CliError(
        f"--for={text}: give condition=NAME[=false] (e.g. condition=Succeeded), phase=NAME or delete", EXIT_USAGE
    )


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """An argparse type: kubectl's durations (30s, 10m, 1h30m, 500ms), a bare number in seconds; negative:
    a week."""
    body = text.strip()
    sign = -1.0 if body.startswith("-") else 1.0
    body = body.lstrip("+-")
    try:
        return sign * float(body)
    except ValueError:
        pass
    parts = _DURATION.findall(body)
    if not parts or "".join(n + u for n, u in parts) != body:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: write e.g. 30s, 10m, 1h30m or 0")
    return sign * sum(float(n) * _UNIT[u] for n, u in parts)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("jobs", metavar="ID", nargs="+", help="job ids (locally, unambiguous prefixes will do)")
    p.add_argument(
        "--for",
        dest="wanted",
        required=True,
        type=str,
        metavar="CONDITION",
        help=f"condition=NAME[=false] (a phase or a condition: {', '.join(CONDITIONS[:7])}, ...; Complete is "
        "Succeeded), phase=NAME, or delete",
    )
    p.add_argument(
        "--timeout",
        type=duration,
        default=DEFAULT_TIMEOUT,
        metavar="DURATION",
        help="how long to wait (default 30s, as kubectl; 0: check once; negative: a week), e.g. 10m, 1h30m",
    )
    add_backend(p, "wait")


class Verdict(NamedTuple):
    met: bool
    final: bool
    """Will never change: met, or the job ended (or is gone) without meeting it."""
    line: str
    job: str = ""
    """The job's full id (a local prefix resolved): one job named twice is said once."""


def verdict(backend: Backend, job_id: str, wanted: Wanted) -> Verdict:
    """Where `job_id` stands against `wanted` now."""
    try:
        status = backend.status(job_id)
    except KubetrainError as exc:
        if isinstance(exc, LookupError):
            if wanted.kind == "delete":
                return Verdict(True, True, f"job/{job_id} deleted")
            return Verdict(False, True, f"error: {exc}")
        raise
    name = status.job_id
    if wanted.kind == "delete":
        return Verdict(False, False, "")
    met = holds(status, wanted)
    if met:
        return Verdict(True, True, f"job/{name} condition met", name)
    if status.phase.is_terminal:  # nothing changes any more: say so now, not at the timeout
        why = f": {status.reason or ''} {status.message or ''}".rstrip(": ") if status.phase.value == "Failed" else ""
        return Verdict(
            False, True, f"error: job/{name} is {status.phase.value}{why}; it will never meet {wanted}", name
        )
    return Verdict(False, False, "")


def holds(status: JobStatus, wanted: Wanted) -> bool:
    if wanted.kind == "phase":
        return status.phase.value == wanted.name
    name = wanted.name.lower()
    true = status.phase.value.lower() == name or any(
        c.type.lower() == name and c.status.value == "True" for c in status.conditions
    )
    return true == wanted.value


def run(args: argparse.Namespace) -> int:
    wanted = parse_for(args.wanted)
    timeout = FOREVER if args.timeout < 0 else args.timeout
    deadline = time.monotonic() + timeout
    changed = threading.Event()
    failed = 0
    said: set[str] = set()
    with open_backend_for(args) as backend:
        try:
            feed = backend.changes(changed.set)
        except (KubetrainError, NotImplementedError, OSError):
            feed = None  # checked every RECHECK_UNFED seconds instead
        try:
            waiting = list(dict.fromkeys(args.jobs))
            while True:
                changed.clear()  # before reading: a change during the reads wakes the next wait
                for job_id in list(waiting):
                    seen = verdict(backend, job_id, wanted)
                    if seen.final:
                        waiting.remove(job_id)
                        if seen.job and seen.job in said:
                            continue
                        said.add(seen.job)
                        print(seen.line, file=sys.stdout if seen.met else sys.stderr, flush=True)
                        failed += not seen.met
                left = deadline - time.monotonic()
                if not waiting or left <= 0:
                    break
                unfed = feed is None or feed.error is not None
                changed.wait(min(left, RECHECK_UNFED if unfed else RECHECK))
        finally:
            if feed is not None:
                feed.stop()
    for job_id in waiting:
        print(f"error: timed out waiting for the condition on job/{job_id} ({wanted})", file=sys.stderr)
    return 1 if failed or waiting else 0


__all__ = ["duration", "parse_for"]
