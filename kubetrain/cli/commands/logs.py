"""`kubetrain logs`: a job's output, merged across replicas in time order, with their prefixes."""

from __future__ import annotations

import argparse

from ..options import add_backend, open_backend_for
from ..output import log_filters, print_records, say


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job", metavar="ID")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends")
    p.add_argument("--role", help="only this role")
    p.add_argument("--index", type=int, help="only this replica index (with --role)")
    p.add_argument("--tail", type=int, metavar="N", help="last N lines of each replica")
    p.add_argument("--since", metavar="DURATION", help="only newer lines, e.g. 30s, 5m, 2h")
    p.add_argument("--grep", metavar="REGEX", help="only lines matching REGEX")
    p.add_argument("--timestamps", action="store_true", help="prefix each line with its time")
    p.add_argument("--no-prefix", action="store_true", help="omit the [role-index] prefix")
    p.add_argument("--previous", action="store_true", help="Kubernetes: the container before its last restart")
    add_backend(p)


def run(args: argparse.Namespace) -> int:
    from ...terminal import OutputSink

    since, grep = log_filters(args)
    with open_backend_for(args) as backend:
        records = backend.logs(
            args.job,
            role=args.role,
            index=args.index,
            follow=args.follow,
            tail=args.tail,
            since=since,
            grep=grep.pattern if grep is not None else None,
            previous=args.previous,
            on_missing=lambda replica, why: say(f"kubetrain: {replica}: {why}"),
        )
        print_records(records, args, OutputSink())
    return 0
