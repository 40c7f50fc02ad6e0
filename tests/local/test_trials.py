"""Trials locally (`spec.trials`): independent runs, at most parallelism at a time, each retried alone; a run
that may not be retried fails the job and stops the others; a suspended job's succeeded runs are kept."""

from __future__ import annotations

from pathlib import Path

from kubetrain.status import JobPhase, ReplicaPhase
from tests.support.helpers import make_job, no_process_left_behind, run_job, write  # noqa: F401 (autouse fixture)

RUN = """\
import os, sys
index = int(os.environ["KUBETRAIN_REPLICA_INDEX"])
open(os.path.join(os.environ["OUT"], f"ran-{index}"), "a").write("x")
sys.exit(5 if index == 1 else 0)
"""


def test_a_run_that_may_not_be_retried_fails_the_job_and_no_later_run_starts(tmp_path: Path) -> None:
    write(tmp_path / "run.py", RUN)
    job = make_job({"run": {"python": ["run.py"]}, "env": {"OUT": str(tmp_path)},
                    "trials": {"completions": 4, "parallelism": 1}})
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.FAILED and status.reason == "ReplicaFailed", status.summary_line()
    assert sorted(p.name for p in tmp_path.glob("ran-*")) == ["ran-0", "ran-1"]  # one at a time, lowest first
    phases = [r.phase for r in status.replicas]
    assert phases == [ReplicaPhase.SUCCEEDED, ReplicaPhase.FAILED, ReplicaPhase.PENDING, ReplicaPhase.PENDING]


def test_runs_are_retried_alone_up_to_the_backoff_limit(tmp_path: Path) -> None:
    write(tmp_path / "run.py", RUN)
    job = make_job({"run": {"python": ["run.py"]}, "env": {"OUT": str(tmp_path)}, "runPolicy": {"backoffLimit": 1},
                    "trials": {"completions": 3, "parallelism": 3}})
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.FAILED and status.reason == "BackoffLimitExceeded", status.summary_line()
    # index 1 ran twice (its retry), the others once each: nobody else was restarted with it
    assert {p.name: p.read_text() for p in tmp_path.glob("ran-*")} == {"ran-0": "x", "ran-1": "xx", "ran-2": "x"}
