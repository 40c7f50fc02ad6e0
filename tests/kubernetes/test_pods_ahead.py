"""`status` and `describe` list a rendered job's pods (by its job label) while they look its workload up, and find
a document submitted as written's pods (its controller's labels) once its root is known, as before; `list` lists
kubetrain's pods while it lists the workloads."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kube_emulator import KubeEmulator
from kube_emulator.controllers import Controllers

from kubetrain.backends.kubernetes.capabilities import detect
from kubetrain.backends.kubernetes.client.config import connect
from kubetrain.backends.kubernetes.client.kube import Kube
from kubetrain.backends.kubernetes.client.resources import PODS, Resource
from kubetrain.backends.kubernetes.lookup import list_jobs, locate_with_pods
from kubetrain.cli.main import main
from kubetrain.contract.errors import JobNotFound
from kubetrain.contract.labels import JOB_LABEL, ROLE_LABEL
from tests.support.cluster import FAST_RETRY

JOB = """\
apiVersion: kubetrain.dev/v1alpha1
kind: TrainJob
metadata: {name: ahead, namespace: default}
spec:
  framework: pytorch
  image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
  run: {python: [train.py]}
  replicas: 3
"""


def pod_lists(emu: KubeEmulator) -> int:
    return sum(1 for r in emu.requests if r.method == "GET" and r.path.endswith("/pods"))


class LookingKube(Kube):
    """Holds the first list of a workload kind until a new pods list has reached the server (waited for, at most
    30 s), and says whether one had."""

    def __init__(self, emu: KubeEmulator, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.emu = emu
        self.before = pod_lists(emu)
        self.pods_seen_first: list[bool] = []

    def list(self, res: Resource, namespace: str | None, **kwargs: Any) -> Any:
        if res != PODS and not self.pods_seen_first:
            deadline = time.monotonic() + 30
            while pod_lists(self.emu) == self.before and time.monotonic() < deadline:
                time.sleep(0.01)
            self.pods_seen_first.append(pod_lists(self.emu) > self.before)
        return super().list(res, namespace, **kwargs)


@pytest.fixture
def submitted(kube_emulator: KubeEmulator, kube_config_file: Path, tmp_path: Path,
              capsys: pytest.CaptureFixture[str]) -> Kube:
    (tmp_path / "job.yaml").write_text(JOB)
    assert main(["run", str(tmp_path / "job.yaml"), "--detach", "--flavor", "job", "--backend", "k8s",
                 "--kubeconfig", str(kube_config_file)]) == 0
    capsys.readouterr()
    Controllers(kube_emulator, "default", job_label=JOB_LABEL, role_label=ROLE_LABEL).create_pods("job", "ahead")
    return Kube(connect(kube_config_file).api_client, FAST_RETRY)


def test_a_rendered_jobs_pods_are_listed_while_its_workload_is_looked_up(
        submitted: Kube, kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    kube = LookingKube(kube_emulator, connect(kube_config_file).api_client, FAST_RETRY)
    loc, pods = locate_with_pods(kube, detect(kube), "ahead", "default")
    assert kube.pods_seen_first == [True]
    assert loc.name == "ahead" and loc.flavor.name == "job"
    assert sorted(p["metadata"]["labels"][JOB_LABEL] for p in pods) == ["ahead"] * 3
    assert pod_lists(kube_emulator) == kube.before + 1  # listed once, not again after the lookup


def test_list_lists_the_pods_while_it_lists_the_workloads(
        submitted: Kube, kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    kube = LookingKube(kube_emulator, connect(kube_config_file).api_client, FAST_RETRY)
    [job] = list_jobs(kube, detect(kube), "default")
    assert kube.pods_seen_first == [True]
    assert job.job_id == "ahead" and len(job.replicas) == 3
    assert pod_lists(kube_emulator) == kube.before + 1


def test_status_and_describe_show_the_pods_listed_ahead(
        submitted: Kube, kube_config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    k8s = ["--backend", "k8s", "--kubeconfig", str(kube_config_file)]
    for verb in ("status", "describe"):
        assert main([verb, "ahead", "-o", "wide", *k8s] if verb == "status" else [verb, "ahead", *k8s]) == 0
        out = capsys.readouterr().out
        assert all(f"worker-{i}" in out for i in range(3)), out


def test_a_job_not_found_is_still_the_error_it_was(kube_emulator: KubeEmulator, kube_config_file: Path) -> None:
    kube = Kube(connect(kube_config_file).api_client, FAST_RETRY)
    with pytest.raises(JobNotFound, match="no kubetrain job nope"):
        locate_with_pods(kube, detect(kube), "nope", "default")
