"""Foreign documents submitted as written to a cluster that serves their kind, and followed with every verb.

Each kind's file is written here in the shape its upstream examples use (a torchrun PyTorchJob, a JobSet whose
replicatedJob has parallelism, a Volcano Job with svc/env plugins, T9k's DeepSpeedJob, ...). On the API emulator,
with the upstream CRDs (and, for DeepSpeedJob and TrainingWorkload, CRDs written from their references:
tests/data/crds), every body kubetrain sends is validated against the kind's CRD schema (the emulator's body
validator). The controller's part (pods labelled as it labels them, its status) is played by
``kube_emulator.controllers``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_emulator import KubeEmulator
from kube_emulator.controllers import Controllers

from kubetrain.backends.kubernetes.backend import KubernetesBackend
from kubetrain.contract.labels import AS_WRITTEN_ANNOTATION, JOB_LABEL, ROLE_LABEL, SUBMISSION_LABEL
from kubetrain.foreign.loader import as_written_stand_in, load_job_file
from kubetrain.jobspec import SpecError, TrainJob
from kubetrain.status import JobPhase, ReplicaPhase
from tests.support.cluster import FAST_RETRY
from tests.support.manifest_schemas import TEST_CRD_DIR, validate_manifest

IMAGE = "busybox:1.36"

PYTORCHJOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: torchrun-mnist
  labels: {team: vision}
  annotations: {owner: ana}
spec:
  nprocPerNode: "2"
  runPolicy: {cleanPodPolicy: None}
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: busybox:1.36
            command: [torchrun, /opt/mnist/mnist.py, --epochs=1]
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: busybox:1.36
            command: [torchrun, /opt/mnist/mnist.py, --epochs=1]
"""

TFJOB = """\
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: tf-dist}
spec:
  tfReplicaSpecs:
    PS:
      replicas: 1
      template:
        spec:
          containers: [{name: tensorflow, image: busybox:1.36, command: [python, /tf/dist.py]}]
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{name: tensorflow, image: busybox:1.36, command: [python, /tf/dist.py]}]
"""

MPIJOB_V1 = """\
apiVersion: kubeflow.org/v1
kind: MPIJob
metadata: {name: horovod-v1}
spec:
  slotsPerWorker: 1
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers: [{name: mpi, image: busybox:1.36, command: [mpirun, -np, "2", python, /h/train.py]}]
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{name: mpi, image: busybox:1.36}]
"""

MPIJOB_V2 = """\
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: pi}
spec:
  slotsPerWorker: 1
  runPolicy: {cleanPodPolicy: Running}
  sshAuthMountPath: /home/mpiuser/.ssh
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - {name: mpi-launcher, image: busybox:1.36, command: [mpirun, -n, "2", /home/mpiuser/pi]}
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: mpi-worker
            image: busybox:1.36
            command: [/usr/sbin/sshd]
            args: [-De, -f, /home/mpiuser/.sshd_config]
"""

XGBOOSTJOB = """\
apiVersion: kubeflow.org/v1
kind: XGBoostJob
metadata: {name: xgb-iris}
spec:
  xgbReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers: [{name: xgboost, image: busybox:1.36, args: [--job_type=Train]}]
    Worker:
      replicas: 2
      restartPolicy: ExitCode
      template:
        spec:
          containers: [{name: xgboost, image: busybox:1.36, args: [--job_type=Train]}]
"""

PADDLEJOB = """\
apiVersion: kubeflow.org/v1
kind: PaddleJob
metadata: {name: paddle-resnet}
spec:
  paddleReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - {name: paddle, image: busybox:1.36, command: [python, -m, paddle.distributed.launch, run_check]}
"""

JAXJOB = """\
apiVersion: kubeflow.org/v1
kind: JAXJob
metadata: {name: jax-psum}
spec:
  jaxReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers: [{name: jax, image: busybox:1.36, command: [python3, train.py]}]
"""

JOBSET = """\
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: network-jobset}
spec:
  network: {enableDNSHostnames: true, subdomain: example}
  replicatedJobs:
  - name: leader
    replicas: 1
    template:
      spec:
        parallelism: 1
        completions: 1
        backoffLimit: 0
        template:
          spec:
            restartPolicy: Never
            containers: [{name: leader, image: busybox:1.36, command: [sh, -c, "sleep 30"]}]
  - name: workers
    replicas: 1
    template:
      spec:
        parallelism: 3
        completions: 3
        backoffLimit: 0
        template:
          spec:
            restartPolicy: Never
            containers:
            - {name: worker, image: busybox:1.36, command: [sh, -c, "ping -c 3 network-jobset-leader-0-0.example"]}
"""

