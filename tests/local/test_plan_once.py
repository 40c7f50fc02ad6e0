"""A local run plans its job once: the verdict on this machine, the scripts looked for, each role's folder
and the launch record are all read off the one plan, in a run, a dry run and a resume alike."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kubetrain.plan
from kubetrain.backends.local import job_start
from kubetrain.backends.local.backend import LocalBackend
from kubetrain.status import JobPhase
from tests.support.helpers import generic, make_job, no_process_left_behind, wait_phase, write  # noqa: F401

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The name each `plan()` call of this test planned under, in order."""
    calls: list[str] = []
    real = kubetrain.plan.plan

    def counted(job: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs.get("name") or job.name)
        return real(job, *args, **kwargs)

    monkeypatch.setattr(kubetrain.plan, "plan", counted)
    yield calls


def test_an_attached_run_plans_once(tmp_path: Path, plans: list[str]) -> None:
    write(tmp_path / "ok.py", "print('ok', flush=True)\n")
    job = make_job(generic(["ok.py"], replicas=2), "once").with_base_dir(tmp_path)
    with LocalBackend() as backend:
        result = backend.run(job)
    assert result.status is not None and result.status.phase is JobPhase.SUCCEEDED, result.status
    assert plans == [result.job_id]  # planned under the job's id, which its replicas' env names


def test_a_job_id_drawn_twice_at_once_is_drawn_again_and_the_job_planned_under_the_new_one(
    tmp_path: Path, plans: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "ok.py", "print('ok', flush=True)\n")
    job = make_job(generic(["ok.py"], replicas=1, runMode="Pause"), "twice").with_base_dir(tmp_path)
    with LocalBackend() as backend:
        taken = backend.run(job).job_id
        draws = iter([taken, "twice-bcdfg"])  # the first draw is another job's id
        monkeypatch.setattr(job_start, "new_job_id", lambda name: next(draws))
        plans.clear()
        job_id = backend.run(job).job_id
        record = backend.launch_record(job_id)
    assert job_id == "twice-bcdfg" and plans == [taken, job_id]
    assert record.processes[0].env["KUBETRAIN_JOB"] == job_id


def test_a_dry_run_plans_once(tmp_path: Path, plans: list[str]) -> None:
    write(tmp_path / "ok.py", "print('ok')\n")
    job = make_job(generic(["ok.py"], replicas=3), "preview").with_base_dir(tmp_path)
    with LocalBackend() as backend:
        result = backend.run(job, dry_run="client")
    assert result.plan is not None and len(result.plan["replicas"]) == 3
    assert plans == ["preview"]


def test_a_resume_plans_once(tmp_path: Path, plans: list[str]) -> None:
    write(tmp_path / "ok.py", "print('ok', flush=True)\n")
    job = make_job(generic(["ok.py"], replicas=2, runMode="Pause"), "later").with_base_dir(tmp_path)
    with LocalBackend() as backend:
        job_id = backend.run(job).job_id
        plans.clear()
        backend.resume(job_id)
    assert plans == [job_id], plans
    status = wait_phase(job_id, JobPhase.SUCCEEDED, JobPhase.FAILED)
    assert status.phase is JobPhase.SUCCEEDED, (status.reason, status.message)
