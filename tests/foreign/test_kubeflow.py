"""Kubeflow training operator jobs (PyTorchJob, TFJob, MPIJob v1 and v2beta1, XGBoostJob, PaddleJob, JAXJob) as
kubetrain jobs: each example valid against its upstream CRD, converted field by field, rendered for every flavor
that can express it (manifests valid against the upstream schemas), round-tripped through kubetrain's own
kubeflow render, and run here as a real distributed job where the framework is installed."""

from __future__ import annotations

import copy
import functools
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

import kubetrain
from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.contract.choices import FLAVORS
from kubetrain.foreign import convert
from kubetrain.foreign.conversion import Conversion
from kubetrain.foreign.loader import load_job_file
from kubetrain.jobspec import SpecError, TrainJob, load_file
from kubetrain.plan import plan
from kubetrain.status import JobPhase
from tests.support import manifest_schemas
from tests.support.helpers import (  # noqa: F401 (no_process_left_behind: an autouse fixture)
    EXAMPLES,
    assert_ddp_in_step,
    log_lines,
    no_process_left_behind,
    run_job,
)
from tests.support.kubelet import containers_of
from tests.support.manifest_schemas import assert_valid

FOREIGN = EXAMPLES / "foreign"
SHARED_CRDS = Path(__file__).resolve().parents[1] / "data" / "crds"
"""Upstream CRDs the examples are written against that the emulator does not ship by default (XGBoostJob,
PaddleJob and the MPI Operator's v2beta1 MPIJob; sources in tests/data/crds/SOURCES.md)."""


# -- upstream schemas -------------------------------------------------------------------------------------


@functools.cache
def _shared_index() -> dict[tuple[str, str, str], dict[str, Any]]:
    index: dict[tuple[str, str, str], dict[str, Any]] = {}
    for path in sorted(SHARED_CRDS.glob("*.yaml")):
        crd = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
            continue
        for version in crd["spec"]["versions"]:
            key = (crd["spec"]["group"], version["name"], crd["spec"]["names"]["kind"])
            index[key] = version["schema"]["openAPIV3Schema"]
    return index


def crd_errors(doc: dict[str, Any]) -> list[str]:
    """Schema errors of a source document against its upstream CRD (the emulator's copy, else ../shared)."""
    group, _, version = str(doc["apiVersion"]).rpartition("/")
    key = (group, version, str(doc["kind"]))
    if key in manifest_schemas._crd_index():
        return manifest_schemas.validate_manifest(doc)
    schema = _shared_index().get(key)
    assert schema is not None, f"no upstream CRD for {key} in {manifest_schemas.CRD_DIR} or {SHARED_CRDS}"
    validator = manifest_schemas._CrdValidator(
        manifest_schemas._crd_to_jsonschema(schema), registry=manifest_schemas._registry()
    )
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(doc)]