VOLCANO = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: tf-dist-vc}
spec:
  minAvailable: 3
  schedulerName: volcano
  plugins: {env: [], svc: []}
  policies:
  - {event: PodEvicted, action: RestartJob}
  tasks:
  - name: ps
    replicas: 1
    template:
      spec:
        restartPolicy: Never
        containers: [{name: tensorflow, image: busybox:1.36, command: [sh, -c, "cat /etc/volcano/ps.host"]}]
  - name: worker
    replicas: 2
    policies: [{event: TaskCompleted, action: CompleteJob}]
    template:
      spec:
        restartPolicy: Never
        containers: [{name: tensorflow, image: busybox:1.36, command: [sh, -c, "echo $VC_TASK_INDEX"]}]
"""

DEEPSPEEDJOB = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: DeepSpeedJob
metadata: {name: bert-ds}
spec:
  scheduler:
    t9kScheduler: {queue: default}
  runPolicy: {cleanUpPolicy: Unfinished, backoffLimit: 2}
  config:
    slotsPerWorker: 1
    run:
      python: [/workspace/train.py, --deepspeed_config=ds.json]
  worker:
    replicas: 2
    template:
      spec:
        containers: [{name: worker, image: busybox:1.36}]
"""

TRAININGWORKLOAD = """\
apiVersion: run.ai/v2alpha1
kind: TrainingWorkload
metadata: {name: train-resnet, namespace: default}
spec:
  image: {value: busybox:1.36}
  command: {value: python train.py}
  gpu: {value: "1"}
  parallelism: {value: 2}
  completions: {value: 2}
"""

# kind file → (the engine that runs it on the emulator, extra CRDs, {role: replicas})
KINDS: dict[str, tuple[str, str, list[str], dict[str, int]]] = {
    "PyTorchJob": (PYTORCHJOB, "kubeflow", [], {"master": 1, "worker": 2}),
    "TFJob": (TFJOB, "kubeflow", [], {"ps": 1, "worker": 2}),
    "MPIJob-v1": (MPIJOB_V1, "kubeflow", [], {"launcher": 1, "worker": 2}),
    "MPIJob-v2beta1": (MPIJOB_V2, "mpi-operator", ["mpijobs.kubeflow.org.v2beta1"], {"launcher": 1, "worker": 2}),
    "XGBoostJob": (XGBOOSTJOB, "kubeflow", ["xgboostjobs.kubeflow.org"], {"master": 1, "worker": 2}),
    "PaddleJob": (PADDLEJOB, "kubeflow", ["paddlejobs.kubeflow.org"], {"worker": 2}),
    "JAXJob": (JAXJOB, "kubeflow", [], {"worker": 2}),
    "JobSet": (JOBSET, "jobset", [], {"leader": 1, "workers": 3}),
    "VolcanoJob": (VOLCANO, "volcano", [], {"ps": 1, "worker": 2}),
    "DeepSpeedJob": (DEEPSPEEDJOB, "deepspeedjob", ["deepspeedjobs.batch.tensorstack.dev"], {"worker": 2}),
    "TrainingWorkload": (TRAININGWORKLOAD, "trainingworkload", ["trainingworkloads.run.ai"], {"worker": 2}),
}

SERVER_FIELDS = ("uid", "creationTimestamp", "resourceVersion", "generation")


def cluster_for(emu: KubeEmulator, extra: list[str]) -> None:
    """The emulator serving the upstream CRDs plus ``extra`` (from tests/data/crds), every body validated."""
    emu.add_crd_dir(TEST_CRD_DIR)
    if "mpijobs.kubeflow.org.v2beta1" in extra:  # one MPIJob CRD per cluster: the operator's replaces v1's
        emu.uninstall_crds(["mpijobs.kubeflow.org"])
    emu.install_crds(extra)
    emu.body_validator = validate_manifest


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def backend(config: Path, **options: Any) -> KubernetesBackend:
    options.setdefault("liveness_ttl", 0)
    return KubernetesBackend(kubeconfig=config, retry=FAST_RETRY, log_grace=0.5, diagnose_every=0.2, **options)


