"""The env contract on Kubernetes is the local backend's, replica for replica.

Each container is run as the kubelet would run it (env list with `$(VAR)` expansion, the engine's index
variable, the command in a real POSIX shell) and what the program sees is compared with what `plan`
gives the same replica over the same addresses.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubetrain.backends.kubernetes.flavors import FLAVORS
from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.backends.local.launch import LaunchRecord
from kubetrain.frameworks import resolve
from kubetrain.jobspec import TrainJob
from kubetrain.plan import plan
from tests.support.helpers import make_job
from tests.support.kubelet import (
    IMAGE,
    SHELL_NOISE,
    SHELLS,
    expand,
    kubelet_env,
    main_container,
    mounted_volumes,
    pod_templates,
    run_container,
)

ENGINE_INDEX = {"job": "JOB_COMPLETION_INDEX", "jobset": "JOB_COMPLETION_INDEX", "volcano": "VK_TASK_INDEX"}
KUBEFLOW_INDEX = "metadata.labels['training.kubeflow.org/replica-index']"
# What the training operator appends to a PyTorchJob/TFJob container's env, after kubetrain's list.
OPERATOR_APPENDS = {"PYTHONUNBUFFERED": "0", "MASTER_ADDR": "elsewhere", "MASTER_PORT": "23456",
                    "WORLD_SIZE": "999", "RANK": "77", "TF_CONFIG": "{}", "PET_NNODES": "9", "PET_RDZV_ENDPOINT": "x:1"}

SPECS: dict[str, dict[str, Any]] = {
    "pytorch": {"framework": "pytorch", "roles": {"master": {}, "worker": {"replicas": 3}},
                "run": {"python": ["train.py", "--steps", "5"]}},
    "pytorch-torchrun": {"framework": "pytorch", "replicas": 2, "procsPerReplica": 4,
                         "run": {"module": ["pkg.train"], "otherArgs": ["--log-dir", "/tmp/x"]}},
    "pytorch-elastic": {"framework": "pytorch", "replicas": 3, "elastic": {"minReplicas": 2, "maxReplicas": 4},
                        "run": {"python": ["train.py"]}},
    "tensorflow": {"framework": "tensorflow",
                   "roles": {"chief": {}, "worker": {"replicas": 3}, "ps": {"replicas": 2}, "evaluator": {}},
                   "run": {"python": ["train.py"]}},
    "jax": {"framework": "jax", "replicas": 3, "run": {"python": ["train.py"]}},
    "deepspeed": {"framework": "deepspeed", "replicas": 2, "localRank": True, "run": {"python": ["train.py"]}},
    "mpi": {"framework": "mpi", "replicas": 3, "procsPerReplica": 2, "run": {"python": ["allreduce.py"]}},
    "generic": {"framework": "generic", "roles": {"server": {}, "client": {"replicas": 2}},
                "run": {"exec": ["./serve", "--port", "8000"]}},
    # run.expandEnv: each replica's own values in the program's arguments, a `$$` and an unknown name as written
    "generic-expand-env": {
        "framework": "generic", "replicas": 3, "env": {"OUT": "/ckpt/$(KUBETRAIN_REPLICA_INDEX)", "Q": "it's"},
        "run": {"expandEnv": True, "exec": ["./trial", "--id=$(KUBETRAIN_JOB)-$(KUBETRAIN_REPLICA_INDEX)",
                                             "--out", "$(OUT)/x", "--cost=$$(5)", "$(NOT_SET)", "$(Q) $HOME"]}},
    "pytorch-expand-env": {
        "framework": "pytorch", "replicas": 2,
        "run": {"expandEnv": True, "python": ["train.py", "--rank=$(RANK)", "--host=$(MASTER_ADDR)"]}},
}

FLAVORS_OF: dict[str, tuple[str, ...]] = {name: tuple(FLAVORS) for name in SPECS}
FLAVORS_OF["generic"] = tuple(name for name, f in FLAVORS.items() if f.features.every_framework)
FLAVORS_OF["generic-expand-env"] = FLAVORS_OF["generic"]


def engine_env(flavor: str, role: str, index: int) -> tuple[dict[str, str], dict[str, str]]:
    """(variables the engine injects, pod fields for the downward API) for one replica."""
    fields = {"metadata.name": "", "status.podIP": "", "status.hostIP": ""}
    if flavor == "kubeflow":
        return {}, {**fields, KUBEFLOW_INDEX: str(index)}
    engine = {ENGINE_INDEX[flavor]: str(index)}
    if flavor == "volcano":
        engine["VC_TASK_INDEX"] = str(index)
    return engine, fields


def check_parity(job: TrainJob, flavor: str, shell: str = "dash", tmp_path: Path | None = None) -> int:
    """Run every replica of every role; return how many were compared."""
    rendered = render_manifests(job, flavor)
    assert rendered.topology is not None
    local = plan(job, rendered.topology, name=rendered.name, launcher_procs=False, files_dir="/etc/kubetrain")
    # The local expectation is every process's full env: the framework's, then the user's as the local
    # backend expands it (its launch record).
    by_key = {r.key: r for r in LaunchRecord.from_plan(local).replicas}
    wirings = {w.role: w for w in local.roles}
    templates = pod_templates(rendered.objects)
    assert set(templates) == set(wirings)
    compared = 0
    for role, template in templates.items():
        container = main_container(template)
        # The volumes the start-up script reads (an MPI job's ssh keys, its hostfile), and an `ssh` that
        # answers at once for the MPI launcher's wait for its workers (tests/kubernetes/test_mpi_ssh.py runs
        # the real one).
        assert tmp_path is not None
        mounts = mounted_volumes(rendered.objects, template, tmp_path / role)
        fake_ssh = tmp_path / "ssh"
        fake_ssh.write_text("#!/bin/sh\nexit 0\n")
        fake_ssh.chmod(0o755)
        for index in range(wirings[role].replicas):
            replica = by_key[f"{role}-{index}"]
            engine, fields = engine_env(flavor, role, index)
            host = rendered.topology.host(role, index)
            fields.update({"metadata.name": f"{rendered.name}-{role}-{index}", "status.podIP": host,
                           "status.hostIP": host})
            appended = OPERATOR_APPENDS if flavor == "kubeflow" else None
            env = kubelet_env(container, fields, engine, appended)
            if replica.processes:
                code, seen, err = run_container(container, env, shell=shell, path_dir=tmp_path, mounts=mounts)
                assert code == 0, err
                assert seen is not None
                expected = dict(replica.processes[0].env)
                assert seen["argv"] == list(replica.processes[0].argv)
                if expected.get("PET_RDZV_CONF", "").startswith("store_type=file"):
                    # The one difference on purpose: locally an elastic job's rendezvous is a file that outlives
                    # every replica; in pods it is the TCP store the first worker's agent hosts.
                    assert expected["PET_RDZV_ENDPOINT"].endswith("/rendezvous")
                    first = next(iter(rendered.topology.roles))  # rank 0's replica hosts it
                    expected["PET_RDZV_ENDPOINT"] = rendered.topology.address(first, 0)
                    user = expected.pop("PET_RDZV_CONF").removeprefix("store_type=file").lstrip(",")
                    if user:
                        expected["PET_RDZV_CONF"] = user
            elif container.get("args"):
                # A hosting replica that serves the launcher (an MPI worker's sshd): its program reports.
                code, seen, err = run_container(container, env, shell=shell, path_dir=tmp_path, mounts=mounts)
                assert code == 0, err
                assert seen is not None
                assert seen["argv"] == list(container["args"])
                expected = {k: resolve(v, index, rendered.topology) for k, v in wirings[role].env.items()}
            else:
                # A hosting replica waits: its `sleep` is replaced by one that reports what it sees.
                fake = tmp_path / "sleep"
                fake.write_text(f"#!/bin/sh\nexec {sys_executable()} -c \"{DUMP_ENV}\" \"$@\"\n")
                fake.chmod(0o755)
                code, seen, err = run_container(container, env, shell=shell, path_dir=tmp_path, program=[],
                                                mounts=mounts)
                assert code == 0, err
                assert seen is not None
                assert seen["argv"] == ["2147483647"]
                expected = {k: resolve(v, index, rendered.topology) for k, v in wirings[role].env.items()}
            extra = set(seen["env"]) - set(expected) - SHELL_NOISE - set(engine) - set(appended or {})
            extra -= TRANSPORT_ENV
            assert not extra, f"{role}-{index}: unexpected variables {extra}"
            for name, value in expected.items():
                assert seen["env"].get(name) == value, f"{flavor} {role}-{index}: {name}"
            compared += 1
    return compared


TRANSPORT_ENV = {"OMPI_MCA_plm_rsh_args"}
"""What only a pod has: how an MPI launcher's ssh reaches the worker pods (manifests/mpi_ssh.py)."""


