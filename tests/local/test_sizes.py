"""Sizes and durations the schema accepts work locally, or are refused up front with the numbers."""

from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kubetrain.backends.local.machine_fit import FDS_PER_PROCESS, FDS_RESERVED, PROCS_PER_CORE
from kubetrain.jobspec.types import MAX_DEADLINE_SECONDS
from kubetrain.status import JobPhase
from tests.support.helpers import CLI, cli, generic, job_file, make_job, no_traceback, run_job, write

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("deadline", [30 * 24 * 3600, MAX_DEADLINE_SECONDS])
def test_a_long_deadline_lets_the_job_run(tmp_path: Path, deadline: int) -> None:
    """30 days overflowed `select`'s timeout (the job was SupervisorLost at once); every accepted deadline works."""
    write(tmp_path / "ok.py", "print('done', flush=True)\n")
    job = make_job(generic(["ok.py"], replicas=2, runPolicy={"activeDeadlineSeconds": deadline}))
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.SUCCEEDED, status


def run_limited(args: list[str], cwd: Path, files: int | None = None, cores: int | None = None) -> Any:
    """`kubetrain ARGS` with an open-file limit of `files` and `cores` CPUs, as on a smaller machine."""

    def limit() -> None:
        if files is not None:
            _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (files, hard))
        if cores is not None:
            os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])

    return subprocess.run(
        [*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=60, preexec_fn=limit, check=False
    )


def no_jobs() -> None:
    listed = cli("list", "-o", "name")
    assert listed.returncode == 0 and listed.stdout.split() == [], listed.stdout


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["run", "dry-run"])
def test_more_processes_than_open_files_allow_are_refused_with_the_numbers(tmp_path: Path, dry_run: list[str]) -> None:
    """1,100 replicas at the common limit of 1,024 open files: refused up front, before a port is bound."""
    write(tmp_path / "t.py", "print(1)\n")
    path = job_file(tmp_path, generic(["t.py"], replicas=1100))
    result = run_limited(["run", *dry_run, str(path)], tmp_path, files=1024)
    assert result.returncode == 2, result.stderr
    no_traceback(result)
    fit = (1024 - FDS_RESERVED) // FDS_PER_PROCESS
    assert (
        f"spec.replicas: 1100 local processes (worker: 1100×1 replicas×processes) need about "
        f"{1100 * FDS_PER_PROCESS + FDS_RESERVED} open files; this machine's limit (ulimit -n) is 1024, "
        f"enough for {fit}"
    ) in result.stderr
    assert "Too many open files" not in result.stderr
    assert len(result.stdout) < 1000  # nothing of the job was built
    no_jobs()


def test_more_processes_than_cores_can_run_are_refused_with_the_numbers(tmp_path: Path) -> None:
    write(tmp_path / "t.py", "print(1)\n")
    spec = {
        "framework": "generic",
        "run": {"python": ["t.py"]},
        "roles": {"worker": {"replicas": 20}, "ps": {"replicas": 2, "procsPerReplica": 8}},
    }
    result = run_limited(["run", "--dry-run", str(job_file(tmp_path, spec))], tmp_path, cores=1)
    assert result.returncode == 2, result.stderr
    no_traceback(result)
    assert (
        f"spec.roles: 36 local processes (worker: 20×1, ps: 2×8 replicas×processes) are more than this "
        f"machine's 1 cores can run ({PROCS_PER_CORE} per core: {PROCS_PER_CORE})"
    ) in result.stderr
    no_jobs()


def test_a_dry_run_of_a_large_job_is_answered_without_building_it(tmp_path: Path) -> None:
    """5,000 replicas: every replica's env lists every address (KUBETRAIN_CLUSTER), so their launch record
    grows with the square of the count (20 MB at 1,000); a machine that cannot run them says so at once."""
    write(tmp_path / "t.py", "print(1)\n")
    path = job_file(tmp_path, generic(["t.py"], replicas=5000))
    result = run_limited(["run", "--dry-run", str(path)], tmp_path, files=4096, cores=2)
    assert result.returncode == 2, result.stderr
    assert "5000 local processes" in result.stderr
    assert len(result.stdout) + len(result.stderr) < 2000


def test_a_job_the_machine_can_hold_is_not_refused(tmp_path: Path) -> None:
    write(tmp_path / "t.py", "print(1)\n")
    path = job_file(tmp_path, generic(["t.py"], replicas=PROCS_PER_CORE))
    result = run_limited(["run", "--dry-run", str(path)], tmp_path, files=1024, cores=1)
    assert result.returncode == 0, result.stderr
