"""TrainJob → Plan, per framework, as pure functions: the env and argv every replica gets.

These are the contracts a training script relies on (torch.distributed's env://, TF_CONFIG, mpirun's
hostfile, JAX's coordinator), held without starting a process.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubetrain.frameworks import Topology, local_topology
from kubetrain.plan import Plan, ProcessPlan, default_topology, plan, replica_counts
from kubetrain.restart_policy import RestartRules
from tests.support.helpers import make_job

PORTS = [41001, 41002, 41003, 41004, 41005, 41006, 41007, 41008]


def make_plan(spec: dict[str, Any], name: str = "job", **kw: Any) -> Plan:
    job = make_job(spec, name)
    topology = kw.pop("topology", None) or local_topology(replica_counts(job.spec), PORTS)
    return plan(job, topology, name=name, **kw)


def procs(p: Plan) -> dict[str, ProcessPlan]:
    return {proc.key: proc for proc in p.processes}


# -- the common contract ------------------------------------------------------------------------------


def test_every_replica_gets_the_common_variables_and_the_cluster() -> None:
    p = make_plan(
        {
            "framework": "generic",
            "run": {"python": ["serve.py"]},
            "roles": {"server": {"replicas": 1}, "client": {"replicas": 2}},
        },
        name="demo",
    )
    by_key = procs(p)
    assert list(by_key) == ["server-0", "client-0", "client-1"]
    cluster = {"server": ["127.0.0.1:41001"], "client": ["127.0.0.1:41002", "127.0.0.1:41003"]}
    for key, proc in by_key.items():
        role, index = key.rsplit("-", 1)
        assert proc.env["KUBETRAIN_JOB"] == "demo"
        assert proc.env["KUBETRAIN_FRAMEWORK"] == "generic"
        assert proc.env["KUBETRAIN_ROLE"] == role
        assert proc.env["KUBETRAIN_REPLICA_INDEX"] == index
        assert proc.env["KUBETRAIN_NUM_REPLICAS"] == str(len(cluster[role]))
        assert json.loads(proc.env["KUBETRAIN_CLUSTER"]) == cluster
        assert proc.argv == ("python", "serve.py")


@pytest.mark.parametrize(
    ("run", "argv"),
    [
        ({"python": ["train.py", "--lr", "0.1"]}, ["python", "train.py", "--lr", "0.1"]),
        ({"python": ["train.py"], "otherArgs": ["-u"]}, ["python", "-u", "train.py"]),
        ({"module": ["pkg.train", "--x"]}, ["python", "-m", "pkg.train", "--x"]),
        ({"exec": ["./train", "--fast"]}, ["./train", "--fast"]),
        ({"customCommand": "make data && python t.py"}, ["/bin/sh", "-c", "make data && python t.py"]),
        ({"customCommand": ["bash", "run.sh", "a b"]}, ["bash", "run.sh", "a b"]),
    ],
)
def test_run_forms_become_argv_lists(run: dict[str, Any], argv: list[str]) -> None:
    p = make_plan({"framework": "generic", "replicas": 1, "run": run})
    assert list(p.processes[0].argv) == argv


def test_an_argument_with_shell_characters_stays_one_argument() -> None:
    p = make_plan({"framework": "pytorch", "replicas": 1, "run": {"python": ["t.py", "--name", "a b; rm -rf /"]}})
    assert p.processes[0].argv[-1] == "a b; rm -rf /"


def test_plan_to_dict_is_json_with_policies() -> None:
    p = make_plan(
        {
            "framework": "generic",
            "replicas": 2,
            "run": {"python": ["t.py"]},
            "restartPolicy": "ExitCode",
            "exitCodes": {"retryable": [75], "permanent": [137]},
            "runPolicy": {"backoffLimit": 3, "activeDeadlineSeconds": 60},
            "runMode": "Debug",
        }
    )
    data = json.loads(json.dumps(p.to_dict()))
    assert data["restart"] == {"policy": "ExitCode", "backoffLimit": 3, "retryable": [75], "permanent": [137]}
    assert data["activeDeadlineSeconds"] == 60
    assert data["runMode"] == "Debug"
    assert [r["processes"][0]["key"] for r in data["replicas"]] == ["worker-0", "worker-1"]


def test_default_topology_is_deterministic() -> None:
    job = make_job({"framework": "pytorch", "replicas": 2, "run": {"python": ["t.py"]}})
    assert plan(job).to_dict() == plan(job, default_topology(job)).to_dict()
    assert plan(job).processes[0].env["MASTER_PORT"] == "29500"


# -- pytorch --------------------------------------------------------------------------------------------


def test_pytorch_env_contract() -> None:
    by_key = procs(make_plan({"framework": "pytorch", "replicas": 2, "run": {"python": ["t.py"]}}))
    for rank, key in enumerate(["worker-0", "worker-1"]):
        env = by_key[key].env
        assert env["MASTER_ADDR"] == "127.0.0.1"
        assert env["MASTER_PORT"] == "41001"  # worker-0's own port: rank 0 binds it
        assert env["WORLD_SIZE"] == "2"
        assert env["RANK"] == env["NODE_RANK"] == str(rank)
        assert env["LOCAL_RANK"] == "0"
        assert env["LOCAL_WORLD_SIZE"] == "1"


def test_pytorch_ranks_across_roles_with_procs_per_replica() -> None:
    p = make_plan(
        {
            "framework": "pytorch",
            "procsPerReplica": 2,
            "run": {"python": ["t.py"]},
            "roles": {"worker": {"replicas": 2}, "master": {"replicas": 1}},
        }
    )
    by_key = procs(p)
    # The master comes first whatever the order written, then the workers; consecutive ranks per replica.
    assert list(by_key) == ["master-0.0", "master-0.1", "worker-0.0", "worker-0.1", "worker-1.0", "worker-1.1"]
    ranks = [int(proc.env["RANK"]) for proc in by_key.values()]
    assert ranks == list(range(6))
    assert {proc.env["WORLD_SIZE"] for proc in by_key.values()} == {"6"}
    assert [proc.env["LOCAL_RANK"] for proc in by_key.values()] == ["0", "1"] * 3
    assert [proc.env["NODE_RANK"] for proc in by_key.values()] == ["0", "0", "1", "1", "2", "2"]
    assert {proc.env["MASTER_PORT"] for proc in by_key.values()} == {"41001"}  # master-0's port
    assert {proc.env["LOCAL_WORLD_SIZE"] for proc in by_key.values()} == {"2"}


def test_pytorch_ranks_when_roles_differ_in_procs_per_replica() -> None:
    """A master with 1 process and workers with 2 each: either the spec refuses it, or the ranks are
    0..N-1 with one WORLD_SIZE — a rank gap or two world sizes hang init_process_group."""
    from kubetrain.jobspec import SpecError

    try:
        p = make_plan(
            {
                "framework": "pytorch",
                "run": {"python": ["t.py"]},
                "roles": {"master": {"replicas": 1}, "worker": {"replicas": 2, "procsPerReplica": 2}},
            }
        )
    except SpecError:
        return
    ranks = sorted(int(proc.env["RANK"]) for proc in p.processes)
    assert ranks == list(range(len(ranks)))
    assert {proc.env["WORLD_SIZE"] for proc in p.processes} == {str(len(ranks))}


def test_pytorch_local_rank_argument() -> None:
    p = make_plan(
        {"framework": "pytorch", "replicas": 1, "procsPerReplica": 2, "localRank": True, "run": {"python": ["t.py"]}}
    )
    assert [list(proc.argv) for proc in p.processes] == [
        ["python", "t.py", "--local_rank=0"],
        ["python", "t.py", "--local_rank=1"],
    ]


def test_pytorch_elastic_runs_torchrun_with_pet_variables() -> None:
    p = make_plan(
        {
            "framework": "pytorch",
            "replicas": 2,
            "procsPerReplica": 2,
            "elastic": {"minReplicas": 1, "maxReplicas": 3, "maxRestarts": 4},
            "run": {"python": ["t.py", "--steps", "5"]},
        },
        name="el",
    )
    assert [p_.key for p_ in p.processes] == ["worker-0", "worker-1"]  # one agent per replica
    for proc in p.processes:
        assert list(proc.argv) == ["python", "-m", "torch.distributed.run", "t.py", "--steps", "5"]
        env = proc.env
        assert env["PET_NNODES"] == "1:3"
        assert env["PET_MAX_RESTARTS"] == "4"
        assert env["PET_NPROC_PER_NODE"] == "2"
        assert env["PET_RDZV_BACKEND"] == "c10d"
        assert env["PET_RDZV_ENDPOINT"] == "127.0.0.1:41001"
        assert env["PET_RDZV_ID"] == "el"
        assert "RANK" not in env  # torchrun assigns ranks at rendezvous


def test_pytorch_without_local_launch_uses_a_static_torchrun_per_replica() -> None:
    """On Kubernetes (launcher_procs=False) each pod runs torchrun with its node rank."""
    p = make_plan(
        {"framework": "pytorch", "replicas": 2, "procsPerReplica": 4, "run": {"module": ["pkg.train"]}},
        launcher_procs=False,
    )
    for node, proc in enumerate(p.processes):
        assert list(proc.argv) == ["python", "-m", "torch.distributed.run", "-m", "pkg.train"]
        assert proc.env["PET_NNODES"] == "2"
        assert proc.env["PET_NODE_RANK"] == str(node)
        assert proc.env["PET_NPROC_PER_NODE"] == "4"
        assert proc.env["PET_RDZV_BACKEND"] == "static"
        assert proc.env["PET_MASTER_ADDR"] == "127.0.0.1"
        assert proc.env["PET_MASTER_PORT"] == "41001"


# -- tensorflow -----------------------------------------------------------------------------------------


def test_tf_config_cluster_and_tasks() -> None:
    p = make_plan(
        {
            "framework": "tensorflow",
            "run": {"python": ["t.py"]},
            "roles": {"evaluator": {}, "ps": {"replicas": 2}, "worker": {"replicas": 2}, "chief": {}},
        }
    )
    configs = {proc.key: json.loads(proc.env["TF_CONFIG"]) for proc in p.processes}
    cluster = {
        "chief": ["127.0.0.1:41001"],
        "worker": ["127.0.0.1:41002", "127.0.0.1:41003"],
        "ps": ["127.0.0.1:41004", "127.0.0.1:41005"],
    }
    assert set(configs) == {"chief-0", "worker-0", "worker-1", "ps-0", "ps-1", "evaluator-0"}
    for key, config in configs.items():
        role, index = key.rsplit("-", 1)
        assert config["cluster"] == cluster  # the evaluator is never part of the cluster
        assert config["task"] == {"type": role, "index": int(index)}
        if role != "evaluator":
            # The task's own entry is the port this replica was given: the one it binds.
            assert config["cluster"][role][int(index)] == p.topology.address(role, int(index))


# -- mpi ------------------------------------------------------------------------------------------------


def test_mpi_launcher_argv_and_hostfile() -> None:
    p = make_plan(
        {
            "framework": "mpi",
            "replicas": 2,
            "procsPerReplica": 3,
            "run": {"python": ["allreduce.py", "--n", "4"], "otherArgs": ["--bind-to", "none"]},
        },
        files_dir="/run/kt",
    )
    assert [r.key for r in p.replicas] == ["launcher-0", "worker-0", "worker-1"]
    assert [proc.key for proc in p.processes] == ["launcher-0"]  # mpirun starts every rank
    launcher = p.processes[0]
    assert list(launcher.argv) == [
        "mpirun",
        "--hostfile",
        "/run/kt/hostfile",
        "-np",
        "6",
        "--bind-to",
        "none",
        "python",
        "allreduce.py",
        "--n",
        "4",
    ]
    assert launcher.env["KUBETRAIN_HOSTFILE"] == "/run/kt/hostfile"
    # Local replicas share one host: one line, their slots summed, as `localhost` (no ssh).
    assert p.files == {"hostfile": "localhost slots=6\n"}


def test_mpi_hostfile_lists_each_worker_host() -> None:
    job = make_job({"framework": "mpi", "replicas": 3, "procsPerReplica": 2, "run": {"python": ["a.py"]}}, "m")
    topology = Topology(
        roles=replica_counts(job.spec),
        host_pattern="m-{role}-{index}.m",
        role_ports={"launcher": 2222, "worker": 2222},
    )
    p = plan(job, topology)
    assert p.files["hostfile"] == "m-worker-0.m slots=2\nm-worker-1.m slots=2\nm-worker-2.m slots=2\n"
    assert "-np" in p.processes[0].argv
    assert p.processes[0].argv[p.processes[0].argv.index("-np") + 1] == "6"


def test_mpi_custom_command_replaces_mpirun() -> None:
    p = make_plan({"framework": "mpi", "replicas": 2, "run": {"customCommand": ["horovodrun", "-np", "2", "t"]}})
    assert list(p.processes[0].argv) == ["horovodrun", "-np", "2", "t"]


# -- deepspeed ------------------------------------------------------------------------------------------


def test_deepspeed_per_node_launch_gets_torch_env_and_hostfile() -> None:
    p = make_plan(
        {"framework": "deepspeed", "replicas": 2, "localRank": True, "run": {"python": ["t.py"]}},
        files_dir="/etc/kubetrain",
    )
    assert p.files == {"hostfile": "localhost slots=2\n"}
    for rank, proc in enumerate(p.processes):
        assert list(proc.argv) == ["python", "t.py", "--local_rank=0"]
        assert proc.env["RANK"] == str(rank)
        assert proc.env["WORLD_SIZE"] == "2"
        assert proc.env["MASTER_PORT"] == "41001"
        assert proc.env["KUBETRAIN_HOSTFILE"] == "/etc/kubetrain/hostfile"


def test_deepspeed_launcher_role_runs_the_deepspeed_launcher() -> None:
    p = make_plan(
        {
            "framework": "deepspeed",
            "procsPerReplica": 2,
            "run": {"python": ["t.py", "--deepspeed_config", "ds.json"]},
            "roles": {"launcher": {}, "worker": {"replicas": 2}},
        },
        files_dir="/etc/kubetrain",
    )
    # The launcher replica starts one DeepSpeed launcher per worker node, by node rank, with no ssh; the
    # workers only host the processes (as their pods would). Node N's ranks get worker N's env.
    assert [proc.key for proc in p.processes] == ["launcher-0.0", "launcher-0.1"]
    for node, proc in enumerate(p.processes):
        argv = list(proc.argv)
        assert argv[:3] == ["deepspeed", f"--node_rank={node}", "--no_ssh"]
        assert "--hostfile=/etc/kubetrain/nodefile" in argv
        assert "--master_addr=127.0.0.1" in argv
        assert argv[-3:] == ["t.py", "--deepspeed_config", "ds.json"]
        assert proc.env["NODE_RANK"] == str(node) and proc.env["KUBETRAIN_ROLE"] == "worker"
    assert p.files == {"hostfile": "localhost slots=4\n", "nodefile": "worker-0 slots=2\nworker-1 slots=2\n"}


@pytest.mark.parametrize(
    ("run", "tail"),
    [
        ({"module": ["pkg.train", "--x"]}, ["--module", "pkg.train", "--x"]),
        ({"exec": ["./train"]}, ["--no_python", "./train"]),
    ],
)
def test_deepspeed_launcher_module_and_exec(run: dict[str, Any], tail: list[str]) -> None:
    p = make_plan({"framework": "deepspeed", "run": run, "roles": {"launcher": {}, "worker": {"replicas": 1}}})
    assert list(p.processes[0].argv[-len(tail) :]) == tail


def test_deepspeed_launcher_master_port_is_worker_0s_port() -> None:
    p = make_plan(
        {"framework": "deepspeed", "run": {"python": ["t.py"]}, "roles": {"launcher": {}, "worker": {"replicas": 2}}}
    )
    assert f"--master_port={p.topology.port('worker', 0)}" in p.processes[0].argv


# -- jax ------------------------------------------------------------------------------------------------


def test_jax_env_contract() -> None:
    p = make_plan({"framework": "jax", "replicas": 2, "procsPerReplica": 2, "run": {"python": ["t.py"]}})
    envs = [proc.env for proc in p.processes]
    assert {e["JAX_COORDINATOR_ADDRESS"] for e in envs} == {"127.0.0.1:41001"}
    assert {e["JAX_NUM_PROCESSES"] for e in envs} == {"4"}
    assert [e["JAX_PROCESS_ID"] for e in envs] == ["0", "1", "2", "3"]


# -- the user's env is the backend's ---------------------------------------------------------------------


def test_the_plans_env_is_the_frameworks_alone() -> None:
    """The user's env list is each backend's to pass on (tests/local/test_launch.py: the local expansion;
    the render lists it in the container): the plan carries the framework's env only."""
    p = make_plan(
        {
            "framework": "pytorch",
            "replicas": 2,
            "run": {"python": ["t.py"]},
            "env": [
                {"name": "BASE", "value": "/data"},
                {"name": "RANK", "value": "99"},  # the user's value would win; not the plan's to apply
                {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "api"}}},
            ],
        }
    )
    for rank, proc in enumerate(p.processes):
        assert "BASE" not in proc.env and "API_KEY" not in proc.env
        assert proc.env["RANK"] == str(rank)


# -- restart rules --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "retryable", "permanent", "returncode", "retried"),
    [
        ("Never", (), (), 137, False),
        ("OnFailure", (), (), 1, True),
        ("Always", (), (), 3, True),
        ("OnFailure", (), (), 0, False),
        ("ExitCode", (), (), 1, False),
        ("ExitCode", (), (), 137, True),
        ("ExitCode", (), (), -9, True),  # killed by SIGKILL counts as 137
        ("ExitCode", (75,), (), 75, True),
        ("ExitCode", (), (137,), 137, False),
        ("ExitCode", (), (), 127, False),
    ],
)
def test_restart_rules(
    policy: str, retryable: tuple[int, ...], permanent: tuple[int, ...], returncode: int, retried: bool
) -> None:
    rules = RestartRules(policy, 3, frozenset(retryable), frozenset(permanent))
    assert rules.retryable_exit(returncode) is retried
    assert RestartRules.from_dict(rules.to_dict()) == rules
