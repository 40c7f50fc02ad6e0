"""Foreign files relax kubetrain's security defaults out loud, as a TrainJob with the same settings does.

Each job file below is written in the shape its project's own examples use (a PyTorchJob's Master, an MPIJob's
Worker, a TFJob's Worker, a JobSet's replicated Job, a Volcano task) and carries the same pod settings: the
host's network, IPC and processes, uid 0 in the pod and in the container, seccomp Unconfined, procMount
Unmasked, a privileged container with added capabilities, a hostPath of `/` and the docker socket. A
conversion splits them between typed settings and a carried pod template; whichever way each goes, the render
must keep it (nothing dropped) and warn of it once, at the source field and line the user wrote.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.foreign.loader import load_job_file
from kubetrain.jobspec.relaxations import BY_KEY, PREFIX
from tests.support.helpers import cli
from tests.support.manifest_schemas import assert_valid

if TYPE_CHECKING:
    from kube_emulator import KubeEmulator

IMAGE = "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727"

RELAXED_POD = """\
hostNetwork: true
hostIPC: true
hostPID: true
securityContext:
  runAsUser: 0
  seccompProfile:
    type: Unconfined
containers:
  - name: {name}
    image: {image}
    command: [python3, /opt/pytorch-mnist/mnist.py, --epochs=1]
    securityContext:
      runAsUser: 0
      procMount: Unmasked
      privileged: true
      capabilities:
        add: [SYS_ADMIN, NET_ADMIN]
    volumeMounts:
      - name: host-root
        mountPath: /host
        readOnly: true
      - name: docker-sock
        mountPath: /var/run/docker.sock
volumes:
  - name: host-root
    hostPath:
      path: /
  - name: docker-sock
    hostPath:
      path: /var/run/docker.sock
      type: Socket
"""
"""A pod spec asking for every relaxation, as a node-debugging or docker-in-docker job writes it."""

PLAIN_POD = """\
containers:
  - name: {name}
    image: {image}
    command: [python3, /opt/pytorch-mnist/mnist.py, --epochs=1]
"""


def pod(text: str, indent: int, name: str) -> str:
    return textwrap.indent(text.format(name=name, image=IMAGE), " " * indent).lstrip()


PYTORCHJOB = f"""\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: relaxed
  namespace: kubeflow
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          {pod(RELAXED_POD, 10, "pytorch")}
    Worker:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          {pod(PLAIN_POD, 10, "pytorch")}
"""

MPIJOB = f"""\
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: relaxed
spec:
  slotsPerWorker: 1
  runPolicy:
    cleanPodPolicy: Running
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
            - name: mpi-launcher
              image: mpioperator/mpi-pi:openmpi
              command: [mpirun, -n, "2", /home/mpiuser/pi]
    Worker:
      replicas: 2
      template:
        spec:
          {pod(RELAXED_POD, 10, "mpi-worker")}
"""

TFJOB = f"""\
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: relaxed
spec:
  tfReplicaSpecs:
    Chief:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          {pod(PLAIN_POD, 10, "tensorflow")}
    Worker:
      replicas: 2
      restartPolicy: Never
      template:
        spec:
          {pod(RELAXED_POD, 10, "tensorflow")}
"""

JOBSET = f"""\
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: relaxed
spec:
  replicatedJobs:
    - name: driver
      replicas: 1
      template:
        spec:
          parallelism: 1
          completions: 1
          backoffLimit: 0
          template:
            spec:
              restartPolicy: Never
              {pod(PLAIN_POD, 14, "main")}
    - name: workers
      replicas: 1
      template:
        spec:
          parallelism: 2
          completions: 2
          backoffLimit: 0
          template:
            spec:
              restartPolicy: Never
              {pod(RELAXED_POD, 14, "main")}
"""

VOLCANO = f"""\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: relaxed
spec:
  minAvailable: 2
  schedulerName: volcano
  queue: default
  plugins:
    pytorch: ["--master=master", "--worker=worker", "--port=23456"]
  tasks:
    - name: master
      replicas: 1
      template:
        spec:
          restartPolicy: OnFailure
          {pod(PLAIN_POD, 10, "master")}
    - name: worker
      replicas: 1
      template:
        spec:
          restartPolicy: OnFailure
          {pod(RELAXED_POD, 10, "worker")}
"""

TRAINJOB = f"""\
apiVersion: kubetrain.dev/v1alpha1
kind: TrainJob
metadata:
  name: relaxed
spec:
  framework: pytorch
  image: {IMAGE}
  run: {{exec: [python3, /opt/pytorch-mnist/mnist.py, --epochs=1]}}
  roles:
    master: {{}}
    worker:
      podTemplate:
        spec:
          {pod(RELAXED_POD, 10, "main")}
