"""`kubetrain list`: jobs, newest first, as kubectl prints them."""

from __future__ import annotations

import argparse

from ..options import add_backend, add_output, non_negative, open_backend_for
from ..output import print_jobs


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_output(p, ["wide", "json", "yaml", "name"])
    p.add_argument("--limit", type=non_negative, help="at most this many jobs")
    add_backend(p, "list")  # with -A, --all-namespaces from the Kubernetes backend's options


def run(args: argparse.Namespace) -> int:
    with open_backend_for(args) as backend:
        print_jobs(backend.list(limit=args.limit), args.output)
    return 0
