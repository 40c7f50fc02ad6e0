"""Other people's job files, as their controllers run them: no launcher inside a launcher, what the controller
provides and what a local run cannot give refused up front, names kept, and the small forms of the upstream
examples (a trailing `---`, T9k's `debug.enabled` and `expectedReplicas`, a PaddleJob on the kubeflow flavor,
Volcano's TaskCompleted → CompleteJob). The corpus (test_corpus.py) runs such files end to end; these pin each
behaviour where it is decided.
"""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.backends.local.backend import LocalBackend
from kubetrain.backends.local.launch import LaunchRecord
from kubetrain.contract.choices import FLAVORS
from kubetrain.foreign import convert
from kubetrain.foreign.loader import load_job_documents
from kubetrain.frameworks.launchers import script_launcher
from kubetrain.jobspec import SpecError, TrainJob, from_dict
from kubetrain.plan import plan
from kubetrain.status import JobPhase, ReplicaPhase
from tests.support.helpers import cli, log_lines, make_job, no_process_left_behind, status_of  # noqa: F401 (fixture)
from tests.support.kubelet import kubelet_env, main_container, pod_templates, run_container
from tests.support.manifest_schemas import assert_valid


def _container(command: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": "pytorch", "image": "trainer:1", **extra}
    if command is not None:
        out["command"] = command
    return out


def pytorchjob(command: list[str] | None, *, nproc: str | None = None, elastic: dict[str, Any] | None = None,
               master: bool = True, name: str = "pt", **container: Any) -> dict[str, Any]:
    specs: dict[str, Any] = {}
    if master:
        specs["Master"] = {"replicas": 1, "template": {"spec": {"containers": [_container(command, **container)]}}}
    specs["Worker"] = {"replicas": 1 if master else 2,
                       "template": {"spec": {"containers": [_container(command, **container)]}}}
    spec: dict[str, Any] = {"pytorchReplicaSpecs": specs}
    if nproc is not None:
        spec["nprocPerNode"] = nproc
    if elastic is not None:
        spec["elasticPolicy"] = elastic
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name}, "spec": spec}


def job_of(spec: dict[str, Any]) -> TrainJob:
    return make_job(spec, "t", image="trainer:1")


def engine(flavor: str, index: int) -> dict[str, str]:
    return {"job": {"JOB_COMPLETION_INDEX": str(index)}, "jobset": {"JOB_COMPLETION_INDEX": str(index)},
            "volcano": {"VK_TASK_INDEX": str(index), "VC_TASK_INDEX": str(index)}}[flavor]


def pod_env(objects: list[dict[str, Any]], role: str, index: int, flavor: str) -> dict[str, Any]:
    """What the program of replica `index` of `role` sees in a rendered pod (the kubelet's env, the start-up
    script in a real shell), and its argv."""
    container = main_container(pod_templates(objects)[role])
    fields = {"metadata.name": f"{role}-{index}", "status.podIP": "10.0.0.1", "status.hostIP": "10.0.0.2"}
    code, seen, err = run_container(container, kubelet_env(container, fields, engine(flavor, index)))
    assert code == 0 and seen is not None, err
    return seen


# -- no launcher inside a launcher ------------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", ["job", "jobset", "volcano"])
def test_a_torchrun_command_is_rendered_as_written_with_the_operators_torchrun_variables(flavor: str) -> None:
    """The pod runs `torchrun train.py` itself (not `python -m torch.distributed.run --no-python torchrun ...`),
    with the PET_* variables the training operator would give it: 2 nodes × 2 processes, one world of 4."""
    job = convert(pytorchjob(["torchrun", "train.py"], nproc="2")).job
    rendered = render_manifests(job, flavor)
    assert rendered.topology is not None
    for role, index, rank in (("master", 0, "0"), ("worker", 0, "1")):
        seen = pod_env(rendered.objects, role, index, flavor)
        assert seen["argv"] == ["torchrun", "train.py"]
        env = seen["env"]
        assert (env["PET_NNODES"], env["PET_NPROC_PER_NODE"], env["PET_NODE_RANK"], env["RANK"]) == ("2", "2", rank,
                                                                                                      rank)
        assert env["WORLD_SIZE"] == "4"
        assert env["PET_MASTER_ADDR"] == env["MASTER_ADDR"] == rendered.topology.host("master", 0)
        assert env["PET_MASTER_PORT"] == env["MASTER_PORT"] == "23456"


