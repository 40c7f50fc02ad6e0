"""Real frameworks on the local backend: torch DDP over gloo, mpirun + mpi4py, and the TF_CONFIG and JAX
env contracts read by the replicas themselves. No stand-ins: the replicas are the examples' programs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kubetrain import load
from kubetrain.status import JobPhase
from tests.support.helpers import (  # noqa: F401 (no_process_left_behind: an autouse fixture)
    EXAMPLES,
    checksums,
    cli,
    job_file,
    log_lines,
    make_job,
    no_process_left_behind,
    no_traceback,
    parse_json_lines,
    run_job,
    write,
)

pytestmark = pytest.mark.timeout(240)

DDP_EXAMPLE = EXAMPLES / "pytorch-ddp"

# examples/pytorch-ddp/train.py, run as is but for one thing: DDP's reference cycles are collected before
# destroy_process_group. Without that, the process group and its gloo threads live on into interpreter
# shutdown, where torch 2.13 aborts now and then (SIGABRT, "terminate called without an active
# exception") after the job's work is done: a known bug of the example, reported; drop this shim once
# train.py releases the model itself.
DDP_TRAIN = f"""\
import gc, sys
sys.path.insert(0, {str(DDP_EXAMPLE)!r})
import torch.distributed as dist
import train

_destroy = dist.destroy_process_group


def _destroy_after_collect(*args, **kwargs):
    gc.collect()
    return _destroy(*args, **kwargs)


dist.destroy_process_group = _destroy_after_collect
sys.exit(train.main(sys.argv[1:]))
"""


def _same_checksum_on_every_rank(sums: dict[int, str], world: int) -> None:
    assert sorted(sums) == list(range(world)), sums
    assert len(set(sums.values())) == 1, f"ranks ended with different parameters: {sums}"
    assert float(next(iter(sums.values()))) != 0.0


@pytest.mark.slow
def test_torch_ddp_two_replicas_quick_form(tmp_path: Path) -> None:
    """`kubetrain run --framework pytorch --replicas 2 -- python train.py`: two replicas of one process each
    train over gloo and end with identical parameters (DDP averaged every gradient)."""
    write(tmp_path / "train.py", DDP_TRAIN)
    result = cli(
        "run",
        "--framework",
        "pytorch",
        "--replicas",
        "2",
        "--",
        "python",
        "train.py",
        "--steps",
        "5",
        cwd=tmp_path,
        timeout=200,
    )
    assert result.returncode == 0, result.stderr
    no_traceback(result)
    out = result.stdout.splitlines()
    assert any(line.startswith("[worker-0]") for line in out) and any(line.startswith("[worker-1]") for line in out)
    _same_checksum_on_every_rank(checksums(out), 2)
    assert "succeeded" in result.stderr


@pytest.mark.slow
def test_torch_ddp_one_replica_two_processes(tmp_path: Path) -> None:
    """One replica with procsPerReplica 2: kubetrain starts both local ranks itself; each has its own log
    file, and both end with the same parameters."""
    train = write(tmp_path / "train.py", DDP_TRAIN)
    job = load(
        str(DDP_EXAMPLE / "job.yaml"),
        overrides=["spec.replicas=1", "spec.procsPerReplica=2", f'spec.run.python=[{train},--steps,"5"]'],
    )
    status = run_job(job, DDP_EXAMPLE)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    logs = log_lines(status.job_id)
    assert sorted(logs) == ["worker-0.0", "worker-0.1"]
    sums = {**checksums(logs["worker-0.0"]), **checksums(logs["worker-0.1"])}
    _same_checksum_on_every_rank(sums, 2)
    assert checksums(logs["worker-0.1"]).keys() == {1}  # local rank 1 is global rank 1, in its own log


TF_TASK = """\
import json, os, socket
# One TF task: read TF_CONFIG, bind the address the cluster gives this task, report what it saw.
config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
bound = None
if task["type"] in config["cluster"]:
    host, port = config["cluster"][task["type"]][task["index"]].rsplit(":", 1)
    with socket.socket() as s:
        s.bind((host, int(port)))  # the task's own address must be one it can serve on
        s.listen()
        bound = s.getsockname()[1]
print(json.dumps({"config": config, "bound": bound, "role": os.environ["KUBETRAIN_ROLE"],
                  "index": int(os.environ["KUBETRAIN_REPLICA_INDEX"])}), flush=True)
