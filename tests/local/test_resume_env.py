"""A resumed job's replicas start with the environment of the shell that submitted it, not the one that resumes
it: a pod's env is fixed when the job is submitted, and so is a local replica's."""

from __future__ import annotations

from pathlib import Path

from kubetrain.status import JobPhase
from tests.support.helpers import cli, job_file, no_process_left_behind, wait_phase, write  # noqa: F401


def test_a_resumed_job_keeps_the_submitting_shells_environment(tmp_path: Path) -> None:
    write(tmp_path / "mark.py", "import os\nprint('MARK', os.environ.get('MARK'))\n")
    path = job_file(tmp_path, {"framework": "generic", "replicas": 2, "run": {"python": ["mark.py"]},
                               "runMode": "Pause"})
    submitted = cli("run", "--detach", path, env={"MARK": "submit"})
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.split()[-1]
    resumed = cli("resume", job_id, env={"MARK": "resume"})
    assert resumed.returncode == 0, resumed.stderr
    wait_phase(job_id, JobPhase.SUCCEEDED, JobPhase.FAILED)
    logs = cli("logs", job_id)
    assert sorted(line.split(None, 1)[1] for line in logs.stdout.splitlines()) == ["MARK submit", "MARK submit"]