def test_an_elastic_launcher_command_is_never_wrapped() -> None:
    """Before: `python -m torch.distributed.run -m torch.distributed.run ...`, which hung."""
    command = ["python", "-m", "torch.distributed.run", "train.py"]
    job = convert(pytorchjob(command, master=False, elastic={"minReplicas": 1, "maxReplicas": 3})).job
    assert {r.processes[0].argv for r in plan(job).replicas} == {tuple(command)}
    seen = pod_env(render_manifests(job, "jobset").objects, "worker", 1, "jobset")
    assert seen["argv"] == command
    assert (seen["env"]["PET_NNODES"], seen["env"]["PET_RDZV_BACKEND"]) == ("1:3", "c10d")


def test_a_trainjobs_torchrun_is_unwrapped_one_per_replica_with_its_options_as_variables() -> None:
    job = job_of({"framework": "pytorch", "replicas": 2, "procsPerReplica": 2,
                  "run": {"exec": ["torchrun", "train.py"], "otherArgs": ["--max-restarts", "0"]}})
    the_plan = plan(job)
    for replica in the_plan.replicas:
        (process,) = replica.processes  # torchrun starts the replica's two processes, not kubetrain
        assert process.argv == ("torchrun", "--max-restarts", "0", "train.py")
        assert (process.env["PET_NNODES"], process.env["PET_NPROC_PER_NODE"]) == ("2", "2")
        assert process.env["PET_NODE_RANK"] == str(replica.index)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({"framework": "mpi", "replicas": 2, "run": {"exec": ["mpirun", "-np", "2", "python", "x.py"]}},
         "mpirun inside mpirun"),
        ({"framework": "deepspeed", "replicas": 2, "run": {"exec": ["deepspeed", "train.py"]}},
         "deepspeed inside deepspeed"),
        ({"framework": "generic", "replicas": 1, "procsPerReplica": 2, "run": {"exec": ["horovodrun", "x.py"]}},
         "2 horovodruns"),
        ({"framework": "mpi", "replicas": 2,
          "run": {"exec": ["sh", "-c", "cd /work && mpiexec -np 2 python x.py"]}},
         "its shell script starts mpirun, and kubetrain's mpi framework starts mpirun itself"),
    ],
    ids=["mpirun-in-mpi", "deepspeed-in-deepspeed", "launcher-per-process", "mpiexec-in-a-script"],
)
def test_a_launcher_kubetrain_would_run_inside_its_own_is_refused_with_the_way_out(spec: dict[str, Any],
                                                                                  words: str) -> None:
    with pytest.raises(SpecError) as caught:
        plan(job_of(spec))
    (error,) = caught.value.errors
    assert error.path == ("spec", "run", "exec") and words in error.message
    assert error.hint is not None and "run.customCommand" in error.hint


@pytest.mark.parametrize(
    ("argv", "launcher"),
    [
        (["/bin/sh", "-c", "MPI_HOST=$(cat hosts); mpiexec --host $MPI_HOST -np 2 hello"], "mpirun"),
        (["bash", "-ec", "python3 -m torch.distributed.run --nproc-per-node 2 train.py"], "torchrun"),
        (["sh", "-c", "horovodrun -np 4 python train.py"], "horovodrun"),
        (["sh", "-c", "python train.py --epochs 3"], None),
        (["sh", "-c", "mkdir -p /var/run/sshd; /usr/sbin/sshd -D"], None),
    ],
)
def test_a_shell_script_that_starts_a_launcher_is_a_launcher(argv: list[str], launcher: str | None) -> None:
    assert script_launcher(argv) == launcher