"""


def test_tf_config_contract_across_chief_worker_ps_and_evaluator(tmp_path: Path) -> None:
    write(tmp_path / "task.py", TF_TASK)
    job = make_job(
        {
            "framework": "tensorflow",
            "run": {"python": ["task.py"]},
            "roles": {"chief": {}, "worker": {"replicas": 2}, "ps": {"replicas": 1}, "evaluator": {}},
        },
        "tf",
    )
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    reports = [r for lines in log_lines(status.job_id).values() for r in parse_json_lines(lines)]
    assert sorted((r["role"], r["index"]) for r in reports) == [
        ("chief", 0),
        ("evaluator", 0),
        ("ps", 0),
        ("worker", 0),
        ("worker", 1),
    ]
    clusters = [r["config"]["cluster"] for r in reports]
    assert all(c == clusters[0] for c in clusters), "tasks disagree on the cluster"
    cluster = clusters[0]
    assert set(cluster) == {"chief", "worker", "ps"}  # the evaluator is outside the cluster
    assert len(cluster["worker"]) == 2
    addresses = [a for role in cluster.values() for a in role]
    assert len(set(addresses)) == len(addresses)
    for r in reports:
        assert r["config"]["task"] == {"type": r["role"], "index": r["index"]}
        if r["role"] == "evaluator":
            assert r["bound"] is None
        else:
            own = cluster[r["role"]][r["index"]]
            assert r["bound"] == int(own.rsplit(":", 1)[1])


def test_tf_config_example_script(tmp_path: Path) -> None:
    """The example's own print_tf_config.py, through the CLI with --set (as its job file suggests)."""
    result = cli(
        "run", EXAMPLES / "tensorflow-multiworker" / "job.yaml", "--set", "spec.run.python=[print_tf_config.py]"
    )
    assert result.returncode == 0, result.stderr
    configs = parse_json_lines(result.stdout.splitlines())
    assert sorted((c["task"]["type"], c["task"]["index"]) for c in configs) == [
        ("chief", 0),
        ("worker", 0),
        ("worker", 1),
    ]
    assert len({json.dumps(c["cluster"], sort_keys=True) for c in configs}) == 1


@pytest.mark.slow
def test_mpi_allreduce_over_two_ranks() -> None:
    """The mpi framework's launcher replica runs mpirun over the hostfile; mpi4py's allreduce sums the
    ranks 0 + 1 on both of them."""
    if shutil.which("mpirun") is None:
        pytest.fail("mpirun is not installed: scripts/test.sh installs openmpi-bin")
    job = load(str(EXAMPLES / "mpi-allreduce" / "job.yaml"))
    status = run_job(job, EXAMPLES / "mpi-allreduce")
    lines = log_lines(status.job_id)["launcher-0"]
    assert status.phase is JobPhase.SUCCEEDED, "\n".join([status.summary_line(), *lines])
    ranks = sorted(line.split()[1] for line in lines if line.startswith("rank ") and " of 2 " in line)
    assert ranks == ["0", "1"]
    assert [line for line in lines if line.startswith("allreduce-sum")] == ["allreduce-sum 1"] * 2


def test_jax_env_contract(tmp_path: Path) -> None:
    """examples/jax-env/print_env.py (no jax needed) in 2 replicas × 2 processes: one coordinator for all,
    the process count, and process ids 0..3, each once."""
    job = load(
        str(EXAMPLES / "jax-env" / "job.yaml"), overrides=["spec.run.python=[print_env.py]", "spec.procsPerReplica=2"]
    )
    status = run_job(job, EXAMPLES / "jax-env")
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    seen = [env for lines in log_lines(status.job_id).values() for env in parse_json_lines(lines)]
    assert len(seen) == 4
    assert len({e["JAX_COORDINATOR_ADDRESS"] for e in seen}) == 1
    assert {e["JAX_NUM_PROCESSES"] for e in seen} == {"4"}
    assert sorted(int(e["JAX_PROCESS_ID"]) for e in seen) == [0, 1, 2, 3]
    cluster = json.loads(seen[0]["KUBETRAIN_CLUSTER"])
    assert seen[0]["JAX_COORDINATOR_ADDRESS"] == cluster["worker"][0]  # process 0's replica hosts it
    for env in seen:  # ids are consistent with the replica: replica r holds ids 2r and 2r+1
        assert int(env["JAX_PROCESS_ID"]) // 2 == int(env["KUBETRAIN_REPLICA_INDEX"])


def test_generic_example_replicas_find_their_peers() -> None:
    job = load(str(EXAMPLES / "generic" / "job.yaml"))
    status = run_job(job, EXAMPLES / "generic")
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    logs = log_lines(status.job_id)
    assert "greeting serving" in logs["server-0"]
    peers = [line for line in logs["client-1"] if line.startswith("peer ")]
    assert [line.rsplit(" ", 1)[0] for line in peers] == ["peer server 0", "peer client 0", "peer client 1"]
    assert peers == [line for line in logs["client-0"] if line.startswith("peer ")]


def test_quick_form_pytorch_env_without_torch(tmp_path: Path) -> None:
    """The quick form wires the torch env contract for any program: ranks 0 and 1 of world 2."""
    write(
        tmp_path / "env.py",
        "import os\nprint('RANKINFO', os.environ['RANK'], os.environ['WORLD_SIZE'], "
        "os.environ['MASTER_ADDR'], os.environ['MASTER_PORT'], flush=True)\n",
    )
    result = cli("run", "--framework", "pytorch", "--replicas", "2", "--", "python", "env.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    infos = sorted(line.split("RANKINFO ", 1)[1].split() for line in result.stdout.splitlines() if "RANKINFO" in line)
    assert [i[:2] for i in infos] == [["0", "2"], ["1", "2"]]
    assert infos[0][2:] == infos[1][2:]  # one master address for both


def test_job_file_relative_paths_resolve_against_the_file(tmp_path: Path) -> None:
    """A job runs the same from any current directory: its relative script path is the file's folder."""
    write(tmp_path / "jobdir" / "hello.py", "print('hello from', __file__, flush=True)\n")
    path = job_file(tmp_path / "jobdir", {"framework": "generic", "replicas": 1, "run": {"python": ["hello.py"]}})
    result = cli("run", path, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "hello from" in result.stdout