def without_kubetrain(obj: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    """The stored object less what the API server adds (uid, versions, status, the namespace from the URL when
    the file names none) and less kubetrain's labels and annotation: what must equal the file."""
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out["metadata"]
    for key in SERVER_FIELDS:
        meta.pop(key, None)
    if "namespace" not in source["metadata"]:
        meta.pop("namespace", None)
    for field in ("labels", "annotations"):
        kept = {k: v for k, v in (meta.get(field) or {}).items() if not k.startswith("kubetrain.dev/")}
        if kept:
            meta[field] = kept
        else:
            meta.pop(field, None)
    return out


def load(path: Path) -> TrainJob:
    """The job as `kubetrain run FILE --backend kubernetes` loads it: converted, or (a file kubetrain cannot
    convert, such as an image run by its entrypoint) a stand-in that can only be submitted as written."""
    try:
        job, conversion = load_job_file(path)
    except SpecError as exc:
        stand_in = as_written_stand_in(path, exc)
        assert stand_in is not None
        return stand_in
    assert conversion is not None and job.source is not None
    return job


@pytest.mark.parametrize("kind", list(KINDS))
def test_submitted_as_written_and_followed(kube_emulator: KubeEmulator, kube_config_file: Path, tmp_path: Path,
                                           kind: str) -> None:
    text, engine, extra, roles = KINDS[kind]
    cluster_for(kube_emulator, extra)
    source = yaml.safe_load(text)
    name = source["metadata"]["name"]
    b = backend(kube_config_file)
    events: list[str] = []
    result = b.run(load(write(tmp_path, text)), detach=True, on_event=events.append)

    # The same document: the API server validated it against the kind's CRD, and only kubetrain's labels and
    # annotation were added.
    assert kube_emulator.validation_failures == []
    [stored] = [o for o in kube_emulator.objects(source["kind"]) if o["metadata"]["name"] == name] if \
        kind not in ("VolcanoJob",) else [kube_emulator.get("jobs.batch.volcano.sh", name)]
    assert without_kubetrain(stored, source) == source
    added = {k: v for k, v in stored["metadata"]["labels"].items() if k not in (source["metadata"].get("labels") or {})}
    assert set(added) == {JOB_LABEL, SUBMISSION_LABEL} and added[JOB_LABEL] == name
    assert stored["metadata"]["annotations"][AS_WRITTEN_ANNOTATION] == "true"
    assert result.job_id == name and result.flavor == f"{source['kind']} as written"
    assert any(e.startswith(f"created {source['kind']} {name} as written") for e in events)

    # Followed: every replica listed from the kind's own spec, then from the pods its controller makes.
    first = b.status(name)
    assert first.phase is JobPhase.PENDING
    assert {r.role for r in first.replicas} == set(roles) and len(first.replicas) == sum(roles.values())
    assert all(r.reason == "NoPod" for r in first.replicas)
    ctl = Controllers(kube_emulator, "default", job_label=JOB_LABEL, role_label=ROLE_LABEL)
    pods = ctl.create_pods(engine, name)
    assert sorted(pods) == sorted(f"{role}-{i}" for role, n in roles.items() for i in range(n))
    for replica, pod in pods.items():
        kube_emulator.set_pod_phase("default", pod, "Running")
        kube_emulator.append_log("default", pod, f"hello from {replica}\n")
    running = b.status(name)
    assert running.phase is JobPhase.RUNNING and all(r.phase is ReplicaPhase.RUNNING for r in running.replicas)
    described = b.describe(name)
    assert sorted(described.pods) == sorted(pods) and all(p["name"] == pods[k] for k, p in described.pods.items())
    lines = sorted((rec.key, rec.text) for rec in b.logs(name))
    assert lines == sorted((replica, f"hello from {replica}") for replica in pods)
    assert [s.job_id for s in b.list()] == [name]

    for pod in pods.values():
        kube_emulator.set_pod_phase("default", pod, "Succeeded", exit_code=0)
    ctl.conclude(engine, name, "Succeeded")
    done = b.wait(name, timeout=10)
    assert done.phase is JobPhase.SUCCEEDED, done.summary_line()
    assert all(r.phase is ReplicaPhase.SUCCEEDED for r in done.replicas)
    b.delete(name)
    assert kube_emulator.objects(source["kind"]) == [] or kind == "VolcanoJob"
    b.close()


@pytest.mark.parametrize(("kind", "conditions"), [
    ("PyTorchJob", {"conditions": [
        {"type": "Created", "status": "True", "reason": "PyTorchJobCreated"},
        {"type": "Running", "status": "False", "reason": "PyTorchJobFailed"},
        {"type": "Failed", "status": "True", "reason": "PyTorchJobFailed",
         "message": "PyTorchJob torchrun-mnist is failed because 1 Worker replica(s) failed."}],
        "replicaStatuses": {"Master": {"active": 1}, "Worker": {"failed": 1, "active": 1}}}),
    ("JobSet", {"conditions": [{"type": "Failed", "status": "True", "reason": "FailedJobs",
                                "message": "jobset failed due to one or more job failures"}],
                "restarts": 2, "terminalState": "Failed"}),
    ("VolcanoJob", {"state": {"phase": "Failed", "reason": "PodFailed", "message": "task worker failed"},
                    "retryCount": 1}),
    ("DeepSpeedJob", {"phase": "Failed", "backoffCount": 2, "conditions": [
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "restarted 2 times"}]}),
    ("TrainingWorkload", {"phase": "Failed", "conditions": [
        {"type": "Failed", "status": "True", "reason": "PodFailed", "message": "a pod failed"}]}),
])
def test_the_kinds_own_failure_is_the_jobs(kube_emulator: KubeEmulator, kube_config_file: Path, tmp_path: Path,
                                           kind: str, conditions: dict[str, Any]) -> None:
    """status maps the kind's own verdict: its conditions (Kubeflow, JobSet, T9k, Run:ai) or state (Volcano)."""
    text, _engine, extra, _ = KINDS[kind]
    cluster_for(kube_emulator, extra)
    name = yaml.safe_load(text)["metadata"]["name"]
    b = backend(kube_config_file)
    b.run(load(write(tmp_path, text)), detach=True)
    resource = {"PyTorchJob": "pytorchjobs", "JobSet": "jobsets", "VolcanoJob": "jobs.batch.volcano.sh",
                "DeepSpeedJob": "deepspeedjobs", "TrainingWorkload": "trainingworkloads"}[kind]
    kube_emulator.patch_status(resource, name, conditions)
    status = b.status(name)
    assert status.phase is JobPhase.FAILED, status.summary_line()
    expected_reason = {"PyTorchJob": "PyTorchJobFailed", "JobSet": "FailedJobs", "VolcanoJob": "PodFailed",
                       "DeepSpeedJob": "BackoffLimitExceeded", "TrainingWorkload": "PodFailed"}[kind]
    assert status.reason == expected_reason
    if kind == "JobSet":
        assert status.backoff_count == 2
    if kind == "DeepSpeedJob":
        assert (status.backoff_count, status.backoff_limit) == (2, 2)
    b.close()


