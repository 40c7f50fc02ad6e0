"""`kubetrain status` of a big job: a line per role with the replicas not in that role's usual state (all of
them), never a thousand lines; `-o wide` a line per replica. The same on every backend (`replica_lines`)."""

from __future__ import annotations

from pathlib import Path

from kubetrain.status import JobPhase, JobStatus, ReplicaPhase, ReplicaStatus
from kubetrain.status_text import EVERY_REPLICA_UP_TO, replica_lines
from tests.support.helpers import cli, job_file, no_process_left_behind, write  # noqa: F401 (autouse fixture)


def _thousand() -> JobStatus:
    replicas = [ReplicaStatus("worker", i, ReplicaPhase.RUNNING) for i in range(1000)]
    replicas[3] = ReplicaStatus("worker", 3, ReplicaPhase.FAILED, exit_code=3)
    replicas[998] = ReplicaStatus("worker", 998, ReplicaPhase.PENDING, reason="NoPod")
    return JobStatus("big", "big", phase=JobPhase.RUNNING,
                     replicas=[ReplicaStatus("master", 0, ReplicaPhase.RUNNING), *replicas])


def test_a_thousand_replicas_take_a_line_per_role_and_the_odd_ones_out() -> None:
    lines = replica_lines(_thousand())
    assert lines[0] == "  master: 1 of 1 Running"
    assert lines[1] == "  worker: 998 of 1000 Running"
    assert [line.split()[:3] for line in lines[2:4]] == [["worker-3", "Failed", "exit"], ["worker-998", "Pending",
                                                                                          "NoPod"]]
    assert len(lines) == 5 and "-o wide" in lines[-1]
    assert len(replica_lines(_thousand(), wide=True)) == 1001


def test_status_of_a_job_past_the_line_per_replica_limit_and_with_wide(tmp_path: Path) -> None:
    write(tmp_path / "ok.py", "print('done')\n")
    count = EVERY_REPLICA_UP_TO + 1
    spec = job_file(tmp_path, {"framework": "generic", "replicas": count, "run": {"python": ["ok.py"]}})
    assert cli("run", spec, timeout=300).returncode == 0
    job_id = cli("list", "-o", "name").stdout.split()[0]
    short = cli("status", job_id)
    assert short.returncode == 0, short.stderr
    assert f"worker: {count} of {count} Succeeded" in short.stdout, short.stdout
    assert "worker-0 " not in short.stdout and len(short.stdout.splitlines()) == 3, short.stdout
    wide = cli("status", job_id, "-o", "wide")
    assert wide.returncode == 0 and all(f"worker-{i} " in wide.stdout for i in range(count)), wide.stdout