"""

# (file, the relaxed pod spec's source path, the role it becomes, the role left alone)
SHAPES = {
    "pytorchjob": (PYTORCHJOB, "spec.pytorchReplicaSpecs.Master.template.spec", "master", "worker"),
    "mpijob": (MPIJOB, "spec.mpiReplicaSpecs.Worker.template.spec", "worker", "launcher"),
    "tfjob": (TFJOB, "spec.tfReplicaSpecs.Worker.template.spec", "worker", "chief"),
    "jobset": (JOBSET, "spec.replicatedJobs[1].template.spec.template.spec", "workers", "driver"),
    "volcano": (VOLCANO, "spec.tasks[1].template.spec", "worker", "master"),
    "trainjob": (TRAINJOB, "spec.roles.worker.podTemplate.spec", "worker", "master"),
}

# (relaxation, the field under the pod spec, the text of its line in the file: its nth occurrence after a marker)
EXPECTED: list[tuple[str, str, str, int, str]] = [
    ("hostNetwork", "hostNetwork", "hostNetwork: true", 0, ""),
    ("hostIPC", "hostIPC", "hostIPC: true", 0, ""),
    ("hostPID", "hostPID", "hostPID: true", 0, ""),
    ("runAsUser", "securityContext.runAsUser", "runAsUser: 0", 0, ""),
    ("seccompProfile", "securityContext.seccompProfile.type", "type: Unconfined", 0, ""),
    ("runAsUser", "containers[0].securityContext.runAsUser", "runAsUser: 0", 1, ""),
    ("procMount", "containers[0].securityContext.procMount", "procMount: Unmasked", 0, ""),
    ("privileged", "containers[0].securityContext.privileged", "privileged: true", 0, ""),
    ("capabilities", "containers[0].securityContext.capabilities.add", "add: [SYS_ADMIN, NET_ADMIN]", 0, ""),
    ("hostPath:/", "volumes[0]", "- name: host-root", 0, "volumes:"),
    ("hostPath:socket", "volumes[1]", "- name: docker-sock", 0, "volumes:"),
]


def line_of(text: str, wanted: str, nth: int, after: str) -> int:
    """The 1-based line of the `nth` line whose text is `wanted`, counting from the line `after` (the start)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == after) if after else 0
    hits = [i + 1 for i, line in enumerate(lines) if i >= start and line.strip() == wanted]
    return hits[nth]


def rendered(tmp_path: Path, text: str) -> tuple[Path, list[dict[str, Any]], list[str]]:
    """(the file, its manifests, its warnings as `kubetrain render` prints them: at the source where converted),
    on the job flavor (Indexed Jobs), a Volcano Job on the volcano flavor (its gang needs it)."""
    path = tmp_path / "job.yaml"
    path.write_text(text)
    job, conversion = load_job_file(path)
    rendered = render_manifests(job, "volcano" if "batch.volcano.sh" in text else "job")
    objects, warnings = rendered.objects, rendered.warnings
    return path, objects, [conversion.at_source(w) if conversion else w for w in warnings]


def relaxations(warnings: list[str]) -> list[str]:
    return [w for w in warnings if PREFIX in w or "PRIVILEGED" in w]


