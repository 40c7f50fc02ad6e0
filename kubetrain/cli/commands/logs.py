"""`kubetrain logs`: a job's output, merged across replicas in time order, with their prefixes.

`-f` follows until the job ends: a suspended job has not ended, so following it waits, as `kubectl logs -f`
waits while no pod runs, and goes on once it is resumed."""

from __future__ import annotations

import argparse

from ...contract.errors import EXIT_USAGE
from ...contract.logs import parse_time_bound
from ..errors import CliError
from ..options import add_backend, add_raw, non_negative, open_backend_for
from ..output import log_filters, print_records, say

EPILOG = """\
examples:
  kubetrain logs ID -f --role worker --tail 20
  kubetrain logs ID --since 1h --until 10m --grep loss      # between an hour and ten minutes ago
  kubetrain logs ID --until 2026-11-27T16:20:00Z --timestamps
  kubetrain logs ID --stream stderr                          # local: the replicas' stderr only

Logs that outlive their pods (Kubernetes): a pod's log is deleted with the pod, so what an attached run,
`logs -f` or `run --detach --keep-logs` read of a job is kept on this machine (under the state directory,
kept-logs/, per kubeconfig context, namespace and job), at most 256 MiB per job: each replica's newest lines,
what was cut counted in the first line read back; KUBETRAIN_KEPT_LOGS_MAX_SIZE sets the cap (0: keep none).
Once the job has no pods, or is gone, `kubetrain logs` reads those with the same filters and says so on
stderr. Locally every replica's log is kept as long as the job."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("job", metavar="ID")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends")
    p.add_argument("--role", help="only this role")
    p.add_argument("--index", type=int, help="only this replica index (with --role)")
    p.add_argument("--tail", type=non_negative, metavar="N", help="last N lines of each replica")
    p.add_argument("--since", metavar="DURATION", help="only newer lines, e.g. 30s, 5m, 2h")
    p.add_argument(
        "--until",
        metavar="TIME",
        help="only older lines: an RFC 3339 time (2026-11-27T16:20:00Z) or a duration back from now (5m); not with -f",
    )
    p.add_argument("--grep", metavar="REGEX", help="only lines matching REGEX")
    p.add_argument(
        "--stream",
        choices=("stdout", "stderr"),
        help="only the replicas' stdout or stderr (local; the Kubernetes API merges them, so it is refused there)",
    )
    p.add_argument("--timestamps", action="store_true", help="prefix each line with its time")
    p.add_argument("--no-prefix", action="store_true", help="omit the [role-index] prefix")
    p.add_argument("--previous", action="store_true", help="Kubernetes: the container before its last restart")
    add_raw(p)
    add_backend(p, "logs")


def run(args: argparse.Namespace) -> int:
    from ...terminal import OutputSink

    since, grep = log_filters(args)
    until = parse_time_bound(args.until, "--until") if args.until else None
    if args.follow and until is not None:
        raise CliError("--until ends the output at a time and -f follows new output: give one of them", EXIT_USAGE)
    with open_backend_for(args) as backend:
        if args.follow:
            try:
                status = backend.status(args.job)
            except LookupError:
                status = None  # gone: the backend says what it has of it (Kubernetes: the logs kept here)
            if status is not None and status.phase.value == "Suspended":
                # As `kubectl logs -f` while no pod runs: wait for the job to run again, or end.
                say(
                    f"kubetrain: job {status.job_id} is suspended; following its output once it is resumed "
                    "(Ctrl-C to stop)"
                )
        records = backend.logs(
            args.job,
            role=args.role,
            index=args.index,
            follow=args.follow,
            tail=args.tail,
            since=since,
            until=until,
            grep=grep.pattern if grep is not None else None,
            stream=args.stream,
            previous=args.previous,
            on_missing=lambda replica, why: say(f"kubetrain: {replica}: {why}"),
            on_note=lambda text: say(f"kubetrain: {text}"),
        )
        print_records(records, args, OutputSink(raw=args.raw))
    return 0
