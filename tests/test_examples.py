"""Every example validates and plans to the roles it promises; the contract-printing scripts print the
contract; `examples/all-fields` really shows every field of the model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from kubetrain.backends.local.launch import LaunchRecord
from kubetrain.jobspec import JobSpec, Metadata, TrainJob, from_dict, load_file
from kubetrain.jobspec.mounts import MOUNT_TYPES
from kubetrain.plan import Plan, plan

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
JOB_FILES = sorted(EXAMPLES.glob("*/job.yaml"))

# example folder → (framework, replicas per role in plan order, the program's argv of the first process)
EXPECTED: dict[str, tuple[str, dict[str, int], tuple[str, ...]]] = {
    "pytorch-ddp": ("pytorch", {"worker": 2}, ("python", "train.py", "--steps", "50")),
    "tensorflow-multiworker": (
        "tensorflow",
        {"chief": 1, "worker": 2},
        ("python", "train.py", "--epochs", "2", "--steps-per-epoch", "20"),
    ),
    "mpi-allreduce": (
        "mpi",
        {"launcher": 1, "worker": 2},
        ("mpirun", "--hostfile", "/etc/kubetrain/hostfile", "-np", "2", "python", "allreduce.py"),
    ),
    "jax-env": ("jax", {"worker": 2}, ("python", "train.py", "--steps", "20")),
    "deepspeed": (
        "deepspeed",
        {"worker": 2},
        ("python", "train.py", "--deepspeed_config", "ds_config.json", "--steps", "50", "--local_rank=0"),
    ),
    "generic": ("generic", {"server": 1, "client": 2}, ("python", "print_env.py")),
    "all-fields": (
        "pytorch",
        {"master": 1, "worker": 3},
        ("python", "-m", "torch.distributed.run", "--log-dir", "/logs", "train.py", "--epochs", "3", "--lr", "0.01"),
    ),
    "templates": ("pytorch", {"worker": 2}, ("python", "hello.py")),
}


def load_example(name: str) -> TrainJob:
    return load_file(EXAMPLES / name / "job.yaml")


def planned(name: str) -> Plan:
    return plan(load_example(name))


def launched(name: str) -> LaunchRecord:
    """What the example's replicas start with locally: the plan plus the user's env (the launch record)."""
    return LaunchRecord.from_plan(planned(name))


def test_every_example_has_expectations() -> None:
    assert {p.parent.name for p in JOB_FILES} == set(EXPECTED)


@pytest.mark.parametrize("path", JOB_FILES, ids=[p.parent.name for p in JOB_FILES])
def test_example_validates_and_plans(path: Path) -> None:
    framework, roles, argv = EXPECTED[path.parent.name]
    job = load_file(path)
    assert job.to_dict()["apiVersion"] == "kubetrain.dev/v1alpha1"
    assert job.spec.framework.value == framework
    the_plan = plan(job)
    assert dict(the_plan.topology.roles) == roles
    assert [r.key for r in the_plan.replicas] == [f"{role}-{i}" for role, n in roles.items() for i in range(n)]
    assert the_plan.processes[0].argv == argv
    for replica in the_plan.replicas:
        for process in replica.processes:
            assert process.env["KUBETRAIN_ROLE"] == replica.role
            assert process.env["KUBETRAIN_REPLICA_INDEX"] == str(replica.index)
            assert process.env["KUBETRAIN_JOB"] == job.name


@pytest.mark.parametrize("path", JOB_FILES, ids=[p.parent.name for p in JOB_FILES])
def test_example_program_exists(path: Path) -> None:
    """The program a job names is in the example's folder (where local replicas start)."""
    job = load_file(path)
    if path.parent.name == "all-fields":  # a reference, not a job to run (workingDir: /workspace)
        return
    assert job.spec.working_dir is None
    runs = [job.spec.run] + [r.run for r in (job.spec.roles or {}).values()]
    for run in filter(None, runs):
        assert run.python is not None
        assert (path.parent / run.python[0]).is_file(), run.python[0]


def test_example_python_files_compile() -> None:
    files = sorted(EXAMPLES.rglob("*.py"))
    assert len(files) >= 9
    for file in files:
        compile(file.read_text(encoding="utf-8"), str(file), "exec")


# -- what each framework's replicas get -------------------------------------------------------------------


