"""DeepSpeed jobs run for real on this machine, with no ssh: the example as is (every replica starts its
own ranks), the launcher role (the `deepspeed` launcher started once per node with `--no_ssh --node_rank`),
and the Kubernetes wiring (a pod's own node launch) run as processes here.

What runs real DeepSpeed: the example's train.py (deepspeed.initialize, ZeRO 1 on the CPU accelerator) and
the `deepspeed` launcher itself (deepspeed.launcher.runner and .launch). CONTRACT is a torch-only program
that initializes torch.distributed the way deepspeed.init_distributed() does (env://: MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE, with gloo), so it also shows what each rank was given (argv, env).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubetrain import load
from kubetrain.backends.local.launch import LaunchRecord
from kubetrain.backends.local.prepare import free_ports
from kubetrain.frameworks import local_topology
from kubetrain.plan import plan, replica_counts
from kubetrain.status import JobPhase
from tests.support.helpers import (  # noqa: F401 (no_process_left_behind: an autouse fixture)
    EXAMPLES,
    log_lines,
    make_job,
    no_process_left_behind,
    run_job,
    write,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

EXAMPLE = EXAMPLES / "deepspeed"
BIN = str(Path(sys.executable).parent)

# Reports what one rank was given, after an allreduce over every rank; a file per rank (ranks that one
# launcher starts share its output, where lines of two ranks may interleave).
CONTRACT = """\
import json, os, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo")  # env://, as deepspeed.init_distributed() reads it
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.tensor([float(rank)])
dist.all_reduce(total)
names = ("LOCAL_RANK", "NODE_RANK", "KUBETRAIN_ROLE", "KUBETRAIN_REPLICA_INDEX", "FROM_JOB", "FROM_ROLE")
report = {"rank": rank, "world": world, "sum": total.item(), "argv": sys.argv[1:],
          "env": {name: os.environ.get(name) for name in names}}
with open(os.path.join(os.environ["OUT_DIR"], f"rank-{rank}.json"), "w") as f:
    json.dump(report, f)