@pytest.mark.parametrize("kind", ["PyTorchJob", "JobSet", "DeepSpeedJob", "TrainingWorkload"])
def test_suspend_and_resume_where_the_kind_can(kube_emulator: KubeEmulator, kube_config_file: Path, tmp_path: Path,
                                               kind: str) -> None:
    text, _engine, extra, _ = KINDS[kind]
    cluster_for(kube_emulator, extra)
    name = yaml.safe_load(text)["metadata"]["name"]
    b = backend(kube_config_file)
    b.run(load(write(tmp_path, text)), detach=True)
    suspended = b.suspend(name)
    assert suspended.phase is JobPhase.SUSPENDED
    resource = {"PyTorchJob": "pytorchjobs", "JobSet": "jobsets", "DeepSpeedJob": "deepspeedjobs",
                "TrainingWorkload": "trainingworkloads"}[kind]
    spec = kube_emulator.get(resource, name)["spec"]
    where = {"PyTorchJob": lambda s: s["runPolicy"]["suspend"], "JobSet": lambda s: s["suspend"],
             "DeepSpeedJob": lambda s: s["runMode"]["pause"]["enable"],
             "TrainingWorkload": lambda s: not s["active"]["value"]}[kind]
    assert where(spec) is True
    resumed = b.resume(name)
    assert resumed.phase is JobPhase.PENDING
    assert kube_emulator.validation_failures == []
    b.close()


def test_cancel_deletes_the_document(kube_emulator: KubeEmulator, kube_config_file: Path, tmp_path: Path) -> None:
    cluster_for(kube_emulator, [])
    b = backend(kube_config_file)
    b.run(load(write(tmp_path, PYTORCHJOB)), detach=True)
    Controllers(kube_emulator, "default", job_label=JOB_LABEL, role_label=ROLE_LABEL).create_pods(
        "kubeflow", "torchrun-mnist")
    cancelled = b.cancel("torchrun-mnist")
    assert cancelled.phase is JobPhase.CANCELLED
    assert kube_emulator.objects("pytorchjobs") == [] and kube_emulator.objects("pods") == []
    b.close()


