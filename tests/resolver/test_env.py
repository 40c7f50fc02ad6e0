"""EnvClusterResolver and ClusterSpec: the same answers as the env contract kubetrain gives each replica
(every framework, local and Kubernetes addresses), `kubetrain resolve`'s output, and a light import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.contract import naming
from kubetrain.jobspec import TrainJob
from kubetrain.plan import Plan, plan
from kubetrain.resolver import (
    ClusterSpec,
    EnvClusterResolver,
    expand_cluster,
    format_master_url,
    local_accelerators,
    resolve_output,
)
from kubetrain.resolver.apiserver import kubetrain_mapping, label_value
from kubetrain.resolver.env import main as resolve_main
from kubetrain.status import JobPhase
from tests.support.helpers import (  # noqa: F401 (no_process_left_behind: an autouse fixture)
    log_lines,
    make_job,
    no_process_left_behind,
    parse_json_lines,
    run_job,
    write,
)


def job_of(spec: dict[str, Any], name: str = "job") -> TrainJob:
    """A job that both backends can run (Kubernetes needs an image)."""
    return make_job(spec, name, image="python:3.11")


def process_envs(p: Plan) -> list[dict[str, str]]:
    return [proc.env for replica in p.replicas for proc in replica.processes]


def kubernetes_plan(job: TrainJob) -> Plan:
    """The plan with the addresses the `job` flavor gives (stable DNS names), one launcher per pod."""
    topology = render_manifests(job, "job").topology
    assert topology is not None
    return plan(job, topology, launcher_procs=False)


TF_JOB = {
    "framework": "tensorflow",
    "run": {"python": ["t.py"]},
    "roles": {"chief": {}, "worker": {"replicas": 2}, "ps": {"replicas": 1}, "evaluator": {}},
}


def test_the_cluster_a_tf_replica_reads_is_the_one_its_framework_record_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """One source for the roles of TF_CONFIG's cluster: the framework's record. The wiring writes TF_CONFIG from it
    and the resolver reads the cluster back by it (here a record that would keep the evaluator in: both follow)."""
    from kubetrain.contract import frameworks

    tf = frameworks.RECORDS[frameworks.Framework.TENSORFLOW]
    assert tf.cluster_roles == ("chief", "worker", "ps")
    wider = replace(tf, cluster_roles=("chief", "worker", "ps", "evaluator"))
    monkeypatch.setattr(frameworks, "RECORDS", MappingProxyType({**frameworks.RECORDS, tf.name: wider}))
    for env in process_envs(plan(job_of(TF_JOB, "tf"))):
        written = list(json.loads(env["TF_CONFIG"])["cluster"])
        assert written == ["chief", "worker", "ps", "evaluator"]
        assert EnvClusterResolver(environ=env).cluster_spec().jobs == written
        assert list(kubetrain_mapping(env) or {}) == written


# -- ClusterSpec and KUBETRAIN_CLUSTER -----------------------------------------------------------------------


def test_cluster_spec_value() -> None:
    spec = ClusterSpec({"worker": ["a:1", "b:1"], "ps": ["c:2"]})
    assert spec.jobs == ["worker", "ps"]
    assert spec.num_tasks("worker") == 2 and spec.task_indices("worker") == [0, 1]
    assert spec.task_address("ps", 0) == "c:2"
    assert spec.job_tasks("worker") == ["a:1", "b:1"]
    d = spec.as_dict()
    d["worker"].append("x:1")  # a copy: the value does not change
    assert spec.num_tasks("worker") == 2
    assert spec == ClusterSpec(spec) == ClusterSpec({"worker": {1: "b:1", 0: "a:1"}, "ps": ["c:2"]})  # sparse form
    assert spec != ClusterSpec({"worker": ["b:1", "a:1"], "ps": ["c:2"]})  # task order matters
    assert hash(spec) == hash(ClusterSpec(spec.as_dict()))
    assert spec.as_tf_config("worker", 1) == {
        "cluster": {"worker": ["a:1", "b:1"], "ps": ["c:2"]},
        "task": {"type": "worker", "index": 1},
    }
    assert spec.as_tf_config(None, None) == {"cluster": spec.as_dict()}
    assert json.loads(spec.to_json()) == spec.as_dict()
    assert not ClusterSpec() and len(spec) == 2 and list(spec) == ["worker", "ps"]
    with pytest.raises(ValueError, match="no job 'chief'"):
        spec.task_address("chief", 0)
    with pytest.raises(ValueError, match="no task 2"):
        spec.task_address("worker", 2)
    for bad in ({"w": "a:1"}, {"w": [""]}, {"": ["a:1"]}, {"w": {1: "a:1"}}):
        with pytest.raises(ValueError):
            ClusterSpec(bad)
    with pytest.raises(TypeError):
        ClusterSpec(["a:1"])  # type: ignore[arg-type]
    assert format_master_url("a:1", "grpc") == "grpc://a:1" and format_master_url("a:1", None) == "a:1"


def test_expand_cluster_both_forms() -> None:
    assert expand_cluster('{"worker":["127.0.0.1:5","127.0.0.1:6"]}') == {"worker": ["127.0.0.1:5", "127.0.0.1:6"]}
    assert expand_cluster({"w": {"count": 3, "address": "j-w-{index}.j:2222"}, "m": {"count": 0, "address": "x"}}) == {
        "w": ["j-w-0.j:2222", "j-w-1.j:2222", "j-w-2.j:2222"],
        "m": [],
    }
    for bad in ("[]", '{"w": 3}', '{"w": {"count": -1, "address": "a"}}', '{"w": {"count": true, "address": "a"}}'):
        with pytest.raises(ValueError):
            expand_cluster(bad)


# -- TF_CONFIG ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["local", "kubernetes"])
def test_tf_config_equals_kubetrains_for_every_replica(where: str) -> None:
    job = job_of(TF_JOB, "tf")
    p = plan(job) if where == "local" else kubernetes_plan(job)
    envs = process_envs(p)
    assert len(envs) == 5
    for env in envs:
        r = EnvClusterResolver(environ=env)
        expected = json.loads(env["TF_CONFIG"])
        assert r.tf_config() == expected
        assert r.cluster_spec().jobs == ["chief", "worker", "ps"]  # the evaluator is outside the cluster
        assert (r.task_type, r.task_id) == (env["KUBETRAIN_ROLE"], int(env["KUBETRAIN_REPLICA_INDEX"]))
        assert set(r.cluster()) == {"chief", "worker", "ps", "evaluator"}  # every role
        if r.task_type != "evaluator":
            assert r.master() == "grpc://" + expected["cluster"][r.task_type][r.task_id]
            assert r.master(rpc_layer="grpc+verbs").startswith("grpc+verbs://")
        if where == "kubernetes":
            assert r.cluster_spec().task_address("worker", 1) == "tf-worker-1.tf:2222"


def test_tf_config_alone_is_enough() -> None:
    """Under a launcher that sets only TF_CONFIG (e.g. the training operator's TFJob)."""
    config = {
        "cluster": {"chief": ["c:1"], "worker": ["w0:1", "w1:1"]},
        "task": {"type": "worker", "index": 1},
        "rpc_layer": "grpc",
        "environment": "cloud",
    }
    r = EnvClusterResolver(environ={"TF_CONFIG": json.dumps(config)})
    assert r.cluster_spec().as_dict() == config["cluster"]
    assert (r.task_type, r.task_id) == ("worker", 1)
    assert r.master() == "grpc://w1:1"
    assert r.environment == "cloud"
    assert r.torch().as_env() == {  # ranks numbered across roles in order, the first replica is master
        "MASTER_ADDR": "c", "MASTER_PORT": "1", "WORLD_SIZE": "3", "RANK": "2", "LOCAL_RANK": "0",
        "NODE_RANK": "2", "LOCAL_WORLD_SIZE": "1",
    }  # fmt: skip
    with pytest.raises(ValueError, match="not JSON"):
        EnvClusterResolver(environ={"TF_CONFIG": "{"}).cluster_spec()


def test_no_environment_means_no_cluster() -> None:
    r = EnvClusterResolver(environ={})
    assert not r.cluster_spec()
    assert (r.task_type, r.task_id) == (None, None)
    assert r.master() == ""
    assert r.tf_config() == {"cluster": {}}
    with pytest.raises(ValueError, match="no cluster"):
        r.torch()
    r.task_type, r.task_id = "worker", 3
    assert (r.task_type, r.task_id) == ("worker", 3)


# -- other frameworks ------------------------------------------------------------------------------------------

TORCH_VARS = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK", "LOCAL_WORLD_SIZE")


@pytest.mark.parametrize("where", ["local", "kubernetes"])
@pytest.mark.parametrize("framework", ["pytorch", "deepspeed"])
def test_torch_helper_matches_the_contract(where: str, framework: str) -> None:
    job = job_of(
        {
            "framework": framework,
            "run": {"python": ["t.py"]},
            # pytorch: a master role numbered first; deepspeed (without a launcher): workers only
            "roles": {"master": {}, "worker": {"replicas": 2}}
            if framework == "pytorch"
            else {"worker": {"replicas": 3}},
            "procsPerReplica": 2,
        }
    )
    p = plan(job) if where == "local" else kubernetes_plan(job)
    ranks = []
    for env in process_envs(p):
        dist = EnvClusterResolver(environ=env).torch()
        expected = {k: env[k] for k in TORCH_VARS if k in env}
        assert {k: v for k, v in dist.as_env().items() if k in expected} == expected
        ranks.append(dist.rank)
        assert dist.init_method == f"tcp://{env['MASTER_ADDR']}:{env['MASTER_PORT']}"
    if where == "local":  # kubetrain starts each process with its RANK
        assert sorted(ranks) == list(range(6))
    else:  # torchrun does: before it, each pod's first rank (node rank × processes per pod)
        assert sorted(ranks) == [0, 2, 4]


def test_torch_and_jax_derived_from_the_cluster_match_their_frameworks() -> None:
    """A generic job has only the common variables: the helpers derive the same wiring the pytorch and jax
    frameworks give the same roles."""

    def envs(framework: str, roles: dict[str, Any]) -> list[dict[str, str]]:
        return process_envs(plan(job_of({"framework": framework, "run": {"python": ["t.py"]}, "roles": roles})))

    roles: dict[str, Any] = {"master": {}, "worker": {"replicas": 3}}
    for generic, torch in zip(envs("generic", roles), envs("pytorch", roles), strict=True):
        assert "MASTER_ADDR" not in generic
        derived = EnvClusterResolver(environ=generic).torch().as_env()
        keys = ("MASTER_ADDR", "WORLD_SIZE", "RANK", "NODE_RANK", "LOCAL_RANK")
        assert {k: derived[k] for k in keys} == {k: torch[k] for k in keys}
    roles = {"worker": {"replicas": 4}}
    for generic, jax in zip(envs("generic", roles), envs("jax", roles), strict=True):
        assert "JAX_COORDINATOR_ADDRESS" not in generic
        derived = EnvClusterResolver(environ=generic).jax().as_env()
        keys = ("JAX_NUM_PROCESSES", "JAX_PROCESS_ID")
        assert {k: derived[k] for k in keys} == {k: jax[k] for k in keys}
        # the first replica coordinates (the port is each framework's own)
        assert derived["JAX_COORDINATOR_ADDRESS"].split(":")[0] == jax["JAX_COORDINATOR_ADDRESS"].split(":")[0]


@pytest.mark.parametrize("where", ["local", "kubernetes"])
def test_jax_helper_matches_the_contract(where: str) -> None:
    job = job_of({"framework": "jax", "run": {"python": ["t.py"]}, "replicas": 3})
    p = plan(job) if where == "local" else kubernetes_plan(job)
    for env in process_envs(p):
        dist = EnvClusterResolver(environ=env).jax()
        assert dist.as_env() == {k: env[k] for k in dist.as_env()}
        assert dist.initialize_kwargs() == {
            "coordinator_address": env["JAX_COORDINATOR_ADDRESS"],
            "num_processes": int(env["JAX_NUM_PROCESSES"]),
            "process_id": int(env["JAX_PROCESS_ID"]),
        }


@pytest.mark.parametrize("where", ["local", "kubernetes"])
@pytest.mark.parametrize(
    "spec",
    [
        {"framework": "mpi", "run": {"python": ["t.py"]}, "replicas": 3, "procsPerReplica": 2},
        {"framework": "deepspeed", "run": {"python": ["t.py"]}, "replicas": 2, "procsPerReplica": 2},
    ],
    ids=["mpi", "deepspeed"],
)
def test_hostfile_helper_matches_kubetrains_file(where: str, spec: dict[str, Any], tmp_path: Path) -> None:
    job = job_of(spec)
    p = plan(job, files_dir=str(tmp_path)) if where == "local" else kubernetes_plan(job)
    expected = p.files["hostfile"]
    for env in process_envs(p):
        r = EnvClusterResolver(environ={**env, "KUBETRAIN_HOSTFILE": str(tmp_path / "missing")})
        slots = int(spec["procsPerReplica"])
        assert r.hostfile(slots=slots) == expected  # generated from the cluster
        (tmp_path / "hostfile").write_text(expected)
        assert EnvClusterResolver(environ={**env, "KUBETRAIN_HOSTFILE": str(tmp_path / "hostfile")}).hostfile() == (
            expected
        )  # kubetrain's own file, read


def test_hostfile_errors_and_roles() -> None:
    env = {"KUBETRAIN_CLUSTER": json.dumps({"launcher": ["a:1"], "node": ["b:1", "c:1"]})}
    assert EnvClusterResolver(environ=env).hostfile() == "b slots=1\nc slots=1\n"  # not the launcher
    assert EnvClusterResolver(environ=env).hostfile("launcher", slots=4) == "a slots=4\n"
    with pytest.raises(ValueError, match="no role 'x'"):
        EnvClusterResolver(environ=env).hostfile("x")


# -- accelerators ----------------------------------------------------------------------------------------------


def test_local_accelerators(tmp_path: Path) -> None:
    assert local_accelerators({}, dev=str(tmp_path)) == {}
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "accel0", "accel1", "accel2", "accel3"):
        (tmp_path / name).touch()
    assert local_accelerators({}, dev=str(tmp_path)) == {"GPU": 2, "TPU": 4}
    assert local_accelerators({"CUDA_VISIBLE_DEVICES": "1"}, dev=str(tmp_path)) == {"GPU": 1, "TPU": 4}
    assert local_accelerators({"CUDA_VISIBLE_DEVICES": "", "TPU_VISIBLE_CHIPS": "0,1"}, dev=str(tmp_path)) == {"TPU": 2}
    assert local_accelerators({}, dev=str(tmp_path / "none")) == {}
    r = EnvClusterResolver(environ={"KUBETRAIN_ROLE": "worker", "KUBETRAIN_REPLICA_INDEX": "0",
                                    "CUDA_VISIBLE_DEVICES": "0,1,2"})  # fmt: skip
    assert r.num_accelerators() == {"GPU": 3} == r.num_accelerators("worker", 0)
    with pytest.raises(ValueError, match="only knows this replica"):
        r.num_accelerators("worker", 1)


