"""`kubetrain status`: a job's phase, a line per replica, and why it is stuck or failed."""

from __future__ import annotations

import argparse

from ..options import add_backend, add_output, open_backend_for
from ..output import emit


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job", metavar="ID", help="job id (locally, an unambiguous prefix will do)")
    add_output(p, ["wide", "json", "yaml"])
    add_backend(p, "status")


def run(args: argparse.Namespace) -> int:
    with open_backend_for(args) as backend:
        description = backend.describe(args.job)
    if args.output in ("json", "yaml"):
        emit(description.status.to_dict(), args.output)
    else:  # a line per role past 20 replicas; -o wide: a line per replica
        print("\n".join(description.status_lines(wide=args.output == "wide")))
    return 0
