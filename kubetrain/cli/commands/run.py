"""`kubetrain run`: a job from a file or from a command line, attached (default) or detached, on any backend."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...contract.choices import FRAMEWORKS
from ...contract.errors import EXIT_USAGE
from ...progress import MetricLines, Progress
from ..errors import CliError
from ..options import (
    add_backend,
    add_output,
    add_overrides,
    add_raw,
    backend_flags,
    backend_of,
    backend_options,
    errors_at_source,
    open_backend_for,
)
from ..output import emit, say

if TYPE_CHECKING:
    from ...backends.base import BackendOptions, RunEvent, RunResult
    from ...foreign.conversion import Conversion
    from ...jobspec import TrainJob
    from ...terminal import OutputSink

EPILOG = """\
examples:
  kubetrain run job.yaml
  kubetrain run job.yaml --set spec.replicas=4 --set spec.runPolicy.backoffLimit=2
  kubetrain run --framework pytorch --replicas 2 --procs-per-replica 2 -- python train.py --steps 20
  kubetrain run job.yaml --detach && kubetrain logs -f <ID>
  kubetrain run job.yaml --backend k8s --dry-run=server
  kubetrain run pytorchjob.yaml --backend k8s      # as written, where the training operator runs

Output of every replica is merged with a [role-index] prefix. Ctrl-C cancels the job (a second
Ctrl-C skips the grace period); so does a SIGTERM. Exit status: 0 succeeded, 1 failed, 2 bad input,
130 cancelled by Ctrl-C (143 by a SIGTERM) or from elsewhere."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument(
        "file",
        nargs="?",
        help="job file: a TrainJob, or a foreign kind kubetrain converts (DeepSpeedJob, TrainingWorkload, PyTorchJob "
        "and the training operator's other kinds, JobSet, Volcano Job; see docs/foreign.md)"
        "; '-' reads stdin (its relative paths and templates then resolve against the current folder)",
    )
    add_overrides(p)
    p.add_argument(
        "--document",
        type=int,
        metavar="N",
        help="the job to run from a file of several documents (1 is the first)",
    )
    p.add_argument("-d", "--detach", action="store_true", help="return the job id at once; the job runs on")
    p.add_argument(
        "--keep-logs",
        action="store_true",
        help="with --detach, on Kubernetes: start a follower in the background (a `kubetrain logs -f` of the job) "
        "that keeps its logs on this machine until it ends, so `kubetrain logs` reads them after the pods are gone "
        "(an attached run keeps what it shows by itself; at most 256 MiB per job, the newest lines of each "
        "replica, KUBETRAIN_KEPT_LOGS_MAX_SIZE sets that)",
    )
    p.add_argument(
        "--dry-run",
        nargs="?",
        const="client",
        choices=["client", "server"],
        help="client (default): print what would run (the launch plan locally, the manifests on Kubernetes); "
        "server: send everything to the Kubernetes API server with dryRun=All and print its verdict; "
        "nothing runs. In the launch plan each process gets the top-level env plus its own; an env value "
        "written as a list is its pieces joined, {ref: NAME} standing for sharedValues.NAME",
    )
    p.add_argument("--framework", help=f"quick form: {'|'.join(FRAMEWORKS)}")
    p.add_argument("--replicas", type=int, help="quick form: number of replicas")
    p.add_argument("--procs-per-replica", help="quick form: processes per replica (a number or auto)")
    p.add_argument("--name", help="quick form: job name (default: from the program)")
    p.add_argument("-q", "--quiet", action="store_true", help="no kubetrain messages, only the replicas' output")
    add_raw(p)
    add_output(p, ["yaml", "json"], None)
    add_backend(p, "run")  # with each backend's options for run: --flavor, --convert, --preload, ...


def quick_document(args: argparse.Namespace) -> dict[str, Any]:
    """The TrainJob that `kubetrain run --framework F --replicas N -- PROGRAM ARGS` stands for."""
    command: list[str] = args.command
    if not command:
        raise CliError("nothing to run: give a job file, or a program after --", EXIT_USAGE)
    if Path(command[0]).name.startswith("python"):
        rest = command[1:]
        if rest[:1] == ["-m"] and len(rest) > 1:
            run: dict[str, Any] = {"module": rest[1:]}
            stem = rest[1].rsplit(".", 1)[-1]
        elif rest:
            run = {"python": rest}
            stem = Path(rest[0]).stem
        else:
            raise CliError("python needs a script or -m module", EXIT_USAGE)
    else:
        run = {"exec": command}
        stem = Path(command[0]).name
    name = args.name or (re.sub(r"[^a-z0-9-]+", "-", stem.lower()).strip("-")[:40] or "job")
    spec: dict[str, Any] = {"framework": args.framework or "generic", "run": run}
    if args.replicas is not None:
        spec["replicas"] = args.replicas
    if args.procs_per_replica is not None:
        ppr = args.procs_per_replica
        spec["procsPerReplica"] = int(ppr) if ppr.isdigit() else ppr
    return {"apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": {"name": name}, "spec": spec}