def read(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((FOREIGN / name).read_text(encoding="utf-8"))
    return data


# -- the examples -----------------------------------------------------------------------------------------

# file → (framework, replicas per role, the first role's program)
EXAMPLES_EXPECTED: dict[str, tuple[str, dict[str, int], dict[str, Any]]] = {
    "pytorchjob.yaml": ("pytorch", {"master": 1, "worker": 1}, {"python": ["../pytorch-ddp/train.py", "--steps", "5"]}),
    "tfjob.yaml": (
        "tensorflow",
        {"chief": 1, "worker": 1},
        {"python": ["../tensorflow-multiworker/train.py", "--epochs", "1", "--steps-per-epoch", "3"]},
    ),
    # The launcher's mpirun runs as written, under the operator's contract (its hostfile, OMPI_MCA_*).
    "mpijob.yaml": ("mpi", {"launcher": 1, "worker": 2}, {"python": ["../mpi-allreduce/allreduce.py"]}),
    "mpijob-v2beta1.yaml": ("mpi", {"launcher": 1, "worker": 2}, {"python": ["../mpi-allreduce/allreduce.py"]}),
    "xgboostjob.yaml": (
        "pytorch",
        {"master": 1, "worker": 2},
        {
            "python": [
                "xgboost_dist.py",
                "--job_type=Train",
                "--xgboost_parameter=objective:multi:softprob,num_class:3",
                "--n_estimators=10",
            ]
        },
    ),
    "paddlejob.yaml": ("generic", {"worker": 2}, {"module": ["paddle.distributed.launch", "run_check"]}),
    "jaxjob.yaml": ("jax", {"worker": 2}, {"python": ["jax_operator_env.py"]}),
}
KUBEFLOW_FILES = sorted(EXAMPLES_EXPECTED)


@pytest.mark.parametrize("name", [*KUBEFLOW_FILES, "pytorchjob-kitchen-sink.yaml"])
def test_the_example_is_valid_against_the_upstream_crd(name: str) -> None:
    assert crd_errors(read(name)) == []


@pytest.mark.parametrize("name", KUBEFLOW_FILES)
def test_the_example_converts_to_the_framework_and_roles(name: str) -> None:
    framework, replicas, program = EXAMPLES_EXPECTED[name]
    job, conversion = load_job_file(FOREIGN / name)
    assert conversion is not None and conversion.kind == read(name)["kind"]
    assert job.spec.framework.value == framework
    assert job.spec.role_replicas() == replicas
    first = next(iter(replicas))
    run = job.spec.role_settings(first).run if job.spec.framework.value != "mpi" else job.spec.run
    assert run is not None and run.model_dump(exclude_defaults=True) == program
    assert conversion.refused() == [], conversion.warnings()
    assert job.base_dir == str(FOREIGN)


def _flavors_for(job: TrainJob) -> list[str]:
    """Every flavor: a job of the operator's own kinds renders back as that kind on kubeflow (a PaddleJob)."""
    return list(FLAVORS)


@pytest.mark.parametrize("name", KUBEFLOW_FILES)
def test_the_example_renders_valid_manifests_for_every_flavor_that_can_express_it(name: str) -> None:
    job, _ = load_job_file(FOREIGN / name)
    source = read(name)
    for flavor in _flavors_for(job):
        objects = render_manifests(job, flavor).objects
        assert_valid(objects)
        images = {c["image"] for c in containers_of(objects)}
        expected = {
            c["image"]
            for spec in next(v for k, v in source["spec"].items() if k.endswith("ReplicaSpecs")).values()
            for c in spec["template"]["spec"]["containers"]
        }
        assert images == expected, flavor


def test_the_kubeflow_flavor_renders_a_pytorchjob_back_as_a_pytorchjob() -> None:
    job, _ = load_job_file(FOREIGN / "pytorchjob.yaml")
    root = render_manifests(job, "kubeflow").root
    assert root["kind"] == "PyTorchJob"
    assert set(root["spec"]["pytorchReplicaSpecs"]) == {"Master", "Worker"}
    assert root["spec"]["runPolicy"]["backoffLimit"] == 2
    assert root["spec"]["runPolicy"]["cleanPodPolicy"] == "Running"
    worker = root["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert worker["restartPolicy"] == "OnFailure"
    container = worker["template"]["spec"]["containers"][0]
    assert container["name"] == "pytorch"  # the operator's own convention, written again
    assert container["args"] == ["python", "../pytorch-ddp/train.py", "--steps", "5"]
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}


# -- round trip through kubetrain's own render ------------------------------------------------------------


@pytest.mark.parametrize("example", ["pytorch-ddp", "tensorflow-multiworker", "mpi-allreduce", "jax-env"])
def test_a_job_rendered_by_the_kubeflow_flavor_converts_back_to_the_same_manifests(example: str) -> None:
    """TrainJob → kubeflow manifests → conversion → the same manifests again: kubetrain's start-up script, wiring
    env and labels are recognised as its own, and what the user wrote comes back where it was."""
    # The MPI example names no image (it runs locally); Kubernetes needs one.
    overrides = ["spec.image=mpi:1"] if example.startswith("mpi") else []
    job = load_file(EXAMPLES / example / "job.yaml", overrides=overrides)
    first = render_manifests(job, "kubeflow").objects
    conversion = convert(copy.deepcopy(first[0]))
    assert conversion.refused() == [], conversion.warnings()
    again = render_manifests(conversion.job, "kubeflow").objects
    assert again == first
    for role in job.spec.role_replicas():
        original, back = job.spec.role_settings(role), conversion.job.spec.role_settings(role)
        assert back.run == original.run and back.image == original.image, role


# -- every field accounted for ----------------------------------------------------------------------------


def _verdicts(conversion: Conversion) -> dict[str, tuple[str, str | None]]:
    return {n.source: (n.verdict, n.target) for n in conversion.notes}


def test_every_field_of_the_pytorchjob_kitchen_sink_is_accounted_for() -> None:
    job, conversion = load_job_file(FOREIGN / "pytorchjob-kitchen-sink.yaml")
    assert conversion is not None
    verdicts = _verdicts(conversion)
    w = "spec.pytorchReplicaSpecs.Worker.template.spec"
    c = f"{w}.containers[0]"
    assert {s for s, (v, _) in verdicts.items() if v == "refused"} == {
        "metadata.uid",
        "spec.elasticPolicy.metrics",
        "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds",
        "status",
    }
    assert {s for s, (v, _) in verdicts.items() if v == "approximated"} == {"spec.runPolicy.managedBy"}
    mapped = {s: t for s, (v, t) in verdicts.items() if v == "mapped"}
    # The operator's contract reads these as written: nprocPerNode, the rendezvous, the port.
    assert mapped["spec.nprocPerNode"] == "spec.controller.nprocPerNode"
    assert mapped["spec.elasticPolicy.rdzvPort"] == "spec.controller.elasticPolicy.rdzvPort"
    assert mapped["spec.elasticPolicy.rdzvId"] == "spec.controller.elasticPolicy.rdzvId"
    assert mapped[f"{c}.ports[0]"] == "spec.controller.roles.worker.port"
    assert mapped["spec.elasticPolicy.maxRestarts"] == "spec.elastic.maxRestarts"
    assert mapped["spec.runPolicy.schedulingPolicy.queue"] == "spec.scheduling.queue"
    assert mapped[f"{c}.command"] == mapped[f"{c}.args"] == "spec.roles.worker.run"
    assert mapped[f"{w}.serviceAccountName"] == "spec.serviceAccount"
    for carried, at in ((f"{w}.imagePullSecrets", "spec.imagePullSecrets"),
                        (f"{w}.initContainers", "spec.initContainers"),
                        (f"{c}.readinessProbe", "spec.containers[0].readinessProbe"),
                        (f"{w}.containers[1]", "spec.containers[1]")):
        assert mapped[carried] == f"spec.roles.worker.podTemplate.{at}", carried
    spec = job.spec
    worker = job.spec.role_settings("worker")
    assert (spec.framework.value, spec.service_account) == ("pytorch", "trainer")
    assert spec.controller is not None and spec.controller.nproc_per_node == "2"
    assert spec.elastic is not None
    assert (spec.elastic.min_replicas, spec.elastic.max_replicas, spec.elastic.max_restarts) == (1, 3, 5)
    assert (spec.scheduling.queue, spec.scheduling.min_available, spec.scheduling.priority_class) == (
        "research",
        2,
        "high",
    )
    policy = spec.run_policy
    assert (
        policy.clean_pod_policy,
        policy.ttl_seconds_after_finished,
        policy.active_deadline_seconds,
        policy.backoff_limit,
    ) == ("Running", 600, 7200, 3)
    assert worker.run is not None and worker.run.module == ["trainer.main", "--epochs", "3"]
    assert worker.ports is None  # the operator's rendezvous port is kubetrain's wiring, not a Service
    assert worker.resources is not None and worker.resources.shm is True
    template = job.spec.roles["worker"].pod_template  # type: ignore[index]
    assert template is not None
    assert [c["name"] for c in template["spec"]["containers"]] == ["pytorch", "metrics-exporter"]
    assert template["spec"]["imagePullSecrets"] == [{"name": "registry"}]
    line = next(n.line for n in conversion.notes if n.source == "spec.elasticPolicy.metrics")
    text = (FOREIGN / "pytorchjob-kitchen-sink.yaml").read_text(encoding="utf-8").splitlines()
    assert text[line - 1] == "    metrics:"


def _doc(text: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(textwrap.dedent(text))
    return data


TFJOB_SINK = """\
    apiVersion: kubeflow.org/v1
    kind: TFJob
    metadata: {name: tf-sink}
    spec:
      successPolicy: AllWorkers
      enableDynamicWorker: true
      runPolicy: {managedBy: kueue.x-k8s.io/multikueue}
      tfReplicaSpecs:
        Master:
          replicas: 1
          template:
            spec:
              containers:
                - {name: tensorflow, image: tf:1, command: [python, train.py],
                   ports: [{name: tfjob-port, containerPort: 2222}]}
        PS:
          replicas: 2
          template:
            spec:
              containers: [{name: tensorflow, image: tf:1, command: [python, train.py]}]
    """

MPIJOB_V2_SINK = """\
    apiVersion: kubeflow.org/v2beta1
    kind: MPIJob
    metadata: {name: mpi-sink}
    spec:
      slotsPerWorker: 2
      mpiImplementation: Intel
      sshAuthMountPath: /home/mpiuser/.ssh
      launcherCreationPolicy: WaitForWorkersReady
      runLauncherAsWorker: false
      mpiReplicaSpecs:
        Launcher:
          template:
            spec:
              containers:
                - name: launcher
                  image: mpi:1
                  command: [mpirun, --allow-run-as-root, -np, "4", --mca, btl, ^openib, -x, NCCL_DEBUG,
                            python3, -m, train]
        Worker:
          replicas: 2
          template:
            spec:
              containers: [{name: worker, image: mpi:1, command: [/usr/sbin/sshd, -De]}]
    """

MPIJOB_V1_SINK = """\
    apiVersion: kubeflow.org/v1
    kind: MPIJob
    metadata: {name: mpi-v1-sink}
    spec:
      cleanPodPolicy: All
      mainContainer: trainer
      slotsPerWorker: 1
      mpiReplicaSpecs:
        Launcher:
          template:
            spec:
              containers:
                - {name: sidecar, image: busybox}
                - {name: trainer, image: mpi:1, command: [mpirun, -n, "2", ./solver]}
        Worker:
          replicas: 2
          template:
            spec:
              containers: [{name: trainer, image: mpi:1}]
    """

PADDLE_SINK = """\
    apiVersion: kubeflow.org/v1
    kind: PaddleJob
    metadata: {name: paddle-sink}
    spec:
      elasticPolicy: {minReplicas: 1, maxReplicas: 4}
      paddleReplicaSpecs:
        Master:
          template:
            spec:
              containers: [{name: paddle, image: paddle:1, command: [python, -m, paddle.distributed.launch, t.py]}]
        Worker:
          replicas: 2
          template:
            spec:
              containers: [{name: paddle, image: paddle:1, command: [python, -m, paddle.distributed.launch, t.py]}]
    """


@pytest.mark.parametrize(
    ("text", "mapped", "approximated", "refused"),
    [
        (
            TFJOB_SINK,
            {
                "spec.tfReplicaSpecs.PS.replicas": "spec.roles.ps.replicas",
                "spec.tfReplicaSpecs.Master.replicas": "spec.roles.chief.replicas",
                # the operator's contract reads its port (TF_CONFIG's addresses)
                "spec.tfReplicaSpecs.Master.template.spec.containers[0].ports[0]": "spec.controller.roles.chief.port",
                # with a chief, the operator's success is the chief's whatever the policy says
                "spec.successPolicy": "spec.runPolicy.successRoles",
            },
            set(),
            {"spec.enableDynamicWorker", "spec.runPolicy.managedBy"},
        ),
        (
            MPIJOB_V2_SINK,
            {
                "spec.slotsPerWorker": "spec.roles.worker.procsPerReplica",
                "apiVersion": "spec.mpi.mpiJobVersion",
                "spec.sshAuthMountPath": "spec.sshAuthMountPath",
                "spec.runLauncherAsWorker": None,  # false: what kubetrain's launcher does
            },
            {
                "spec.mpiImplementation",
                "spec.launcherCreationPolicy",  # kubetrain's launcher waits for the workers over ssh
                "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].command",
                "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].command",
                # kubetrain names the container it renders itself
                "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].name",
                "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].name",
            },
            set(),
        ),
        (
            MPIJOB_V1_SINK,
            {
                "spec.cleanPodPolicy": "spec.runPolicy.cleanPodPolicy",
                "spec.mainContainer": None,
                # the sidecar, after the main container in the carried template
                "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0]": "spec.roles.launcher.podTemplate.spec."
                "containers[1]",
            },
            {
                "spec.mpiReplicaSpecs.Launcher.template.spec.containers[1].command",
                "spec.mpiReplicaSpecs.Launcher.template.spec.containers[1].name",
                "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].name",
            },
            set(),
        ),
        (
            PADDLE_SINK,
            {"spec.paddleReplicaSpecs.Worker.replicas": "spec.roles.worker.replicas"},
            {
                "spec.paddleReplicaSpecs.Master.template.spec.containers[0].name",
                "spec.paddleReplicaSpecs.Worker.template.spec.containers[0].name",
            },
            {"spec.elasticPolicy"},
        ),
    ],
    ids=["tfjob", "mpijob-v2beta1", "mpijob-v1", "paddlejob"],
)
def test_kind_specific_fields_are_accounted_for(
    text: str, mapped: dict[str, str | None], approximated: set[str], refused: set[str]
) -> None:
    doc = _doc(text)
    assert crd_errors(doc) == []
    conversion = convert(doc)
    verdicts = _verdicts(conversion)
    assert {s: t for s, (v, t) in verdicts.items() if v == "mapped" and s in mapped} == mapped
    assert {s for s, (v, _) in verdicts.items() if v == "approximated"} == approximated
    assert {s for s, (v, _) in verdicts.items() if v == "refused"} == refused


def test_the_mpi_launchers_mpirun_becomes_kubetrains_program_and_options_under_the_operators_contract() -> None:
    """No launcher inside a launcher: the launcher's mpirun is read as kubetrain's own (its program and options;
    kubetrain's mpirun writes -np and the hostfile), and the operator's contract (spec.controller) still gives
    the launcher its variables and /etc/mpi files, with the file's slots and MPI implementation."""
    job = convert(_doc(MPIJOB_V2_SINK)).job
    assert job.spec.run is not None
    assert job.spec.run.module == ["train"]
    assert job.spec.run.other_args == ["--mca", "btl", "^openib", "-x", "NCCL_DEBUG"]
    assert job.spec.role_settings("worker").procs_per_replica == 2
    controller = job.spec.controller
    assert controller is not None and (controller.slots_per_worker, controller.mpi_implementation) == (2, "Intel")
    launcher = next(w for w in plan(job).roles if w.role == "launcher")
    assert launcher.env["K_MPI_JOB_ROLE"] == "launcher" and "I_MPI_HYDRA_HOST_FILE" in launcher.env
    (process,) = launcher.processes
    assert process.argv[0] == "mpirun" and process.argv[-3:] == ("python", "-m", "train")
    assert process.argv.count("mpirun") == 1
    v1 = convert(_doc(MPIJOB_V1_SINK)).job
    assert v1.spec.run is not None and v1.spec.run.exec == ["./solver"]  # mainContainer named the program's
    assert v1.spec.run_policy.clean_pod_policy == "All"


def test_a_tfjob_master_is_the_chief() -> None:
    job = convert(_doc(TFJOB_SINK)).job
    assert job.spec.role_replicas() == {"chief": 1, "ps": 2}


def test_a_replica_type_typo_gets_a_did_you_mean_from_the_kinds_own_fields(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text((FOREIGN / "pytorchjob.yaml").read_text(encoding="utf-8").replace("    Worker:", "    Wroker:"))
    with pytest.raises(SpecError) as caught:
        load_job_file(path)
    text = str(caught.value)
    assert "pytorchReplicaSpecs.Wroker" in text and "did you mean 'Worker'?" in text
    assert f"{path}:" in text  # with its line


# -- run here ---------------------------------------------------------------------------------------------

DDP_SHIM = """\
import gc, sys
sys.path.insert(0, {folder!r})
import torch.distributed as dist
import train

_destroy = dist.destroy_process_group


def _destroy_after_collect(*args, **kwargs):
    gc.collect()  # torch 2.13 may abort at exit while DDP's cycles hold the process group (see test_frameworks)
    return _destroy(*args, **kwargs)


dist.destroy_process_group = _destroy_after_collect
sys.exit(train.main(sys.argv[1:]))
"""


def ddp_shim(folder: Path) -> Path:
    """examples/pytorch-ddp/train.py behind DDP_SHIM, as `folder`/train.py: the program a run-here test gives."""
    shim = folder / "train.py"
    shim.write_text(DDP_SHIM.format(folder=str(EXAMPLES / "pytorch-ddp")), encoding="utf-8")
    return shim


@pytest.mark.slow
def test_the_pytorchjob_runs_here_through_torch_distributed(tmp_path: Path) -> None:
    """Master and Worker train over gloo with the env contract the operator would give them, and end with
    identical parameters."""
    shim = ddp_shim(tmp_path)
    doc = read("pytorchjob.yaml")
    for spec in doc["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["command"] = ["python", str(shim)]
    job = convert(doc, base_dir=str(FOREIGN)).job
    assert_ddp_in_step(run_job(job, FOREIGN), "master-0", "worker-0")


@pytest.mark.slow
def test_the_tfjob_runs_here_through_tensorflow() -> None:
    """Chief and Worker train in sync with MultiWorkerMirroredStrategy, configured by kubetrain's TF_CONFIG."""
    job, _ = load_job_file(FOREIGN / "tfjob.yaml")
    status = run_job(job, FOREIGN)
    logs = log_lines(status.job_id)
    assert status.phase is JobPhase.SUCCEEDED, "\n".join([status.summary_line(), *logs.get("chief-0", [])])
    sums = [line.split()[-1] for lines in logs.values() for line in lines if "final-params-checksum" in line]
    assert len(sums) == 2 and len(set(sums)) == 1, logs


@pytest.mark.slow
def test_the_mpijob_runs_here_through_mpirun() -> None:
    if shutil.which("mpirun") is None:
        pytest.fail("mpirun is not installed: scripts/test.sh installs openmpi-bin")
    job, _ = load_job_file(FOREIGN / "mpijob.yaml")
    status = run_job(job, FOREIGN)
    lines = log_lines(status.job_id)["launcher-0"]
    assert status.phase is JobPhase.SUCCEEDED, "\n".join([status.summary_line(), *lines])
    assert [line for line in lines if line.startswith("allreduce-sum")] == ["allreduce-sum 1"] * 2


def test_the_xgboostjob_runs_here_with_the_operators_env_contract() -> None:
    """The shipped XGBoostJob runs as written: master and workers join one world from MASTER_ADDR/RANK."""
    job, _ = load_job_file(FOREIGN / "xgboostjob.yaml")
    status = run_job(job, FOREIGN)
    logs = log_lines(status.job_id)
    assert status.phase is JobPhase.SUCCEEDED, "\n".join([status.summary_line(), *logs.get("master-0", [])])
    replicas = sorted(line.split()[1:3] for lines in logs.values() for line in lines if "xgboost-replica" in line)
    assert replicas == [["0", "3"], ["1", "3"], ["2", "3"]], logs
    assert all("agreed=True" in line for lines in logs.values() for line in lines if "xgboost-replica" in line)


def test_the_jaxjob_runs_here_with_the_jax_contract() -> None:
    job, _ = load_job_file(FOREIGN / "jaxjob.yaml")
    status = run_job(job, FOREIGN)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    assert sorted(log_lines(status.job_id)) == ["worker-0", "worker-1"]


def test_from_the_public_api_a_converted_job_renders() -> None:
    job, _ = load_job_file(FOREIGN / "jaxjob.yaml")
    assert kubetrain.render(job, "kubeflow")[0]["kind"] == "JAXJob"
