"""cancel, delete, suspend, resume: one request per job id, each job's problem reported, the others done."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..contract.errors import KubetrainError
from .options import add_backend, open_backend_for

if TYPE_CHECKING:
    from ..backends.base import Backend


def add_job_ids(p: argparse.ArgumentParser, verb: str) -> None:
    p.add_argument("jobs", metavar="ID", nargs="+", help="job ids (locally, unambiguous prefixes will do)")
    add_backend(p, verb)


def for_each_job(args: argparse.Namespace, act: Callable[[Backend, str], str]) -> int:
    """`act(backend, id)` for every id given; it returns the line to print. Exit 1 if any failed."""
    failed = 0
    with open_backend_for(args) as backend:
        for job_id in args.jobs:
            try:
                print(act(backend, job_id))
            except KubetrainError as exc:
                print(f"error: {exc}", file=sys.stderr)
                failed += 1
    return 1 if failed else 0


__all__ = ["add_job_ids", "for_each_job"]