def load_job(args: argparse.Namespace, options: BackendOptions) -> tuple[TrainJob, Conversion | None]:
    """The job of this command line: its file (relative paths against the file's folder), or the quick form
    (against the current folder); with the Conversion of a foreign kind, for errors that name its fields."""
    from ...jobspec import SpecError, from_dict
    from ..options import load_job_source

    if args.file and args.command:
        raise CliError("give a job file or a program after --, not both", EXIT_USAGE)
    if args.file:
        quick = [f for f in ("framework", "replicas", "procs_per_replica", "name") if getattr(args, f) is not None]
        if quick:
            flags = ", ".join("--" + f.replace("_", "-") for f in quick)
            raise CliError(
                f"{flags} only apply to the quick form; with a file use --set, e.g. --set spec.replicas=4", EXIT_USAGE
            )
        # a TrainJob, or a foreign kind converted
        try:
            return load_job_source(args.file, overrides=args.overrides, document=args.document)
        except SpecError as exc:
            # A foreign file kubetrain cannot convert may still run as written where the cluster runs its kind:
            # the Kubernetes backend submits it then, and raises this error otherwise.
            if not options.runs_as_written:
                raise
            from ...foreign.loader import as_written_stand_in

            stand_in = as_written_stand_in(args.file, exc, overrides=args.overrides, document=args.document)
            if stand_in is None:
                raise
            return stand_in, None
    return from_dict(quick_document(args), overrides=args.overrides), None


def run(args: argparse.Namespace) -> int:
    from ...backends.base import WARNING_PREFIX, open_backend
    from ..options import relaxation_lines

    options = backend_options(args)
    job, conversion = load_job(args, options)
    if not args.quiet:  # where pods run them, the render says each relaxation
        for line in relaxation_lines(job, conversion, options):
            print(f"warning: {line}", file=sys.stderr)
    from ...terminal import OutputSink

    started = time.monotonic()
    terminal = OutputSink(raw=args.raw)
    live = LiveStatus(terminal, args) if wants_status_line(args) else None
    sink = MetricLines(terminal, live.progress if live is not None else None)

    def on_event(text: str) -> None:
        if conversion is not None and text.startswith(WARNING_PREFIX):  # at the source field and line it came from
            text = WARNING_PREFIX + conversion.at_source(text[len(WARNING_PREFIX) :])
        if live is None:
            say(f"kubetrain: {text}", quiet=args.quiet)
            return
        if not args.quiet:
            terminal.note(f"kubetrain: {text}")  # above the status line, never inside it
            terminal.flush()

    with errors_at_source(conversion), open_backend(options) as backend:
        try:
            if live is not None:
                live.start(backend.metrics_in_output)
            result = backend.run(
                job,
                detach=args.detach,
                dry_run=args.dry_run,
                sink=sink,
                on_event=on_event,
                on_status=live.on_status if live is not None else None,
            )
        finally:
            if live is not None:
                live.stop()
    return report(args, job, result, time.monotonic() - started)


def keep_logs(args: argparse.Namespace, job_id: str) -> None:
    """`--keep-logs` of a detached run: a `kubetrain logs -f` of the job, in a session of its own (the shell's
    Ctrl-C and its end leave it running), which keeps what it reads on this machine as every follow does, and
    ends with the job. Its output goes nowhere (the kept logs are what it is for); its own messages go to a
    file beside the kept logs, named on stderr with its pid."""
    import shlex
    import subprocess

    from ...backends.base import options_class
    from ...contract.state_dir import state_dir

    if options_class(backend_of(args)).logs_outlive_replicas:
        say(f"kubetrain: --keep-logs: this backend keeps job {job_id}'s logs as long as the job; nothing to start",
            quiet=args.quiet)
        return
    flags = shlex.split(backend_flags(args))
    if getattr(args, "max_log_requests", None) is not None:
        flags += ["--max-log-requests", str(args.max_log_requests)]
    folder = state_dir() / "kept-logs"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    messages = folder / f"follower-{job_id}.log"
    with open(messages, "ab") as err:
        follower = subprocess.Popen(
            [sys.executable, "-m", "kubetrain.cli.main", "logs", "-f", job_id, *flags],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
            close_fds=True,
        )
    say(f"kubetrain: keeping job {job_id}'s logs on this machine until it ends: follower pid {follower.pid} "
        f"(its messages: {messages}); `kubetrain logs {job_id}{backend_flags(args)}` reads them once the pods "
        "are gone", quiet=args.quiet)


# -- the live status line (kubetrain.progress) under an attached run's output, on a terminal ---------------------

STATUS_EVERY = 1.0
"""Seconds between redraws of the status line when nothing changed: its clock."""


def wants_status_line(args: argparse.Namespace) -> bool:
    """An attached run whose output is a terminal; not a dry run. Elsewhere (CI logs, a pipe) no line at all."""
    if args.detach or args.dry_run or args.output:
        return False
    try:
        return sys.stdout.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False