dist.barrier()
dist.destroy_process_group()
"""


def require_deepspeed() -> None:
    if importlib.util.find_spec("deepspeed") is None or shutil.which("deepspeed", path=BIN) is None:
        pytest.fail("DeepSpeed is not installed: `.venv/bin/pip install deepspeed -c constraints.txt` (it pulls "
                    "no other torch)")


def reports(out: Path, world: int) -> list[dict[str, Any]]:
    found = sorted(out.glob("rank-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    seen = [json.loads(p.read_text()) for p in found]
    assert [r["rank"] for r in seen] == list(range(world)), seen
    assert {r["world"] for r in seen} == {world}
    assert {r["sum"] for r in seen} == {float(sum(range(world)))}  # the allreduce reached every rank
    return seen


def checksums(lines: list[str]) -> dict[int, str]:
    """rank → the final parameter checksum train.py prints (two ranks' lines may share a line)."""
    found = re.findall(r"final-params-checksum (\d+) (-?\d+\.\d+(?:e-?\d+)?)", "\n".join(lines))
    return {int(rank): value for rank, value in found}


def contract_job(tmp_path: Path, spec: dict[str, Any]) -> Any:
    write(tmp_path / "contract.py", CONTRACT)
    (tmp_path / "out").mkdir()
    return make_job({"framework": "deepspeed", "env": {"FROM_JOB": "job", "OUT_DIR": str(tmp_path / "out")},
                     "run": {"python": ["contract.py", "--mine"]}, **spec})


# -- without a launcher role -------------------------------------------------------------------------------


def test_each_replica_starts_its_ranks_with_the_contract_deepspeed_reads(tmp_path: Path) -> None:
    """Needs no DeepSpeed: 2 replicas × 2 processes, each started by kubetrain with its RANK and LOCAL_RANK."""
    job = contract_job(tmp_path, {"replicas": 2, "procsPerReplica": 2, "localRank": True})
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    for r in reports(tmp_path / "out", 4):
        local = str(r["rank"] % 2)
        assert r["argv"] == ["--mine", f"--local_rank={local}"]
        assert r["env"] == {"LOCAL_RANK": local, "NODE_RANK": str(r["rank"] // 2), "KUBETRAIN_ROLE": "worker",
                            "KUBETRAIN_REPLICA_INDEX": str(r["rank"] // 2), "FROM_JOB": "job", "FROM_ROLE": None}


def test_the_example_trains_with_deepspeed() -> None:
    require_deepspeed()
    job = load(str(EXAMPLE / "job.yaml"),  # as its comment says to run it on a machine without GPUs
               overrides=["spec.resources.gpu=0",
                          'spec.run.python=[train.py,--deepspeed_config,ds_config.json,--steps,"3"]'])
    status = run_job(job, EXAMPLE)
    logs = log_lines(status.job_id)
    assert status.phase is JobPhase.SUCCEEDED, "\n".join([status.summary_line(), *logs.get("worker-1", [])[-20:]])
    sums = {**checksums(logs["worker-0"]), **checksums(logs["worker-1"])}
    assert sorted(sums) == [0, 1] and len(set(sums.values())) == 1, sums  # ZeRO kept the ranks in step


# -- with a launcher role: the deepspeed launcher once per node, locally -----------------------------------


def test_the_launcher_example_trains_with_no_ssh() -> None:
    """examples/deepspeed/launcher.yaml: `deepspeed --no_ssh --node_rank=N` for each of the 2 worker nodes
    (an ssh-based launcher fails here: `host=localhost was not reachable via ssh`)."""
    require_deepspeed()
    job = load(str(EXAMPLE / "launcher.yaml"),
               overrides=['spec.run.python=[train.py,--deepspeed_config,ds_config.json,--steps,"3"]'])
    status = run_job(job, EXAMPLE)
    logs = log_lines(status.job_id)
    lines = [line for key in sorted(logs) for line in logs[key]]
    assert status.phase is JobPhase.SUCCEEDED, "\n".join([status.summary_line(), *lines[-30:]])
    assert sorted(logs) == ["launcher-0.0", "launcher-0.1"]  # one launch per worker node
    sums = checksums(lines)
    assert sorted(sums) == [0, 1, 2, 3] and len(set(sums.values())) == 1, sums
    assert not any("ssh" in line and "not reachable" in line for line in lines)


@pytest.mark.parametrize("local_rank", [True, False])
def test_launched_ranks_get_the_jobs_env_and_their_nodes(tmp_path: Path, local_rank: bool) -> None:
    """The deepspeed launcher's ranks: node-major ranks, `--local_rank` only with localRank, the job's and
    the launcher role's env (nothing cleans it: no ssh), and worker N's own variables."""
    require_deepspeed()
    job = contract_job(tmp_path, {"procsPerReplica": 2, "localRank": local_rank, "roles": {
        "launcher": {"env": {"FROM_ROLE": "launcher"}}, "worker": {"replicas": 2}}})
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    for r in reports(tmp_path / "out", 4):
        node, local = r["rank"] // 2, r["rank"] % 2
        assert r["argv"] == ([f"--local_rank={local}"] if local_rank else []) + ["--mine"]
        assert r["env"] == {"LOCAL_RANK": str(local), "NODE_RANK": str(node), "KUBETRAIN_ROLE": "worker",
                            "KUBETRAIN_REPLICA_INDEX": str(node), "FROM_JOB": "job", "FROM_ROLE": "launcher"}


# -- the Kubernetes wiring, run here ------------------------------------------------------------------------


def test_the_pods_own_node_launch_runs(tmp_path: Path) -> None:
    """What a pod of 2 processes runs on Kubernetes (`sh -c 'exec deepspeed --node_rank="$NODE_RANK" "$@"'
    deepspeed --no_ssh ...`, tests/frameworks/test_deepspeed.py holds the render to it), run as one process
    per replica on this machine with the replica's env: the real launcher starts 2 ranks per replica."""
    require_deepspeed()
    job = contract_job(tmp_path, {"replicas": 2, "procsPerReplica": 2, "localRank": True})
    counts = replica_counts(job.spec)
    files = tmp_path / "files"
    the_plan = plan(job, local_topology(counts, free_ports(sum(counts.values()))), name="pods",
                    files_dir=str(files), launcher_procs=False)
    files.mkdir()
    for name, content in the_plan.files.items():
        (files / name).write_text(content)
    record = LaunchRecord.from_plan(the_plan)  # the plan's env and the user's, per process
    started = []
    try:
        for replica in record.replicas:
            (proc,) = replica.processes
            assert proc.argv[:4] == ("/bin/sh", "-c", 'exec deepspeed --node_rank="$NODE_RANK" "$@"', "deepspeed")
            env = {**os.environ, **proc.env, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
            started.append(subprocess.Popen(proc.argv, env=env, cwd=tmp_path, start_new_session=True,
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outputs = [p.communicate(timeout=400)[0] for p in started]
    finally:
        for p in started:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    assert [p.returncode for p in started] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    for r in reports(tmp_path / "out", 4):
        node, local = r["rank"] // 2, r["rank"] % 2
        assert r["argv"] == [f"--local_rank={local}", "--mine"]
        assert (r["env"]["NODE_RANK"], r["env"]["KUBETRAIN_REPLICA_INDEX"], r["env"]["FROM_JOB"]) == (
            str(node), str(node), "job")
