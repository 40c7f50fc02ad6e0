"""The CLI's job verbs on the Kubernetes backend, against the API emulator: same verbs, same output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubetrain.cli.main import main

JOB = """\
apiVersion: kubetrain.dev/v1alpha1
kind: TrainJob
metadata: {name: demo, namespace: default}
spec:
  framework: pytorch
  image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
  run: {python: [train.py, --steps, "20"]}
  replicas: 2
"""


@pytest.fixture
def job_file(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    return path


def k8s(kube_config_file: Path, *argv: str) -> list[str]:
    return [*argv, "--backend", "k8s", "--kubeconfig", str(kube_config_file)]


def test_detached_run_creates_the_job_and_status_list_describe_see_it(
    kube_emulator: object, kube_config_file: Path, job_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(k8s(kube_config_file, "run", str(job_file), "--detach", "--flavor", "job")) == 0
    assert capsys.readouterr().out.strip() == "demo"
    assert main(k8s(kube_config_file, "list")) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split()[:2] == ["NAME", "PHASE"]
    assert "demo" in table
    assert main(k8s(kube_config_file, "status", "demo", "-o", "json")) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["name"] == "demo"
    assert status["phase"] in ("Pending", "Running")
    assert main(k8s(kube_config_file, "describe", "demo")) == 0
    assert "demo" in capsys.readouterr().out


def test_cancel_removes_the_job_and_its_objects(
    kube_emulator: object, kube_config_file: Path, job_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(k8s(kube_config_file, "run", str(job_file), "--detach", "--flavor", "job")) == 0
    capsys.readouterr()
    assert main(k8s(kube_config_file, "cancel", "demo")) == 0
    assert "demo" in capsys.readouterr().out
    assert main(k8s(kube_config_file, "list", "-o", "json")) == 0
    assert json.loads(capsys.readouterr().out)["items"] == []


def test_server_dry_run_creates_nothing(
    kube_emulator: object, kube_config_file: Path, job_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(k8s(kube_config_file, "run", str(job_file), "--dry-run=server", "--flavor", "jobset")) == 0
    capsys.readouterr()
    assert main(k8s(kube_config_file, "list", "-o", "json")) == 0
    assert json.loads(capsys.readouterr().out)["items"] == []


def test_unknown_job_is_an_error_without_traceback(
    kube_emulator: object, kube_config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(k8s(kube_config_file, "status", "nope")) != 0
    err = capsys.readouterr().err
    assert err.startswith("error:") and "nope" in err and "Traceback" not in err


def test_missing_kubeconfig_is_a_usage_error(
    tmp_path: Path, job_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(job_file), "--backend", "kubernetes", "--kubeconfig", str(tmp_path / "none")]) == 2
    assert "kubeconfig" in capsys.readouterr().err


def test_bare_dry_run_still_takes_the_job_file(job_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--dry-run", str(job_file), "-o", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [r["role"] for r in plan["replicas"]] == ["worker", "worker"]
