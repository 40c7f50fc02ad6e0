"""`kubetrain cancel`: stop jobs' replicas (SIGTERM, grace period, SIGKILL); the jobs end Cancelled."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..control import add_job_ids, for_each_job

if TYPE_CHECKING:
    from ...backends.base import Backend


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_job_ids(p, "cancel")


def run(args: argparse.Namespace) -> int:
    def act(backend: Backend, job_id: str) -> str:
        before = backend.status(job_id)
        if before.phase.is_terminal:  # nothing to stop: what was asked holds, so not an error
            return f"job {before.job_id} has already ended ({before.phase.value.lower()})"
        status = backend.cancel(job_id)
        return f"job {status.job_id} {status.phase.value.lower()}"

    return for_each_job(args, act)
