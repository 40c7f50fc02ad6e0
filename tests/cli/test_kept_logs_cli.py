"""`kubetrain run --detach --keep-logs` on Kubernetes: a follower of its own keeps the job's logs on this machine,
and `kubetrain logs` reads them once the pods are gone, saying so on stderr. Against the API emulator, with the
follower a real process."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kubetrain.cli.main import main
from tests.support.cluster import controllers

if TYPE_CHECKING:
    from kube_emulator import KubeEmulator

pytestmark = pytest.mark.timeout(120)

JOB = """\
apiVersion: kubetrain.dev/v1alpha1
kind: TrainJob
metadata: {name: keeper, namespace: default}
spec:
  framework: pytorch
  image: busybox:1.36
  run: {exec: [sh, -c, "echo hi"]}
  replicas: 2
"""


def k8s(kube_config_file: Path, *argv: str) -> list[str]:
    return [*argv, "--backend", "k8s", "--kubeconfig", str(kube_config_file)]


def _reaped(pid: int, timeout: float = 60.0) -> int:
    """The follower's exit status, once it has ended (it is this process's child)."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        assert time.monotonic() < deadline, "the follower did not end with the job"
        time.sleep(0.05)


def test_a_detached_run_keeps_its_logs_for_when_the_pods_are_gone(
    kube_emulator: KubeEmulator, kube_config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job_file = tmp_path / "job.yaml"
    job_file.write_text(JOB)
    assert main(k8s(kube_config_file, "run", str(job_file), "--detach", "--keep-logs", "--flavor", "job")) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "keeper"
    found = re.search(r"keeping job keeper's logs on this machine until it ends: follower pid (\d+)", err)
    assert found, err
    pid = int(found.group(1))
    assert "kubetrain logs keeper --backend kubernetes --kubeconfig" in err

    c = controllers(kube_emulator, "default")
    pods = c.create_pods("job", "keeper")
    for replica, pod in pods.items():
        kube_emulator.set_pod_phase("default", pod, "Running")
        kube_emulator.append_log("default", pod, f"{replica}: loss 0.5\n{replica}: done\n")
    for pod in pods.values():
        kube_emulator.set_pod_phase("default", pod, "Succeeded", exit_code=0)
    c.conclude("job", "keeper", "Succeeded")
    assert _reaped(pid) == 0

    for pod in pods.values():
        kube_emulator.delete("pods", pod, "default")
    assert main(k8s(kube_config_file, "logs", "keeper", "--timestamps")) == 0
    out, err = capsys.readouterr()
    lines = [line.split(" ", 2)[::2] for line in out.splitlines()]  # [prefix, text], the time in between
    assert sorted(lines) == sorted([f"[{r}]", f"{r}: {what}"] for r in ("worker-0", "worker-1")
                                   for what in ("loss 0.5", "done"))
    assert err.startswith("kubetrain: job keeper has no pods left: reading the logs this machine kept of it, "
                          "saved by kubetrain logs -f from ")
    assert main(k8s(kube_config_file, "logs", "keeper", "--role", "worker", "--index", "1", "--grep", "done")) == 0
    assert capsys.readouterr().out == "[worker-1] worker-1: done\n"
    assert main(k8s(kube_config_file, "logs", "keeper", "--stream", "stderr")) == 2
    assert "leave --stream out" in capsys.readouterr().err


def test_keep_logs_has_nothing_to_start_where_logs_outlive_the_replicas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--detach", "--keep-logs", "--framework", "generic", "--name", "kept-here", "--",
                 "true"]) == 0
    out, err = capsys.readouterr()
    assert "this backend keeps job " in err and "nothing to start" in err
    job_id = out.strip()
    assert job_id
    assert main(["wait", job_id, "--for=condition=Succeeded", "--timeout", "60s"]) == 0


def test_help_states_the_cap_on_kept_logs(capsys: pytest.CaptureFixture[str]) -> None:
    from kubetrain.backends.logfiles.kept import DEFAULT_MAX_BYTES

    for verb in ("logs", "run"):
        with pytest.raises(SystemExit):
            main([verb, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert f"at most {DEFAULT_MAX_BYTES // 2**20} MiB per job" in text, verb
        assert "KUBETRAIN_KEPT_LOGS_MAX_SIZE" in text, verb