def test_pytorch_ddp_env() -> None:
    the_plan = planned("pytorch-ddp")
    envs = [p.env for p in the_plan.processes]
    assert [e["RANK"] for e in envs] == ["0", "1"]
    assert {e["WORLD_SIZE"] for e in envs} == {"2"}
    assert {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs} == {("127.0.0.1", "29500")}
    assert {e["LOCAL_RANK"] for e in envs} == {"0"}
    job = the_plan.job
    assert job.spec.image == "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"


def test_tensorflow_tf_config() -> None:
    configs = [json.loads(p.env["TF_CONFIG"]) for p in planned("tensorflow-multiworker").processes]
    cluster = {"chief": ["127.0.0.1:29500"], "worker": ["127.0.0.1:29501", "127.0.0.1:29502"]}
    assert configs == [
        {"cluster": cluster, "task": {"type": "chief", "index": 0}},
        {"cluster": cluster, "task": {"type": "worker", "index": 0}},
        {"cluster": cluster, "task": {"type": "worker", "index": 1}},
    ]


def test_mpi_hostfile_and_launcher() -> None:
    the_plan = planned("mpi-allreduce")
    assert the_plan.files == {"hostfile": "localhost slots=2\n"}
    launcher, *workers = the_plan.replicas
    assert launcher.role == "launcher" and len(launcher.processes) == 1
    assert all(w.role == "worker" and not w.processes for w in workers)


def test_jax_env() -> None:
    envs = [p.env for p in launched("jax-env").processes]
    assert [e["JAX_PROCESS_ID"] for e in envs] == ["0", "1"]
    assert {e["JAX_NUM_PROCESSES"] for e in envs} == {"2"}
    assert len({e["JAX_COORDINATOR_ADDRESS"] for e in envs}) == 1
    assert {e["JAX_PLATFORMS"] for e in envs} == {"cpu"}


def test_deepspeed_example() -> None:
    the_plan = planned("deepspeed")
    assert the_plan.job.spec.procs_per_replica == 1
    assert "hostfile" in the_plan.files
    assert [p.env["RANK"] for p in the_plan.processes] == ["0", "1"]
    config = json.loads((EXAMPLES / "deepspeed" / "ds_config.json").read_text(encoding="utf-8"))
    assert config["train_micro_batch_size_per_gpu"] >= 1
    assert config["zero_optimization"]["stage"] in (0, 1, 2, 3)


def test_generic_roles_and_overrides() -> None:
    the_plan = launched("generic")
    greetings = {r.key: r.processes[0].env["GREETING"] for r in the_plan.replicas}
    assert greetings == {"server-0": "serving", "client-0": "asking", "client-1": "asking"}
    assert the_plan.replicas[1].processes[0].argv == ("python", "print_env.py", "--show-peers")


def test_templates_example_merges_its_chain() -> None:
    job = load_example("templates")
    assert job.spec.base is None  # resolved when loaded: the job holds the merged result
    assert job.metadata.labels == {"team": "research", "purpose": "demo"}
    assert job.spec.image == "python:3.11-slim"
    assert job.spec.resources is not None
    assert (job.spec.resources.cpu, job.spec.resources.memory) == ("1", "1Gi")
    assert {v.name: v.value for v in job.spec.env} == {"LOG_LEVEL": "info", "GREETING": "hello from the job"}
    assert job.spec.run_policy.backoff_limit == 2
    assert job.spec.run_policy.active_deadline_seconds is None


def test_all_fields_inherits_its_base() -> None:
    job = load_example("all-fields")
    assert job.spec.base is None  # resolved when loaded
    assert job.metadata.labels["team"] == "vision"
    assert job.metadata.annotations["kubetrain.dev/owner"] == "vision-team@example.com"
    assert job.spec.service_account == "trainer"
    assert (job.spec.scheduling.queue, job.spec.scheduling.priority_class) == ("vision", "normal")
    assert (job.spec.run_policy.backoff_limit, job.spec.run_policy.ttl_seconds_after_finished) == (3, 3600)


@pytest.mark.parametrize("path", JOB_FILES, ids=[p.parent.name for p in JOB_FILES])
def test_example_round_trips_through_to_dict(path: Path) -> None:
    """What `to_dict()` gives (what the local store keeps, what `describe` prints) loads back to the same job,
    from any folder: it is the merged document, and does not depend on the template files any more."""
    job = load_file(path)
    assert from_dict(job.to_dict(), base_dir=path.parent) == job
    assert from_dict(job.to_dict(), base_dir=EXAMPLES.parent / "tests") == job


