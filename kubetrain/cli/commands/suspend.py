"""`kubetrain suspend`: stop jobs' replicas and keep the jobs, to resume later."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..control import add_job_ids, for_each_job

if TYPE_CHECKING:
    from ...backends.base import Backend


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_job_ids(p, "suspend")


def run(args: argparse.Namespace) -> int:
    def act(backend: Backend, job_id: str) -> str:
        status = backend.suspend(job_id)
        return f"job {status.job_id} {status.phase.value.lower()}"

    return for_each_job(args, act)
