"""DeepSpeed's wiring, locally and on Kubernetes: the argv and env every replica gets, with no ssh anywhere.

Without a launcher role every replica starts its own ranks (kubetrain per process locally; on Kubernetes a
pod's one process, or the deepspeed launcher for the pod's own node with `--no_ssh --node_rank`). With a
launcher role the launcher replica runs `deepspeed --no_ssh --node_rank=N` once per worker node, which
works where every node is on its host (locally) and is refused where that would take ssh (Kubernetes).
The real runs are in tests/local/test_deepspeed.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubetrain.backends.kubernetes.flavors import FLAVORS
from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.frameworks import local_topology
from kubetrain.frameworks.deepspeed import NODE_LAUNCH
from kubetrain.jobspec import SpecError
from kubetrain.plan import Plan, plan, replica_counts
from tests.kubernetes.render.test_env import DUMP_ENV, check_parity, engine_env, sys_executable
from tests.support.helpers import make_job
from tests.support.kubelet import IMAGE, kubelet_env, main_container, pod_templates, run_container
from tests.support.manifest_schemas import assert_valid
from tests.support.render import render

PORTS = [41001, 41002, 41003, 41004, 41005]
PROGRAM = {"python": ["train.py", "--deepspeed_config", "ds.json"]}


def local_plan(spec: dict[str, Any], files_dir: str = "/files") -> Plan:
    job = make_job(spec, "demo", image=IMAGE)
    return plan(job, local_topology(replica_counts(job.spec), PORTS), name="demo", files_dir=files_dir)


# -- without a launcher role ------------------------------------------------------------------------------


def test_locally_each_replica_starts_its_ranks_with_the_torch_contract() -> None:
    p = local_plan({"framework": "deepspeed", "replicas": 2, "procsPerReplica": 2, "localRank": True,
                    "run": PROGRAM})
    seen = {proc.key: proc for proc in p.processes}
    assert list(seen) == ["worker-0.0", "worker-0.1", "worker-1.0", "worker-1.1"]
    for rank, proc in enumerate(seen.values()):
        assert proc.argv == ("python", "train.py", "--deepspeed_config", "ds.json", f"--local_rank={rank % 2}")
        assert (proc.env["RANK"], proc.env["LOCAL_RANK"], proc.env["NODE_RANK"]) == (
            str(rank), str(rank % 2), str(rank // 2))
        assert (proc.env["WORLD_SIZE"], proc.env["MASTER_ADDR"], proc.env["MASTER_PORT"]) == ("4", "127.0.0.1",
                                                                                               "41001")
        assert proc.env["KUBETRAIN_HOSTFILE"] == "/files/hostfile"
    assert p.files == {"hostfile": "localhost slots=4\n"}


def test_kubernetes_pods_of_one_process_run_the_program_itself() -> None:
    job = make_job({"framework": "deepspeed", "replicas": 2, "localRank": True, "run": PROGRAM}, "demo", image=IMAGE)
    container = main_container(pod_templates(render(job, "jobset"))["worker"])
    assert container["args"] == ["python", "train.py", "--deepspeed_config", "ds.json", "--local_rank=0"]


SEVERAL = {"framework": "deepspeed", "replicas": 2, "procsPerReplica": 2, "localRank": True,
           "run": {**PROGRAM, "otherArgs": ["--bind_cores_to_rank"]}}


def test_a_pod_of_several_processes_runs_the_deepspeed_launcher_for_its_node() -> None:
    """Not torchrun (which passes no --local_rank): `deepspeed --no_ssh --node_rank=$NODE_RANK` over the
    hostfile, whose lines are the pods; argv the same for every pod."""
    rendered = render_manifests(make_job(SEVERAL, "demo", image=IMAGE), "job")
    container = main_container(pod_templates(rendered.objects)["worker"])
    assert container["args"] == [
        "/bin/sh", "-c", NODE_LAUNCH.replace("$", "$$"), "deepspeed", "--no_ssh", "--hostfile=/etc/kubetrain/hostfile",
        "--master_addr=demo-worker-0.demo", "--master_port=29500", "--bind_cores_to_rank",
        "train.py", "--deepspeed_config", "ds.json",
    ]
    configmap = next(o for o in rendered.objects if o["kind"] == "ConfigMap")
    assert configmap["data"] == {"hostfile": "demo-worker-0.demo slots=2\ndemo-worker-1.demo slots=2\n"}
    # Restricted pods: nothing of ssh is asked for.
    security = container["securityContext"]
    assert security == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


@pytest.mark.parametrize("flavor", list(FLAVORS))
def test_the_node_launch_gets_its_replicas_node_rank_in_every_flavor(flavor: str, tmp_path: Path) -> None:
    """Each pod run as the kubelet would: the env is the local plan's (check_parity), and `deepspeed` (a
    stand-in on PATH that reports what it was given) gets `--node_rank=<the replica's index>`."""
    job = make_job({**SEVERAL, "localRank": False}, "demo", image=IMAGE)
    assert check_parity(job, flavor, tmp_path=tmp_path) == 2
    fake = tmp_path / "deepspeed"
    fake.write_text(f"#!/bin/sh\nexec {sys_executable()} -c \"{DUMP_ENV}\" \"$@\"\n")
    fake.chmod(0o755)
    objects = render(job, flavor)
    assert_valid(objects)
    container = main_container(pod_templates(objects)["worker"])
    for index in range(2):
        engine, fields = engine_env(flavor, "worker", index)
        env = kubelet_env(container, fields, engine)
        code, seen, err = run_container(container, env, path_dir=tmp_path, program=["/usr/bin/env"])
        assert code == 0, err
        assert seen is not None
        assert seen["argv"][:3] == [f"--node_rank={index}", "--no_ssh", "--hostfile=/etc/kubetrain/hostfile"]
        assert "--no_local_rank" in seen["argv"]  # localRank: false
        assert seen["env"]["NODE_RANK"] == str(index)


def test_elastic_jobs_keep_torchrun_elastic_agent() -> None:
    job = make_job({"framework": "deepspeed", "replicas": 2, "procsPerReplica": 2, "run": PROGRAM,
                    "elastic": {"minReplicas": 1, "maxReplicas": 3}}, "demo", image=IMAGE)
    container = main_container(pod_templates(render(job, "job"))["worker"])
    assert container["args"][:3] == ["python", "-m", "torch.distributed.run"]


# -- with a launcher role -----------------------------------------------------------------------------------

LAUNCHED = {"framework": "deepspeed", "procsPerReplica": 2, "env": {"FROM_JOB": "1"},
            "run": {**PROGRAM, "otherArgs": ["--bind_cores_to_rank"]},
            "roles": {"launcher": {}, "worker": {"replicas": 2}}}


def test_locally_the_launcher_runs_one_no_ssh_launch_per_worker_node() -> None:
    p = local_plan(LAUNCHED)
    launcher, *workers = p.replicas
    assert [proc.key for proc in launcher.processes] == ["launcher-0.0", "launcher-0.1"]
    assert [len(w.processes) for w in workers] == [0, 0]  # workers host their node's ranks
    assert p.files == {"hostfile": "localhost slots=4\n", "nodefile": "worker-0 slots=2\nworker-1 slots=2\n"}
    worker0_port = p.topology.port("worker", 0)
    for node, proc in enumerate(launcher.processes):
        assert proc.argv == (
            "deepspeed", f"--node_rank={node}", "--no_ssh", "--hostfile=/files/nodefile", "--master_addr=127.0.0.1",
            f"--master_port={worker0_port}", "--no_local_rank", "--bind_cores_to_rank",
            "train.py", "--deepspeed_config", "ds.json",
        )
        # What worker `node`'s ranks would get without a launcher (deepspeed adds RANK and LOCAL_RANK).
        env = proc.env
        assert (env["KUBETRAIN_ROLE"], env["KUBETRAIN_REPLICA_INDEX"], env["NODE_RANK"]) == ("worker", str(node),
                                                                                            str(node))
        assert (env["WORLD_SIZE"], env["MASTER_ADDR"], env["MASTER_PORT"]) == ("4", "127.0.0.1", str(worker0_port))
        assert set(json.loads(env["KUBETRAIN_CLUSTER"])) == {"launcher", "worker"}
    # The hosting workers' env says the same: rank 0 is worker 0's, the launcher is no node.
    wired = {wiring.role: wiring for wiring in p.roles}["worker"]
    assert (wired.env["MASTER_PORT"], wired.env["WORLD_SIZE"]) == (str(worker0_port), "4")
    assert worker0_port != p.topology.port("launcher", 0)


@pytest.mark.parametrize(
    ("spec", "tail"),
    [
        ({"localRank": True, "run": {"module": ["pkg.train", "--x"]}}, ["--module", "pkg.train", "--x"]),
        ({"run": {"exec": ["./train", "--x"], "otherArgs": ["--bind_cores_to_rank"]}},
         ["--no_local_rank", "--bind_cores_to_rank", "--no_python", "./train", "--x"]),
    ],
)
def test_launcher_program_forms(spec: dict[str, Any], tail: list[str]) -> None:
    p = local_plan({"framework": "deepspeed", "roles": {"launcher": {}, "worker": {"replicas": 1}}, **spec})
    (proc,) = p.processes
    assert proc.key == "launcher-0"
    assert list(proc.argv[-len(tail):]) == tail
    assert ("--no_local_rank" in proc.argv) is not spec.get("localRank", False)


def test_a_launcher_with_its_own_command_runs_it() -> None:
    p = local_plan({"framework": "deepspeed", "run": {"python": ["t.py"]},
                    "roles": {"launcher": {"run": {"customCommand": "my-launch --all"}}, "worker": {"replicas": 2}}})
    assert [proc.argv for proc in p.processes] == [("/bin/sh", "-c", "my-launch --all")]


@pytest.mark.parametrize("flavor", list(FLAVORS))
def test_kubernetes_refuses_the_launcher_role_it_would_need_ssh_for(flavor: str) -> None:
    job = make_job(LAUNCHED, "demo", image=IMAGE)
    with pytest.raises(SpecError) as info:
        render(job, flavor)
    assert "spec.roles.launcher" in info.value.paths
    text = str(info.value)
    assert "takes ssh" in text and "drop the launcher role" in text


def test_elastic_takes_no_launcher_role() -> None:
    job = make_job({**LAUNCHED, "elastic": {"minReplicas": 1, "maxReplicas": 3}}, "demo", image=IMAGE)
    with pytest.raises(SpecError) as info:
        plan(job)
    assert info.value.paths == ["spec.roles.launcher"]


def test_a_launcher_needs_workers() -> None:
    job = make_job({"framework": "deepspeed", "run": {"python": ["t.py"]}, "roles": {"launcher": {}}},
                   "demo", image=IMAGE)
    with pytest.raises(SpecError) as info:
        plan(job)
    assert info.value.paths == ["spec.roles"]