# -- the contract-printing scripts ---------------------------------------------------------------------------


def run_script(folder: str, argv: tuple[str, ...], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("KUBETRAIN_", "TF_", "JAX_"))}
    return subprocess.run(
        [sys.executable, *argv[1:]],
        cwd=EXAMPLES / folder,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_print_tf_config_prints_the_contract() -> None:
    path = EXAMPLES / "tensorflow-multiworker" / "job.yaml"
    job = load_file(path, overrides=["spec.run.python=[print_tf_config.py]"])
    for process in plan(job).processes:
        result = run_script("tensorflow-multiworker", process.argv, process.env)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == json.loads(process.env["TF_CONFIG"])
    missing = run_script("tensorflow-multiworker", ("python", "print_tf_config.py"), {})
    assert missing.returncode == 1 and "TF_CONFIG is not set" in missing.stderr


def test_jax_print_env_prints_the_contract() -> None:
    job = load_file(EXAMPLES / "jax-env" / "job.yaml", overrides=["spec.run.python=[print_env.py]"])
    for process in plan(job).processes:
        result = run_script("jax-env", process.argv, process.env)
        assert result.returncode == 0, result.stderr
        seen = json.loads(result.stdout)
        for key in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "KUBETRAIN_ROLE"):
            assert seen[key] == process.env[key]
    assert run_script("jax-env", ("python", "print_env.py"), {}).returncode == 1


def test_generic_print_env_shows_peers() -> None:
    the_plan = launched("generic")
    client = the_plan.replicas[1].processes[0]
    result = run_script("generic", client.argv, client.env)
    assert result.returncode == 0, result.stderr
    first, greeting, *peers = result.stdout.splitlines()
    assert json.loads(first)["KUBETRAIN_ROLE"] == "client"
    assert greeting == "greeting asking"
    assert peers == ["peer server 0 127.0.0.1:29500", "peer client 0 127.0.0.1:29501", "peer client 1 127.0.0.1:29502"]


