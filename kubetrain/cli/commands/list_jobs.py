"""`kubetrain list`: jobs, newest first, as kubectl prints them."""

from __future__ import annotations

import argparse

from ..options import add_backend, add_output, backend_of, non_negative, open_backend_for
from ..output import print_jobs


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_output(p, ["wide", "json", "yaml", "name"])
    p.add_argument("-A", "--all-namespaces", action="store_true", help="Kubernetes: jobs of every namespace")
    p.add_argument("--limit", type=non_negative, help="at most this many jobs")
    add_backend(p)


def run(args: argparse.Namespace) -> int:
    extra = {"all_namespaces": True} if args.all_namespaces and backend_of(args) != "local" else {}
    with open_backend_for(args, **extra) as backend:
        print_jobs(backend.list(limit=args.limit), args.output)
    return 0