VOLCANO_MPI_SCRIPT = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: hello
spec:
  plugins:
    mpi: ["--master=mpimaster", "--worker=mpiworker"]
  tasks:
    - name: mpimaster
      replicas: 1
      template:
        spec:
          containers:
            - name: mpimaster
              image: mpi:1
              command: [/bin/sh, -c, "mpiexec --allow-run-as-root --host ${MPI_HOST} -np 2 hello"]
    - name: mpiworker
      replicas: 2
      template:
        spec:
          containers:
            - name: mpiworker
              image: mpi:1
              command: [/bin/sh, -c, "mkdir -p /var/run/sshd; /usr/sbin/sshd -D"]
"""


def test_a_volcano_mpi_masters_script_runs_as_written_not_inside_kubetrains_mpirun() -> None:
    """Volcano's MPI example: the master's shell script starts mpiexec itself over MPI_HOST. Wrapped in
    kubetrain's mpirun it would start one mpiexec per rank; it runs once, as written, with the plugin's MPI_HOST."""
    job = convert(yaml.safe_load(VOLCANO_MPI_SCRIPT)).job
    launcher = next(r for r in plan(job).replicas if r.role == "launcher")
    (process,) = launcher.processes
    assert process.argv == ("/bin/sh", "-c", "mpiexec --allow-run-as-root --host ${MPI_HOST} -np 2 hello")
    assert process.env["MPI_HOST"] == "127.0.0.1,127.0.0.1"
    assert [r.processes for r in plan(job).replicas if r.role == "worker"] == [(), ()]  # mpiexec starts the ranks
    for flavor in ("job", "volcano"):
        objects = render_manifests(job, flavor).objects
        assert main_container(pod_templates(objects)["launcher"])["args"] == list(process.argv)


# -- what a local run cannot give: refused up front, with the source line ---------------------------------------

VOLCANO_FILES = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: files
spec:
  plugins:
    svc: []
  tasks:
    - name: ps
      replicas: 1
      template:
        spec:
          containers:
            - name: ps
              image: tf:1
              command: [sh, -c, "cat /etc/volcano/ps.host && echo && echo read"]
"""


def test_a_command_naming_a_controllers_file_is_refused_before_anything_starts(tmp_path: Path) -> None:
    path = tmp_path / "files.yaml"
    path.write_text(VOLCANO_FILES)
    done = cli("run", path)
    assert done.returncode == 2, done.stderr
    assert f"{path}:16: spec.tasks[0].template.spec.containers[0].command: names /etc/volcano/ps.host" in done.stderr
    assert '"$KUBETRAIN_FILES_ROOT/etc/volcano/ps.host"' in done.stderr  # the way out, in the hint
    assert cli("list", "-o", "name").stdout.strip() == ""  # nothing was created


def test_the_same_file_read_through_the_files_root_runs_with_the_controllers_content(tmp_path: Path) -> None:
    path = tmp_path / "files.yaml"
    path.write_text(VOLCANO_FILES.replace("/etc/volcano/ps.host", "$KUBETRAIN_FILES_ROOT/etc/volcano/ps.host"))
    done = cli("run", path)
    assert done.returncode == 0, done.stderr
    assert "[ps-0] 127.0.0.1" in done.stdout and "[ps-0] read" in done.stdout


def test_a_fieldref_no_local_replica_answers_is_warned_not_silently_empty(tmp_path: Path) -> None:
    job = job_of({"framework": "generic", "replicas": 1, "run": {"exec": ["true"]},
                  "env": [{"name": "ZONE", "valueFrom": {"fieldRef": {
                      "fieldPath": "metadata.labels['topology.kubernetes.io/zone']"}}}]})
    with LocalBackend() as backend:
        result = backend.run(job.with_base_dir(tmp_path), dry_run="client")
    assert any("ZONE reads metadata.labels['topology.kubernetes.io/zone']" in w and "empty locally" in w
               for w in result.warnings), result.warnings


