"""MPI job files written in the shapes the MPI Operator's, the training operator's and Volcano's own examples use
(tests/foreign/corpus_mpi/, written for these tests): each valid against its upstream CRD, converted, rendered for
every flavor as its controller would run it (the workers' own sshd kept, the keys where that sshd looks, a v2beta1
MPIJob still one on the kubeflow flavor, Volcano's ssh and svc plugins kept), and run here with mpirun and mpi4py
(tests/foreign/corpus_mpi/ring.py stands in for the files' programs).

A corpus test of every foreign kind belongs under tests/ too; these are the MPI files of it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.contract.choices import FLAVORS
from kubetrain.foreign.loader import load_job_file
from kubetrain.jobspec import SpecError, TrainJob
from kubetrain.status import JobPhase
from tests.foreign.test_kubeflow import crd_errors
from tests.support.helpers import log_lines, no_process_left_behind, run_job  # noqa: F401 (autouse fixture)
from tests.support.kubelet import main_container, pod_templates
from tests.support.manifest_schemas import assert_valid

CORPUS = Path(__file__).resolve().parent / "corpus_mpi"
FILES = sorted(p.name for p in CORPUS.glob("*.yaml"))
KUBETRAIN_SSHD = ["/usr/sbin/sshd", "-De", "-f", "/etc/kubetrain/sshd_config"]


def source(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((CORPUS / name).read_text(encoding="utf-8"))
    return doc


def worker_spec(doc: dict[str, Any]) -> dict[str, Any]:
    """The source's worker pod template (MPIJob's Worker, or the mpi plugin's worker task)."""
    if doc["kind"] == "MPIJob":
        template: dict[str, Any] = doc["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
        return template
    worker_task = next(arg.split("=")[1] for arg in doc["spec"]["plugins"]["mpi"] if arg.startswith("--worker="))
    task: dict[str, Any] = next(t for t in doc["spec"]["tasks"] if t["name"] == worker_task)
    return dict(task["template"])


def own_program(doc: dict[str, Any]) -> list[str] | None:
    container = worker_spec(doc)["spec"]["containers"][0]
    if "command" not in container:
        return None
    return [*container["command"], *container.get("args", [])]


def ssh_folder(doc: dict[str, Any]) -> str:
    """Where the source's controller puts the keys."""
    if doc["kind"] == "MPIJob":
        return str(doc["spec"].get("sshAuthMountPath", "/root/.ssh"))
    for arg in doc["spec"]["plugins"].get("ssh", []):
        if arg.startswith("--ssh-key-file-path="):
            return str(arg.split("=", 1)[1])
    return "/root/.ssh"


def convert(name: str) -> TrainJob:
    job, conversion = load_job_file(CORPUS / name)
    assert conversion is not None and conversion.refused() == [], conversion.warnings() if conversion else None
    return job


@pytest.mark.parametrize("name", FILES)
def test_the_file_is_what_its_controller_accepts(name: str) -> None:
    assert crd_errors(source(name)) == []


@pytest.mark.parametrize("name", FILES)
def test_the_workers_keep_their_own_program(name: str) -> None:
    doc = source(name)
    job = convert(name)
    worker = job.spec.role_settings("worker").run
    assert (worker.exec if worker is not None else None) == own_program(doc)
    launcher = job.spec.run
    assert launcher is not None and launcher.python is not None and launcher.python[0] == "ring.py"


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("name", FILES)
def test_every_flavor_renders_what_the_controller_would_run(name: str, flavor: str) -> None:
    doc = source(name)
    job = convert(name)
    try:
        objects = render_manifests(job, flavor).objects
    except SpecError as exc:
        # A Volcano job's gang (minAvailable): the job flavor has none, jobset's is Kueue's (manifests/policy.py).
        assert doc["kind"] == "Job" and exc.paths == ["spec.scheduling.minAvailable"], exc
        assert flavor in ("job", "jobset")
        return
    assert_valid(objects)
    templates = pod_templates(objects)
    worker, launcher = main_container(templates["worker"]), main_container(templates["launcher"])
    own = own_program(doc)
    v2 = doc["apiVersion"] == "kubeflow.org/v2beta1"
    if own is not None:
        assert worker["args"] == own
    elif flavor != "kubeflow":
        assert worker["args"] == KUBETRAIN_SSHD  # kubetrain's sshd, with the job's keys
    elif v2:
        assert worker["args"] == ["/usr/sbin/sshd", "-De"]  # what the MPI Operator starts
    else:
        assert "args" not in worker  # the training operator's launcher uses kubectl exec
    assert launcher["args"][0] == "mpirun"
    root = objects[0]
    if flavor == "kubeflow":
        assert root["apiVersion"] == ("kubeflow.org/v2beta1" if v2 else "kubeflow.org/v1")
        if v2:
            assert root["spec"]["sshAuthMountPath"] == ssh_folder(doc)
    if flavor == "volcano" and doc["kind"] == "Job":
        assert "svc" in root["spec"]["plugins"]
        assert root["spec"]["plugins"]["ssh"] == doc["spec"]["plugins"]["ssh"]  # kept, with its folder
    if own is not None and flavor in ("job", "jobset"):
        # The keys where the workers' sshd and the launcher's ssh look: the job's Secret, in both.
        for container in (worker, launcher):
            assert {"name": "kubetrain-ssh-auth", "mountPath": ssh_folder(doc), "readOnly": True} in container[
                "volumeMounts"]
        assert [o["kind"] for o in objects].count("Secret") == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", FILES)
def test_the_file_runs_here_with_the_world_its_controller_gives(name: str) -> None:
    """Locally mpirun starts every rank on this machine (the workers' sshd is for Kubernetes, not run here):
    one world of workers × slotsPerWorker ranks, every rank with the program's arguments."""
    if shutil.which("mpirun") is None:
        pytest.fail("mpirun is not installed: scripts/test.sh installs openmpi-bin")
    doc = source(name)
    job = convert(name)
    status = run_job(job, CORPUS)
    lines = log_lines(status.job_id)
    assert status.phase is JobPhase.SUCCEEDED, "\n".join([status.summary_line(), *lines["launcher-0"]])
    assert set(lines) == {"launcher-0"}  # the workers ran nothing
    ranks = [json.loads(line) for line in lines["launcher-0"] if line.startswith("{")]
    spec = doc["spec"]
    workers = worker_replicas(doc)
    size = workers * int(spec.get("slotsPerWorker", 1))
    assert sorted(r["rank"] for r in ranks) == list(range(size))
    assert {(r["size"], r["sum"]) for r in ranks} == {(size, size * (size - 1) // 2)}
    assert {r["job"] for r in ranks} == {status.job_id}
    program = job.spec.run.python if job.spec.run is not None and job.spec.run.python else []
    assert {tuple(r["argv"]) for r in ranks} == {tuple(program[1:])}


def worker_replicas(doc: dict[str, Any]) -> int:
    if doc["kind"] == "MPIJob":
        return int(doc["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"])
    worker_task = next(arg.split("=")[1] for arg in doc["spec"]["plugins"]["mpi"] if arg.startswith("--worker="))
    return int(next(t for t in doc["spec"]["tasks"] if t["name"] == worker_task)["replicas"])