def pod_specs(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each role's pod spec in Indexed Job manifests (the job flavor) or a Volcano Job's tasks, by role."""
    out = {}
    for obj in objects:
        if obj["apiVersion"].startswith("batch.volcano.sh/"):
            out.update({task["name"]: task["template"]["spec"] for task in obj["spec"]["tasks"]})
        elif obj["kind"] == "Job":
            template = obj["spec"]["template"]
            out[template["metadata"]["labels"]["kubetrain.dev/role"]] = template["spec"]
    return out


@pytest.mark.parametrize("shape", SHAPES)
def test_each_relaxation_is_warned_once_at_its_source_line(shape: str, tmp_path: Path) -> None:
    text, at, _, _ = SHAPES[shape]
    path, _, warnings = rendered(tmp_path, text)
    found = relaxations(warnings)
    assert len(found) == len(EXPECTED), "\n".join(found)
    for key, field, wanted, nth, after in EXPECTED:
        line = line_of(text, wanted, nth, after)
        where = f"{at}.{field}: {PREFIX}: {BY_KEY[key].what.split(' ({detail})')[0].split(' {detail}')[0]}"
        if shape == "trainjob":  # no lines: the TrainJob's own path, down to the volume's hostPath
            where = where.replace("]: ", "].hostPath: ") if field.startswith("volumes") else where
        else:
            where = f"{path}:{line}: {where}"
        assert sum(w.startswith(where) for w in found) == 1, (where, found)


@pytest.mark.parametrize("shape", [s for s in SHAPES if s != "trainjob"])
def test_a_converted_file_says_what_the_same_trainjob_says(shape: str, tmp_path: Path) -> None:
    """The same words, relaxation for relaxation, as a TrainJob whose pod template asks the same."""

    def said(text: str) -> list[str]:
        return sorted(w.split(f"{PREFIX}: ", 1)[1].split(" (as TrainJob ")[0]
                      for w in relaxations(rendered(tmp_path, text)[2]))

    assert said(SHAPES[shape][0]) == said(TRAINJOB)


@pytest.mark.parametrize("shape", SHAPES)
def test_nothing_relaxed_is_dropped_from_the_rendered_pods(shape: str, tmp_path: Path) -> None:
    text, _, relaxed, plain = SHAPES[shape]
    _, objects, _ = rendered(tmp_path, text)
    assert_valid(objects)
    specs = pod_specs(objects)
    spec = specs[relaxed]
    assert (spec.get("hostNetwork"), spec.get("hostIPC"), spec.get("hostPID")) == (True, True, True)
    assert spec["securityContext"]["runAsUser"] == 0
    assert spec["securityContext"]["seccompProfile"] == {"type": "Unconfined"}
    main = spec["containers"][0]
    assert main["securityContext"]["runAsUser"] == 0
    assert main["securityContext"]["procMount"] == "Unmasked"
    assert main["securityContext"]["privileged"] is True
    assert set(main["securityContext"]["capabilities"]["add"]) == {"SYS_ADMIN", "NET_ADMIN"}
    host = {v["hostPath"]["path"]: v["name"] for v in spec["volumes"] if "hostPath" in v}
    assert set(host) == {"/", "/var/run/docker.sock"}
    mounted = {m["name"]: m["mountPath"] for m in main["volumeMounts"]}
    assert mounted[host["/"]] == "/host" and mounted[host["/var/run/docker.sock"]] == "/var/run/docker.sock"
    # the other role asked for none of it
    other = specs[plain]
    assert not {"hostNetwork", "hostIPC", "hostPID"} & set(other)
    assert not [v for v in other.get("volumes", []) if "hostPath" in v]
    assert other["containers"][0]["securityContext"].get("privileged") is not True


def test_validate_prints_each_relaxation_at_its_line(tmp_path: Path) -> None:
    """`kubetrain validate` with and without a backend: the eleven settings, each at its own line of the file."""
    path = tmp_path / "pytorchjob.yaml"
    path.write_text(PYTORCHJOB)
    lines = {line_of(PYTORCHJOB, wanted, nth, after) for _, _, wanted, nth, after in EXPECTED}
    assert len(lines) == len(EXPECTED)
    for args in ((), ("--backend", "kubernetes", "--flavor", "job")):
        done = cli("validate", path, *args)
        assert done.returncode == 0, done.stderr
        said = [line for line in done.stderr.splitlines() if PREFIX in line]
        assert {int(line.split(f"{path}:", 1)[1].split(":", 1)[0]) for line in said} == lines, done.stderr
        assert len(said) == len(EXPECTED)


def test_a_run_on_kubernetes_says_each_relaxation_at_its_line(
    kube_emulator: KubeEmulator, kube_config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kubetrain run` of a converted PyTorchJob (against the API emulator): the render's warnings, printed before
    the job is created, at the file's own lines, and the created pod template keeps every setting."""
    from kubetrain.cli.main import main

    path = tmp_path / "pytorchjob.yaml"
    path.write_text(PYTORCHJOB)
    argv = ["run", str(path), "--convert", "--flavor", "job", "--detach", "-n", "default", "--backend", "k8s",
            "--kubeconfig", str(kube_config_file)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if PREFIX in line]
    lines = {line_of(PYTORCHJOB, wanted, nth, after) for _, _, wanted, nth, after in EXPECTED}
    assert len(said) == len(EXPECTED), err
    assert {int(line.split(f"{path}:", 1)[1].split(":", 1)[0]) for line in said} == lines, err
    created = kube_emulator.get("jobs", "relaxed-master")["spec"]["template"]["spec"]
    assert (created["hostPID"], created["securityContext"]["runAsUser"]) == (True, 0)
    assert created["containers"][0]["securityContext"]["procMount"] == "Unmasked"
    assert {v["hostPath"]["path"] for v in created["volumes"] if "hostPath" in v} == {"/", "/var/run/docker.sock"}
