"""`kubetrain validate`: check TrainJob files, every problem with its field path and file:line."""

from __future__ import annotations

import argparse
import sys

from ..options import add_overrides
from ..output import say


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE")
    add_overrides(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no output on success")


def run(args: argparse.Namespace) -> int:
    from ...jobspec import SpecError, load_all_files

    failed = 0
    for path in args.files:
        try:
            jobs = load_all_files([path], overrides=args.overrides)
        except SpecError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
            continue
        for job in jobs:
            spec = job.spec
            replicas = sum(spec.role_replicas().values())
            roles = ", ".join(f"{r}×{n}" for r, n in spec.role_replicas().items())
            say(
                f"{path}: valid TrainJob {job.name} ({spec.framework.value}, {replicas} replicas: {roles})",
                quiet=args.quiet,
            )
    return 2 if failed else 0
