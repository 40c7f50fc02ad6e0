"""A podTemplate on this machine: its main container's command, args, env and workingDir run a real
distributed job (torch.distributed over gloo); the rest of the template has no local meaning, and the run
says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import kubetrain
from kubetrain.backends.local.launch import LaunchRecord
from tests.support.helpers import (  # noqa: F401 (no_process_left_behind: an autouse fixture)
    cli,
    job_file,
    make_job,
    no_process_left_behind,
    no_traceback,
    write,
)

pytestmark = pytest.mark.timeout(240)

GATHER = """\
import os, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(total)
print(f"rank {dist.get_rank()} of {dist.get_world_size()}: sum {int(total.item())}, "
      f"{os.environ['GREETING']}, args {sys.argv[1:]}, in {os.path.basename(os.getcwd())}", flush=True)
dist.destroy_process_group()
"""

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"team": "vision"}},
    "spec": {
        "imagePullSecrets": [{"name": "registry"}],
        "containers": [
            {
                "name": "trainer",
                "image": "registry.example.com/train:1",
                "command": ["python", "gather.py"],
                "args": ["--steps", "3"],
                "env": [{"name": "GREETING", "value": "hello from the template"}],
                "workingDir": "code",
            }
        ],
    },
}

NOT_USED = "not used locally (a pod template is for Kubernetes pods"


def test_a_two_replica_job_runs_the_templates_command_locally(tmp_path: Path) -> None:
    write(tmp_path / "code" / "gather.py", GATHER)
    path = job_file(tmp_path, {"framework": "pytorch", "replicas": 2, "podTemplate": TEMPLATE})
    result = cli("run", path, cwd=tmp_path.parent)
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    lines = sorted(line for line in result.stdout.splitlines() if "rank " in line)
    assert lines == [
        f"[worker-{rank}] rank {rank} of 2: sum 3, hello from the template, args ['--steps', '3'], in code"
        for rank in (0, 1)
    ]
    assert NOT_USED in result.stderr and "spec.podTemplate" in result.stderr


def test_a_dry_run_shows_the_program_and_env_and_warns_what_it_ignores(tmp_path: Path) -> None:
    job = make_job({"replicas": 2, "env": {"OWN": "$(GREETING)!"}, "podTemplate": TEMPLATE})
    result = kubetrain.run(job, dry_run="client", base_dir=str(tmp_path))
    record = LaunchRecord.from_dict(result.plan or {})  # each process's whole env, from the dry run's data
    assert len(record.processes) == 2
    for process in record.processes:
        assert process.argv[1:] == ("gather.py", "--steps", "3")
        assert process.env["GREETING"] == "hello from the template"
        assert process.env["OWN"] == "hello from the template!"  # the job's env may refer to the template's
    assert record.cwd == str((tmp_path / "code").resolve())
    assert [w for w in result.warnings if NOT_USED in w and w.endswith(": spec.podTemplate")]
