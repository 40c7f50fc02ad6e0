"""`kubetrain status`: a job's phase, a line per replica, and why it is stuck or failed."""

from __future__ import annotations

import argparse

from ..options import add_backend, add_output, open_backend_for
from ..output import emit


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job", metavar="ID", help="job id (locally, an unambiguous prefix will do)")
    add_output(p, ["json", "yaml"])
    add_backend(p, "status")


def run(args: argparse.Namespace) -> int:
    with open_backend_for(args) as backend:
        description = backend.describe(args.job)
    if args.output:
        emit(description.status.to_dict(), args.output)
    else:
        print("\n".join(description.status_lines()))
    return 0