def test_templates_hello_script() -> None:
    process = launched("templates").processes[1]
    result = run_script("templates", process.argv, process.env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "rank 1 of 2: hello from the job (log level info)\n"


# -- examples/all-fields shows every field ---------------------------------------------------------------------


def model_keys(model: type[BaseModel], seen: set[type[BaseModel]] | None = None) -> set[str]:
    """Every YAML key of `model` and of the spec models nested in it (not the client models)."""
    seen = set() if seen is None else seen
    if model in seen:
        return set()
    seen.add(model)
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        keys.add(field.alias or name)
        for nested in nested_models(field.annotation):
            keys |= model_keys(nested, seen)
    return keys


def nested_models(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += nested_models(arg)
    return found


def yaml_keys(node: object) -> set[str]:
    if isinstance(node, dict):
        return set(map(str, node)) | {k for v in node.values() for k in yaml_keys(v)}
    if isinstance(node, list):
        return {k for v in node for k in yaml_keys(v)}
    return set()


ALL_FIELDS = EXAMPLES / "all-fields"
# Fields that exclude another one shown instead; the example names them in a comment.
SHOWN_IN_COMMENTS = {"namePrefix", "module", "exec", "customCommand", "replicas", "entrypoint",
                     # framework mpi only (the example is a pytorch job)
                     "mpi", "mpiJobVersion",
                     # trials exclude replicas and elastic (the example has both)
                     "trials", "completions", "parallelism",
                     # spec.controller: what a converted foreign file records (a TrainJob of its own runs
                     # under kubetrain's framework wiring)
                     "controller", "port", "jobs", "nprocPerNode", "elasticPolicy", "rdzvBackend", "rdzvHost",
                     "rdzvPort", "rdzvId", "rdzvConf", "standalone", "nProcPerNode", "plugins", "subdomain",
                     "slotsPerWorker", "mpiImplementation"}
# Fields every flavor refuses today (docs/parity.md): in comments, so that the example renders for jobset
# (tests/kubernetes/render/test_examples_parity.py).
REFUSED_EVERYWHERE = {"preemptionLimit", "bucket", "prefix", "url", "accessKeySecret"}


def test_all_fields_has_every_field() -> None:
    texts = [(ALL_FIELDS / "job.yaml").read_text(encoding="utf-8"),
             (ALL_FIELDS / "templates" / "base.yaml").read_text(encoding="utf-8")]
    written = set().union(*(yaml_keys(yaml.safe_load(t)) for t in texts))
    expected = model_keys(TrainJob) | model_keys(Metadata) | model_keys(JobSpec)
    missing = expected - written - SHOWN_IN_COMMENTS - REFUSED_EVERYWHERE
    assert not missing, f"examples/all-fields does not show: {sorted(missing)}"
    for key in SHOWN_IN_COMMENTS | REFUSED_EVERYWHERE:
        assert re.search(rf"#.*\b{key}:", texts[0]), key


def test_all_fields_shows_every_mount_type_and_both_forms() -> None:
    job = load_example("all-fields")
    assert {m.type for m in job.spec.mounts} == set(MOUNT_TYPES) - {"s3"}  # s3: refused on every flavor
    assert re.search(r"^\s*# - type: s3 .*#.*refused on every flavor", (ALL_FIELDS / "job.yaml").read_text(
        encoding="utf-8"), re.M)
    raw = yaml.safe_load((ALL_FIELDS / "job.yaml").read_text(encoding="utf-8"))["spec"]["mounts"]
    assert any(isinstance(m, str) for m in raw) and any(isinstance(m, dict) for m in raw)


def test_all_fields_shows_both_env_forms_and_value_from() -> None:
    raw = yaml.safe_load((ALL_FIELDS / "job.yaml").read_text(encoding="utf-8"))["spec"]
    assert isinstance(raw["env"], list) and any("valueFrom" in v for v in raw["env"])
    assert any(isinstance(role.get("env"), dict) for role in raw["roles"].values())


def test_all_fields_comments_every_field() -> None:
    """Each field of the model is explained by a comment on (at least) one line where it is written."""
    files = (ALL_FIELDS / "job.yaml", ALL_FIELDS / "templates" / "base.yaml")
    text = "\n".join(p.read_text(encoding="utf-8") for p in files)
    expected = model_keys(TrainJob) | model_keys(Metadata) | model_keys(JobSpec)
    uncommented = [
        key for key in sorted(expected)
        if not re.search(rf"^\s*(- )?#? ?{key}:[^\n]*#", text, re.M) and key not in ("apiVersion", "kind")
    ]
    assert not uncommented, f"fields without a comment in examples/all-fields/job.yaml: {uncommented}"


# -- the main example really trains -----------------------------------------------------------------------------


@pytest.mark.slow
def test_pytorch_ddp_example_trains_on_two_processes() -> None:
    the_plan = plan(load_file(EXAMPLES / "pytorch-ddp" / "job.yaml", overrides=["spec.run.python[2]=5"]),
                    _free_topology())
    procs = [
        subprocess.Popen([sys.executable, *p.argv[1:]], cwd=EXAMPLES / "pytorch-ddp", env={**os.environ, **p.env},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for p in the_plan.processes
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outputs]
    sums = [re.findall(r"^final-params-checksum (\d+) (\S+)$", out, re.M) for out, _ in outputs]
    assert [s[0][0] for s in sums] == ["0", "1"]
    assert float(sums[0][0][1]) == float(sums[1][0][1])  # DDP keeps the replicas identical
    assert re.search(r"^samples/s \d+(\.\d+)?$", outputs[0][0], re.M)
    assert "step 5/5 loss" in outputs[0][0]


def _free_topology() -> typing.Any:
    import socket

    from kubetrain.frameworks import local_topology

    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    return local_topology({"worker": 2}, ports)


@pytest.mark.slow
def test_mpi_allreduce_example_runs_under_mpirun(tmp_path: Path) -> None:
    the_plan = plan(load_file(EXAMPLES / "mpi-allreduce" / "job.yaml"), files_dir=str(tmp_path))
    for name, content in the_plan.files.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
    launcher = the_plan.processes[0]
    python_dir = str(Path(sys.executable).parent)  # mpirun starts `python`: this environment's, with mpi4py
    env = {**os.environ, **launcher.env, "PATH": python_dir + os.pathsep + os.environ.get("PATH", "")}
    result = subprocess.run(list(launcher.argv), cwd=EXAMPLES / "mpi-allreduce", env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert sorted(line for line in lines if line.startswith("allreduce-sum")) == ["allreduce-sum 1"] * 2
    assert sorted(line.split(" on ")[0] for line in lines if line.startswith("rank")) == ["rank 0 of 2", "rank 1 of 2"]