class LiveStatus:
    """Feeds a `Progress` while the run goes on and has the terminal sink draw its line.

    The job's id and status come from the run's own events (`on_status`): locally from the supervisor that
    makes each change, on Kubernetes from the watch that follows the job (pods scheduled, pulling, starting).
    Nothing polls the job's status and no message text is read. Both backends send these events; a backend
    that sent none would leave the line with what the output sink tells (replicas, elapsed time, metrics),
    so there is no fallback poller. Where the metrics come with the output (`Backend.metrics_in_output`: on
    Kubernetes) `MetricLines` takes them from it; elsewhere (locally: the job's files) a thread reads them
    with a backend of its own once the `created` event has named the job.

    `on_status` runs in the thread that runs the job (the local supervisor's control loop), so it only
    records and wakes the drawing thread: a terminal that stops reading never holds the job."""

    def __init__(self, terminal: OutputSink, args: argparse.Namespace) -> None:
        self.terminal = terminal
        self.args = args
        self.progress = Progress()
        self._stop = threading.Event()
        self._changed = threading.Event()
        self._metrics_in_output = False

    def on_status(self, event: RunEvent) -> None:
        self.progress.event(event)
        if event.kind == "status":
            self._changed.set()

    def start(self, metrics_in_output: bool) -> None:
        """Draw the line; read the metrics unless they come with the output (`Backend.metrics_in_output`)."""
        self._metrics_in_output = metrics_in_output
        self.terminal.status_line = lambda: self.progress.line(max(20, shutil.get_terminal_size().columns - 1))
        for target in (self._draw, self._follow_metrics):
            threading.Thread(target=target, name=f"kubetrain-status{target.__name__}", daemon=True).start()

    def stop(self) -> None:
        """Erase the line for good (what follows, the run's summary, is printed below the output)."""
        self._stop.set()
        self._changed.set()
        self.progress.job_known.set()
        self.terminal.clear_status()

    def _draw(self) -> None:
        """Redraw when the status changed, and every `STATUS_EVERY` seconds for the clock."""
        while True:
            self._changed.wait(STATUS_EVERY)
            self._changed.clear()
            if self._stop.is_set():
                return
            self.terminal.redraw_status()

    def _follow_metrics(self) -> None:
        # Samples that come with the output stream reach the line through `MetricLines`: no second stream.
        self.progress.job_known.wait()
        job_id = None if self._stop.is_set() else self.progress.job_id
        if job_id is None or self._metrics_in_output:
            return
        # The line is a convenience: a failure to read the metrics never fails the run.
        with contextlib.suppress(Exception), open_backend_for(self.args) as backend:
            for sample in backend.metrics(job_id, follow=True):
                self.progress.sample(sample)
                if self._stop.is_set():
                    return


def report(args: argparse.Namespace, job: TrainJob, result: RunResult, took: float) -> int:
    """What the terminal shows once `run` returns, and the exit status."""
    job_id, quiet, again = result.job_id, args.quiet, backend_flags(args)
    if result.plan is not None:
        if args.output is None and result.plan_notes:  # how to read it, for a person (a YAML comment)
            print("".join(f"# {line}\n" for line in result.plan_notes.splitlines()), end="")
        emit(result.plan, args.output or "yaml")
        return 0
    if result.dry_run is not None:
        if args.output:
            emit(result.dry_run.to_dict(), args.output)
        else:
            print(result.dry_run.format())
        return result.exit_code
    status = result.status
    paused = job.spec.run_mode == "Pause" or bool(job.spec.run_policy.suspend)
    if result.detached or status is None or (paused and status.phase.value == "Suspended"):
        if paused:
            say(f"job {job_id} created paused; start it with: kubetrain resume {job_id}{again}", quiet=quiet)
        if args.keep_logs:
            keep_logs(args, job_id)
        print(job_id)
        return 0
    phase = status.phase.value
    if phase == "Succeeded":
        say(f"job {job_id} succeeded in {took:.1f}s", quiet=quiet)
    elif phase == "Cancelled":
        say(f"job {job_id} cancelled", quiet=quiet)
    elif phase == "Suspended":  # `kubetrain suspend` from another shell: the job waits, nothing failed
        say(f"job {job_id} suspended; continue it with: kubetrain resume {job_id}{again}", quiet=quiet)
    else:
        if status.first_failure is not None:
            print(status.first_failure.explain(job_id), file=sys.stderr)
        else:
            say(f"job {job_id} {phase.lower()}: {status.reason or ''} {status.message or ''}".rstrip())
        say(f"logs: kubetrain logs {job_id}{again}    details: kubetrain describe {job_id}{again}", quiet=quiet)
    from ..signals import received

    signum = received()
    if phase == "Cancelled" and signum is not None and not result.interrupted_by:
        return 128 + signum  # cancelled because this command got the signal (the follow caught it): 130 or 143
    return result.exit_code