def sys_executable() -> str:
    return sys.executable


DUMP_ENV = "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ)}))"


@pytest.mark.parametrize(("name", "flavor"), [(n, f) for n in SPECS for f in FLAVORS_OF[n]])
def test_every_replica_sees_the_local_env(name: str, flavor: str, tmp_path: Path) -> None:
    job = make_job(SPECS[name], "demo", image=IMAGE)
    assert check_parity(job, flavor, tmp_path=tmp_path) == sum(job.spec.role_replicas().values()) + (
        1 if name == "mpi" else 0)


@pytest.mark.parametrize("shell", SHELLS)
def test_same_env_in_every_posix_shell(shell: str, tmp_path: Path) -> None:
    job = make_job(SPECS["tensorflow"], "demo", image=IMAGE)
    assert check_parity(job, "jobset", shell=shell, tmp_path=tmp_path) == 7


def test_user_env_wins_and_refers_to_per_replica_values(tmp_path: Path) -> None:
    """User variables after the framework's: same name → the user's value; `$(RANK)` (computed at start)
    and `$(MASTER_ADDR)` (static) expand as they do locally; `$$` stays an escape; fieldRef works."""
    job = make_job({
        "framework": "pytorch", "replicas": 3, "run": {"python": ["train.py"]},
        "env": [
            {"name": "WORLD_SIZE", "value": "99"},
            {"name": "TAG", "value": "rank-$(RANK)-of-$(WORLD_SIZE)@$(MASTER_ADDR)"},
            {"name": "LITERAL", "value": "$$(RANK) costs $5 'quoted' `tick` \"dq\""},
            {"name": "OUT", "value": "/out/$(TAG)"},
            {"name": "UNKNOWN", "value": "$(NOPE)-$(RANK)"},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
    }, "demo", image=IMAGE)
    for flavor in ("job", "kubeflow"):
        assert check_parity(job, flavor, tmp_path=tmp_path) == 3


def test_hostile_text_is_never_run(tmp_path: Path) -> None:
    """Argv and env values full of shell syntax reach the program byte for byte; nothing is executed."""
    canary = tmp_path / "pwned"
    evil = f"$(touch {canary}) `touch {canary}` ; touch {canary} ' \" \\ \n $HOME"
    job = make_job({"framework": "generic", "replicas": 2, "run": {"exec": ["/bin/echo", evil, "'", ""]},
                    "env": {"EVIL": evil, "EVIL_REF": f"{evil}$(KUBETRAIN_REPLICA_INDEX)"}}, "demo", image=IMAGE)
    for flavor in ("job", "jobset", "volcano"):
        assert check_parity(job, flavor, tmp_path=tmp_path) == 2
    assert not canary.exists()


ALL_FLAVORS = tuple(FLAVORS)


def test_argv_arrives_as_given_although_the_kubelet_expands_args(tmp_path: Path) -> None:
    """`$(X)`, `$$(X)` and `$$5` in the program's argv are the user's text: the kubelet must not expand
    them (it would give `xval`, `$(X)`, `$5`). The local run is the reference."""
    job = make_job({"framework": "pytorch", "replicas": 2, "env": {"X": "xval"},
                    "run": {"python": ["pr.py", "$(X)", "$$(X)", "cost $$5", "$(RANK)", "$"]}}, "demo", image=IMAGE)
    for flavor in ALL_FLAVORS:
        assert check_parity(job, flavor, tmp_path=tmp_path) == 2


def test_a_later_variable_with_a_quote_does_not_break_the_start_up_script(tmp_path: Path) -> None:
    """`$(LATER)` is not defined before AB_C, so it stays literal in AB_C (Kubernetes' rule). The kubelet
    used to substitute LATER's value (with its `'`) into the start-up script: `Unterminated quoted string`."""
    job = make_job({"framework": "pytorch", "replicas": 2, "run": {"python": ["train.py"]},
                    "env": [{"name": "AB_C", "value": "tag-$(RANK)-$(LATER)"},
                            {"name": "LATER", "value": "it's later"}]}, "demo", image=IMAGE)
    for flavor in ALL_FLAVORS:
        assert check_parity(job, flavor, tmp_path=tmp_path) == 2


@pytest.mark.parametrize("flavor", ALL_FLAVORS)
def test_a_secret_value_is_never_run_as_shell(flavor: str, tmp_path: Path) -> None:
    """An escaped `$$(DB_PASSWORD)` in a per-replica value is literal text. The kubelet used to expand it
    inside the start-up script's quotes, so a Secret holding `'; touch x; echo '` ran `touch`."""
    canary = tmp_path / "pwned"
    secret = f"'; touch {canary}; echo '$(RANK)`touch {canary}`"
    job = make_job({"framework": "pytorch", "replicas": 2, "run": {"python": ["train.py", "$(DB_PASSWORD)"]},
                    "env": [{"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}},
                            {"name": "AB_C", "value": "literal $$(DB_PASSWORD) for rank $(RANK)"},
                            {"name": "PLAIN", "value": "pw=$(DB_PASSWORD)"}]}, "demo", image=IMAGE)
    rendered = render_manifests(job, flavor)
    for role, template in pod_templates(rendered.objects).items():
        container = main_container(template)
        index = 1 if role == "worker" else 0
        engine, fields = engine_env(flavor, role, index)
        env = kubelet_env(container, fields, engine, secrets={("db", "pw"): secret})
        code, seen, err = run_container(container, env)
        assert code == 0, err
        assert seen is not None
        rank = "1" if role == "worker" and flavor != "kubeflow" else seen["env"]["RANK"]
        assert seen["env"]["AB_C"] == f"literal $(DB_PASSWORD) for rank {rank}"
        assert seen["env"]["DB_PASSWORD"] == secret
        assert seen["env"]["PLAIN"] == f"pw={secret}"  # a plain reference is the Secret's value, as text
        assert seen["argv"] == ["python", "train.py", "$(DB_PASSWORD)"]
    assert not canary.exists()


def test_git_sync_arguments_are_not_expanded() -> None:
    job = make_job({"framework": "generic", "replicas": 1, "run": {"exec": ["true"]},
                    "mounts": [{"type": "gitSync", "repository": "https://example.com/$(GITSYNC_PASSWORD).git",
                                "dst": "/src", "passwordSecret": "git"}]}, "demo", image=IMAGE)
    template = pod_templates(render_manifests(job, "job").objects)["worker"]
    init = template["spec"]["initContainers"][0]
    env = {"GITSYNC_PASSWORD": "hunter2"}
    repo = next(expand(a, env) for a in init["args"] if a.startswith("--repo="))
    assert repo == "--repo=https://example.com/$(GITSYNC_PASSWORD).git"


def test_a_bad_index_fails_loudly() -> None:
    job = make_job(SPECS["pytorch"], "demo", image=IMAGE)
    container = main_container(pod_templates(render_manifests(job, "job").objects)["worker"])
    for bad in ("", "1; touch x", "-1", "1.5"):
        env = kubelet_env(container, {}, {"JOB_COMPLETION_INDEX": bad})
        code, seen, err = run_container(container, env)
        assert code == 64 and seen is None
        assert "JOB_COMPLETION_INDEX is not a replica index" in err


def test_addresses_of_a_thousand_replicas_are_generated_in_the_pod(tmp_path: Path) -> None:
    job = make_job({"framework": "tensorflow", "roles": {"chief": {}, "worker": {"replicas": 1000}},
                    "run": {"python": ["train.py"]}}, "demo", image=IMAGE)
    rendered = render_manifests(job, "job")
    assert rendered.topology is not None
    local = plan(job, rendered.topology, name="demo", launcher_procs=False)
    container = main_container(pod_templates(rendered.objects)["worker"])
    env = kubelet_env(container, {}, {"JOB_COMPLETION_INDEX": "999"})
    code, seen, err = run_container(container, env)
    assert code == 0, err
    assert seen is not None
    expected = next(r for r in local.replicas if r.key == "worker-999").processes[0].env["TF_CONFIG"]
    assert seen["env"]["TF_CONFIG"] == expected
    assert len(container["command"][2]) < 2000  # the script does not list the addresses


def test_debug_mode_holds_the_program_and_writes_a_runnable_script(tmp_path: Path) -> None:
    job = make_job({"framework": "pytorch", "replicas": 2, "runMode": "Debug",
                    "run": {"python": ["train.py", "it's", "$(x)"]}}, "demo", image=IMAGE)
    container = main_container(pod_templates(render_manifests(job, "job").objects)["worker"])
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/var/run/kubetrain" in mounts
    env = kubelet_env(container, {}, {"JOB_COMPLETION_INDEX": "1"})
    env["KUBETRAIN_DEBUG_DIR"] = str(tmp_path)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sleep").write_text("#!/bin/sh\necho held\n")
    (fake / "sleep").chmod(0o755)
    code, _, err = run_container(container, env, path_dir=fake, program=["/bin/echo"])
    assert code == 0, err
    assert "runMode Debug" in err
    run_sh = (tmp_path / "run.sh").read_text()
    out = subprocess.run(["sh", str(tmp_path / "run.sh")], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin"})
    assert out.stdout == "python train.py it's $(x)\n", run_sh
    assert "RANK='1'" in run_sh or "RANK=1" in run_sh


def test_expanded_arguments_are_each_replicas_own() -> None:
    """run.expandEnv, spelled out for one replica (the parity test above holds every flavor to it)."""
    job = make_job(SPECS["generic-expand-env"], "demo", image=IMAGE)
    record = LaunchRecord.from_plan(plan(job, name="sweep"))
    argv = record.replica("worker", 2).processes[0].argv
    assert list(argv) == ["./trial", "--id=sweep-2", "--out", "/ckpt/2/x", "--cost=$(5)", "$(NOT_SET)", "it's $HOME"]