# -- names -----------------------------------------------------------------------------------------------------


def test_env_values_naming_the_controllers_hosts_are_this_machine_and_commands_naming_them_are_warned(
    tmp_path: Path,
) -> None:
    doc = pytorchjob(["python", "ping.py", "pt-master-0"],
                     env=[{"name": "PEER", "value": "pt-worker-0.default.svc.cluster.local:6000"},
                          {"name": "OTHER", "value": "pt-master-01"}])  # not a replica's name: kept
    job = convert(doc).job.with_base_dir(tmp_path)
    with LocalBackend() as backend:
        result = backend.run(job, dry_run="client")
    assert result.plan is not None
    envs = LaunchRecord.from_dict(result.plan).envs()
    assert {env["PEER"] for env in envs.values()} == {"127.0.0.1:6000"}
    assert {env["OTHER"] for env in envs.values()} == {"pt-master-01"}
    assert any("names pt-master-0, a host name the PyTorchJob controller" in w for w in result.warnings)


def test_a_render_without_the_controller_gives_env_values_the_flavors_names_and_warns_of_commands() -> None:
    job = convert(pytorchjob(["python", "ping.py", "pt-master-0"],
                             env=[{"name": "PEER", "value": "pt-worker-0:6000"}])).job
    rendered = render_manifests(job, "job")
    assert rendered.topology is not None
    env = {v["name"]: v.get("value") for v in main_container(pod_templates(rendered.objects)["master"])["env"]}
    assert env["PEER"] == f"{rendered.topology.host('worker', 0)}:6000"
    assert any("its command names pt-master-0" in w and "the job flavor does not" in w for w in rendered.warnings)
    assert not any("its command names" in w for w in render_manifests(job, "kubeflow").warnings)  # kept there


def test_names_are_kept_on_the_flavor_whose_engine_is_the_controller() -> None:
    volcano = convert({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "vc"},
        "spec": {"plugins": {"pytorch": ["--master=leader", "--worker=trainer"], "env": []},
                 "tasks": [{"name": name, "replicas": n, "template": {"spec": {"containers": [
                     {"name": "main", "image": "t:1", "command": ["python", "t.py"]}]}}}
                           for name, n in (("leader", 1), ("trainer", 2))]}}).job
    root = render_manifests(volcano, "volcano").objects[0]
    assert [t["name"] for t in root["spec"]["tasks"]] == ["leader", "trainer"]  # `vc-trainer-1.vc` resolves
    assert root["spec"]["plugins"]["pytorch"] == ["--master=leader", "--worker=trainer"]
    container = {"name": "tensorflow", "image": "t:1", "command": ["python", "t.py"]}
    tfjob = convert({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "tf"}, "spec": {
        "tfReplicaSpecs": {t: {"replicas": 1, "template": {"spec": {"containers": [container]}}}
                           for t in ("Master", "Worker")}}}).job
    assert set(render_manifests(tfjob, "kubeflow").objects[0]["spec"]["tfReplicaSpecs"]) == {"Master", "Worker"}
    jobset = convert(yaml.safe_load(JOBSET.format(annotations="", replicas=1))).job
    objects = render_manifests(jobset, "jobset").objects
    assert objects[0]["spec"]["network"]["subdomain"] == "net"
    env = {v["name"]: v.get("value") for v in main_container(pod_templates(objects)["slice"])["env"]}
    assert env["MASTER_ADDR"] == "js-slice-0-0.net"  # the JobSet's own name: resolvable as written


JOBSET = """\
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: js
  {annotations}
spec:
  network:
    subdomain: net
  replicatedJobs:
    - name: slice
      replicas: {replicas}
      template:
        spec:
          parallelism: 2
          completions: 2
          template:
            spec:
              containers:
                - name: main
                  image: t:1
                  command: [python, t.py]
                  env:
                    - name: MASTER_ADDR
                      value: js-slice-0-0.net
"""