# -- `kubetrain resolve` --------------------------------------------------------------------------------------


def test_resolve_output_formats(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    job = job_of({"framework": "pytorch", "run": {"python": ["t.py"]}, "replicas": 2})
    env = process_envs(kubernetes_plan(job))[1]
    r = EnvClusterResolver(environ=env)
    described = json.loads(resolve_output("json", r))
    assert described == {
        "job": "job",
        "framework": "pytorch",
        "task": {"type": "worker", "index": 1},
        "cluster": {"worker": ["job-worker-0.job:29500", "job-worker-1.job:29500"]},
    }
    assert json.loads(resolve_output("tf-config", r))["task"] == {"type": "worker", "index": 1}
    exports = resolve_output("torch-env", r)
    shell = subprocess.run(["sh", "-c", exports + 'echo "$MASTER_ADDR $WORLD_SIZE $RANK"'], capture_output=True,
                           text=True, check=True)  # fmt: skip
    assert shell.stdout.split() == ["job-worker-0.job", "2", "1"]
    assert "export JAX_PROCESS_ID=1" in resolve_output("jax-env", r)
    assert resolve_output("hostfile", r) == "job-worker-0.job slots=1\njob-worker-1.job slots=1\n"
    with pytest.raises(ValueError, match="unknown format"):
        resolve_output("yaml", r)

    monkeypatch.setattr(os, "environ", {**env, "PATH": os.environ.get("PATH", "")})
    assert resolve_main(["--format", "tf-config"]) == 0
    assert json.loads(capsys.readouterr().out)["cluster"] == described["cluster"]
    monkeypatch.setattr(os, "environ", {"TF_CONFIG": "not json"})
    assert resolve_main(["--format", "json"]) == 1
    assert "TF_CONFIG is not JSON" in capsys.readouterr().err


RESOLVE_IN_REPLICA = """\
import io, json, os, contextlib
from kubetrain.resolver.env import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    assert main(["--format", "tf-config"]) == 0
print(json.dumps({"resolved": json.loads(out.getvalue()), "tf_config": json.loads(os.environ["TF_CONFIG"])}))
"""


def test_resolve_inside_local_replicas(tmp_path: Path) -> None:
    """Real replicas of a local job: what `resolve --format tf-config` prints is their TF_CONFIG."""
    write(tmp_path / "r.py", RESOLVE_IN_REPLICA)
    job = job_of(
        {"framework": "tensorflow", "run": {"python": ["r.py"]}, "roles": {"chief": {}, "worker": {"replicas": 2}}}
    )
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    reports = [r for lines in log_lines(status.job_id).values() for r in parse_json_lines(lines)]
    assert len(reports) == 3
    for report in reports:
        assert report["resolved"] == report["tf_config"]


# -- staying light and in step with the render ---------------------------------------------------------------------


def test_import_is_light() -> None:
    code = (
        "import sys, kubetrain.resolver\n"
        "r = kubetrain.resolver.EnvClusterResolver(environ={})\n"
        "heavy = {'kubernetes', 'tensorflow', 'pydantic', 'yaml', 'torch', 'kubetrain.contract.frameworks'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy), sorted(set(sys.modules) & heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # The framework records (milliseconds of dataclasses) too are read only by a replica that asks for its cluster.
    assert out.stdout.strip() == "[] []"


def test_job_label_value_is_the_render_s() -> None:
    """The resolver selects pods by the job label the render wrote: one implementation serves both."""
    assert label_value is naming.label_value
