"""`kubetrain delete`: remove jobs and what they left (logs, pods kept for their logs); running ones are
cancelled first."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..control import add_job_ids, for_each_job

if TYPE_CHECKING:
    from ...backends.base import Backend


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_job_ids(p, "delete")


def run(args: argparse.Namespace) -> int:
    def act(backend: Backend, job_id: str) -> str:
        backend.delete(job_id)
        return f"job {job_id} deleted"

    return for_each_job(args, act)