@pytest.mark.parametrize("flavor", FLAVORS)
def test_several_jobs_placed_exclusively_are_refused_where_they_would_share_a_domain(flavor: str,
                                                                                     tmp_path: Path) -> None:
    path = tmp_path / "js.yaml"
    path.write_text(JOBSET.format(annotations="annotations: {alpha.jobset.sigs.k8s.io/exclusive-topology: pool}",
                                  replicas=3).replace("[python, t.py]", "[python, -c, pass]"))
    done = cli("render", "--flavor", flavor, path)
    assert done.returncode == 2, done.stdout
    assert f"{path}:11: spec.replicatedJobs[0].replicas: is 3 Jobs placed exclusively" in done.stderr
    local = cli("run", path)  # one machine: nothing to place; the job runs, its pods' indexes as JobSet's
    assert local.returncode == 0, local.stderr


# -- the small ones ---------------------------------------------------------------------------------------------


def test_a_trailing_separator_or_a_comment_only_document_is_no_document(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    text = yaml.safe_dump(pytorchjob(["python", "train.py"]))
    path.write_text(f"# a header\n---\n{text}---\n")
    assert [job.name for job, _ in load_job_documents(path)] == ["pt"]


def deepspeedjob(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "DeepSpeedJob", "metadata": {"name": "ds"},
            "spec": {"config": {"run": {"python": ["train.py"]}},
                     "worker": {"replicas": 3, "template": {"spec": {"containers": [{"name": "w", "image": "d:1"}]}}},
                     **spec}}


def test_t9k_runmode_debug_enabled_as_its_examples_write_it_is_debug() -> None:
    assert convert(deepspeedjob(runMode={"debug": {"enabled": True}})).job.spec.run_mode == "Debug"
    with pytest.raises(SpecError):
        convert(deepspeedjob(runMode={"debug": {"enabled": True, "enable": False}}))


def test_t9k_elastic_starts_with_expected_replicas() -> None:
    conversion = convert(deepspeedjob(elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 4,
                                               "expectedReplicas": 2}))
    assert conversion.job.spec.role_replicas() == {"worker": 2}
    (note,) = [n for n in conversion.approximated() if n.source == "spec.worker.replicas"]
    assert "starts with elastic.expectedReplicas (2)" in note.reason


def test_a_paddlejob_renders_back_as_a_paddlejob_with_the_operators_own_variables() -> None:
    doc = {"apiVersion": "kubeflow.org/v1", "kind": "PaddleJob", "metadata": {"name": "pd"}, "spec": {
        "paddleReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "paddle", "image": "paddle:2", "command": ["python", "-m", "paddle.distributed.launch",
                                                                  "train.py"],
             "ports": [{"name": "master", "containerPort": 37777}]}]}}}}}}
    objects = render_manifests(convert(copy.deepcopy(doc)).job, "kubeflow").objects
    assert_valid(objects)
    root = objects[0]
    assert (root["kind"], list(root["spec"]["paddleReplicaSpecs"])) == ("PaddleJob", ["Worker"])
    container = main_container(root["spec"]["paddleReplicaSpecs"]["Worker"]["template"])
    assert container["name"] == "paddle" and container["ports"][0]["containerPort"] == 37777
    # the operator gives PADDLE_*: kubetrain adds only its own variables
    assert not [v["name"] for v in container["env"] if v["name"].startswith("PADDLE_")]


COMPLETE = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: done
spec:
  plugins: {env: [], svc: []}
  tasks:
    - name: driver
      replicas: 1
      policies:
        - event: TaskCompleted
          action: CompleteJob
      template:
        spec:
          containers:
            - {name: driver, image: d:1, command: [python, -c, "print('driven')"]}
    - name: server
      replicas: 2
      template:
        spec:
          containers:
            - name: server
              image: s:1
              command: [python, -c, "import time; print('up', flush=True); time.sleep(3600)"]