def test_convert_and_a_named_flavor_keep_the_rendered_path(kube_emulator: KubeEmulator, kube_config_file: Path,
                                                           tmp_path: Path) -> None:
    cluster_for(kube_emulator, [])
    path = write(tmp_path, PYTORCHJOB.replace("  runPolicy: {cleanPodPolicy: None}\n", ""))
    b = backend(kube_config_file, convert=True)
    plan = b.run(load(path), dry_run="client").plan
    assert plan is not None
    # No engine's controller is seen alive on the emulator here: the job flavor, a Job per role.
    assert {o["kind"] for o in plan["items"]} == {"Job", "Service"}
    assert all(AS_WRITTEN_ANNOTATION not in (o["metadata"].get("annotations") or {}) for o in plan["items"])
    named = backend(kube_config_file, flavor="kubeflow").run(load(path), dry_run="client").plan
    assert named is not None and named["items"][0]["kind"] == "PyTorchJob"
    assert AS_WRITTEN_ANNOTATION not in (named["items"][0]["metadata"].get("annotations") or {})
    b.close()


def test_dry_run_shows_what_would_be_submitted(kube_emulator: KubeEmulator, kube_config_file: Path,
                                               tmp_path: Path) -> None:
    cluster_for(kube_emulator, [])
    b = backend(kube_config_file)
    job = load(write(tmp_path, PYTORCHJOB))
    plan = b.run(job, dry_run="client").plan
    assert plan is not None
    [doc] = plan["items"]
    assert without_kubetrain(doc, yaml.safe_load(PYTORCHJOB)) == yaml.safe_load(PYTORCHJOB)
    report = b.run(job, dry_run="server").dry_run
    assert report is not None and report.ok and [v.kind for v in report.verdicts] == ["PyTorchJob"]
    assert "what this cluster can run:" in report.format()
    assert kube_emulator.objects("pytorchjobs") == []
    b.close()


@pytest.mark.kube_crds("jobsets.jobset.x-k8s.io")
def test_a_kind_the_cluster_does_not_serve_is_converted(kube_emulator: KubeEmulator, kube_config_file: Path,
                                                        tmp_path: Path) -> None:
    b = backend(kube_config_file)
    events: list[str] = []
    job = load(write(tmp_path, PYTORCHJOB.replace("  runPolicy: {cleanPodPolicy: None}\n", "")))
    plan = b.run(job, dry_run="client", on_event=events.append).plan
    assert plan is not None and plan["items"][0]["kind"] in ("Job", "JobSet")
    assert any("does not serve PyTorchJob (kubeflow.org/v1)" in e for e in events)
    b.close()


def test_an_unprocessed_pytorchjob_is_said_with_a_hint(kube_emulator: KubeEmulator, kube_config_file: Path,
                                                       tmp_path: Path) -> None:
    cluster_for(kube_emulator, [])
    b = backend(kube_config_file, untouched_after=0)
    b.run(load(write(tmp_path, PYTORCHJOB)), detach=True)
    status = b.status("torchrun-mnist")
    assert status.reason == "NoController"
    assert status.message is not None and status.message.startswith("no controller has acted on this PyTorchJob for")
    assert "is the Kubeflow training operator installed and running? (kubectl get pods -n kubeflow)" in status.message
    lines = b.describe("torchrun-mnist").status_lines()
    assert any("NoController" in line and "--convert" in line for line in lines)
    b.close()


ENTRYPOINT_ONLY = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: by-entrypoint}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
          - {name: pytorch, image: example.com/mnist:1.0, args: [--epochs, "1"]}
"""


def test_a_stand_in_is_never_planned_or_run_locally(tmp_path: Path) -> None:
    """A stand-in for a document that can only be submitted as written holds a placeholder program; planning it
    (which every backend but the as-written path does) must raise the conversion's error, never run the
    placeholder and call that the user's job."""
    from kubetrain.backends.local.backend import LocalBackend
    from kubetrain.plan import plan

    path = write(tmp_path, ENTRYPOINT_ONLY)
    try:
        load_job_file(path)
    except SpecError as exc:
        error = exc
    else:  # kubetrain learnt to convert it: build the stand-in from any conversion error instead
        error = SpecError("cannot be converted")
    stand_in = as_written_stand_in(path, error)
    assert stand_in is not None and stand_in.unconverted is error
    with pytest.raises(SpecError) as raised:
        plan(stand_in)
    assert raised.value is error
    with LocalBackend() as local:
        with pytest.raises(SpecError):
            local.run(stand_in, detach=True)
        assert local.list() == []  # nothing was started, nor recorded