"""


def test_volcanos_task_completed_complete_job_completes_the_job_while_its_servers_run(tmp_path: Path) -> None:
    """Before: "every replica exits 0", so a job whose servers never end never ended."""
    path = tmp_path / "done.yaml"
    path.write_text(COMPLETE)
    job, _ = load_job_documents(path)[0]
    assert job.spec.run_policy.success_roles == ["driver"]
    root = render_manifests(job, "volcano").objects[0]
    assert {"event": "TaskCompleted", "action": "CompleteJob"} in root["spec"]["tasks"][0]["policies"]
    assert render_manifests(job, "jobset").objects[0]["spec"]["successPolicy"] == {
        "operator": "All", "targetReplicatedJobs": ["driver"]}
    with pytest.raises(SpecError, match="successRoles"):
        render_manifests(from_dict({**job.to_dict(), "spec": {**job.to_dict()["spec"], "runPolicy": {
            "successRoles": ["server"]}}}), "job")
    done = cli("run", path)
    assert done.returncode == 0, done.stderr
    (job_id,) = cli("list", "-o", "name").stdout.split()
    status = status_of(job_id)
    assert status.phase is JobPhase.SUCCEEDED
    servers = [r for r in status.replicas if r.role == "server"]
    assert all(r.phase is ReplicaPhase.CANCELLED and r.reason == "JobCompleted" for r in servers), servers
    assert "driven" in "\n".join(log_lines(job_id)["driver-0"])


def test_entrypoint_args_render_without_a_command_and_read_their_index_from_the_downward_api() -> None:
    job = convert(pytorchjob(None, master=False, args=["--epochs", "1"])).job
    for flavor in ("job", "jobset", "kubeflow"):
        rendered = render_manifests(job, flavor)
        container = main_container(pod_templates(rendered.objects)["worker"])
        assert "command" not in container and container["args"] == ["--epochs", "1"], flavor
        index = next(v for v in container["env"] if v["name"] == "KUBETRAIN_REPLICA_INDEX")
        assert "fieldRef" in index["valueFrom"], flavor  # no start-up script runs: the downward API's index
    volcano = render_manifests(job, "volcano")  # Volcano's pods carry no index field: kubetrain's own is left out
    assert any("KUBETRAIN_REPLICA_INDEX is not set" in w for w in volcano.warnings)
    # A Master's RANK is the index plus one: only a start-up script, or the operator itself, can give it.
    with_master = convert(pytorchjob(None, args=["--epochs", "1"])).job
    with pytest.raises(SpecError, match="need RANK"):
        render_manifests(with_master, "job")
    assert render_manifests(with_master, "kubeflow").objects[0]["kind"] == "PyTorchJob"


def test_the_required_proof_a_torchrun_pytorchjob_is_one_world_of_four(tmp_path: Path) -> None:
    """Master 1 + Worker 1, nprocPerNode "2", `torchrun`: 4 ranks in one world, all_reduce of ones gives 4
    (real processes, torch's gloo)."""
    (tmp_path / "allreduce.py").write_text(textwrap.dedent("""\
        import sys, torch, torch.distributed as dist
        dist.init_process_group("gloo")
        ones = torch.ones(1)
        dist.all_reduce(ones)
        sys.stdout.write(f"rank {dist.get_rank()} world {dist.get_world_size()} sum {int(ones.item())}\\n")
        sys.stdout.flush()  # one write: the two ranks of a replica share its pipe
        dist.destroy_process_group()
        """))
    path = tmp_path / "pt.yaml"
    path.write_text(yaml.safe_dump(pytorchjob(["torchrun", "allreduce.py"], nproc="2")))
    done = cli("run", path, timeout=240)
    assert done.returncode == 0, done.stderr
    lines = sorted(line.split("] ", 1)[1] for line in done.stdout.splitlines() if " world " in line)
    assert lines == [f"rank {r} world 4 sum 4" for r in range(4)], done.stdout
