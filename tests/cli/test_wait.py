"""`kubetrain wait`, as `kubectl wait`: real jobs (local processes; the API emulator for Kubernetes), real
`kubetrain wait` processes, kubectl's exit statuses."""

# ruff: noqa: F811 - the emulated fixture is imported from tests.support.cluster and named as a parameter
from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.cli.commands.wait import duration
from tests.support.cluster import Cluster, emulated  # noqa: F401 - the fixture
from tests.support.helpers import cli, generic, make_job, open_gate, run_job, spawn_cli, start_gated_metrics, write


def finished(directory: Path, code: int) -> str:
    """A job that has ended: Succeeded (`code` 0) or Failed."""
    write(directory / f"exit{code}.py", f"raise SystemExit({code})\n")
    return run_job(make_job(generic([f"exit{code}.py"], replicas=1, runPolicy={"backoffLimit": 0})), directory).job_id


def test_wait_returns_once_the_job_meets_the_condition(tmp_path: Path) -> None:
    job_id, gate = start_gated_metrics(tmp_path, 0.5)
    running = cli("wait", job_id, "--for=condition=Running", "--timeout", "2m")
    assert (running.returncode, running.stdout) == (0, f"job/{job_id} condition met\n"), running.stderr
    # Started while the job cannot succeed (its replica waits on the gate): it is woken by the success.
    succeeded = spawn_cli("wait", job_id[:6], "--for", "condition=Complete", "--timeout=-1")
    open_gate(gate)
    out, err = succeeded.communicate(timeout=120)
    assert (succeeded.returncode, out, err) == (0, f"job/{job_id} condition met\n", "")


def test_a_job_that_ended_otherwise_is_reported_at_once_not_at_the_timeout(tmp_path: Path) -> None:
    failed = finished(tmp_path, 1)
    done = cli("wait", failed, "--for=condition=Succeeded", "--timeout=-1", timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: job/{failed} is Failed"), done.stderr
    assert "it will never meet condition=Succeeded" in done.stderr
    assert cli("wait", failed, "--for=condition=Failed").returncode == 0
    assert cli("wait", failed, "--for=condition=Succeeded=false").returncode == 0
    assert cli("wait", failed, "--for=phase=Failed").returncode == 0


def test_several_jobs_each_said_and_one_unmet_fails_the_command(tmp_path: Path) -> None:
    good, bad = finished(tmp_path, 0), finished(tmp_path, 3)
    done = cli("wait", good, bad, "--for=phase=Succeeded")
    assert done.returncode == 1
    assert done.stdout == f"job/{good} condition met\n"
    assert f"error: job/{bad} is Failed" in done.stderr
    both = cli("wait", good, good[:6], "--for=condition=Succeeded")  # the same job twice: once
    assert (both.returncode, both.stdout) == (0, f"job/{good} condition met\n")


def test_the_timeout_ends_the_wait_with_status_1(tmp_path: Path) -> None:
    job_id, gate = start_gated_metrics(tmp_path, 0.5)
    try:
        for timeout in ("0", "1s"):  # 0: one check, as kubectl
            done = cli("wait", job_id, "--for=condition=Succeeded", "--timeout", timeout)
            assert done.returncode == 1
            assert done.stderr == f"error: timed out waiting for the condition on job/{job_id} (condition=Succeeded)\n"
    finally:
        open_gate(gate)
        cli("wait", job_id, "--for=condition=Succeeded", "--timeout=-1")


def test_wait_for_delete(tmp_path: Path) -> None:
    job_id = finished(tmp_path, 0)
    waiting = spawn_cli("wait", job_id, "--for=delete", "--timeout=-1")
    assert cli("delete", job_id).returncode == 0
    out, _ = waiting.communicate(timeout=60)
    assert (waiting.returncode, out) == (0, f"job/{job_id} deleted\n")
    assert cli("wait", job_id, "--for=delete").returncode == 0  # gone already: met


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--for=condition"], "give condition=NAME[=false]"),
        (["--for=phase=Done"], "a job's phase is one of Pending, Running"),
        (["--for=condition=Succeeded=maybe"], "the condition's value is true or false"),
        (["--for=delete", "--timeout", "ten"], "'ten' is not a duration"),
    ],
)
def test_bad_input_is_a_usage_error(argv: list[str], said: str) -> None:
    done = cli("wait", "some-job", *argv)
    assert done.returncode == 2
    assert said in done.stderr and "Traceback" not in done.stderr


def test_an_unknown_job_is_an_error() -> None:
    done = cli("wait", "nosuchjob", "--for=condition=Succeeded")
    assert done.returncode == 1
    assert done.stderr.startswith("error: no job matches 'nosuchjob'"), done.stderr


def test_durations_read_as_kubectl_writes_them() -> None:
    assert [duration(t) for t in ("0", "30s", "10m", "1h30m", "500ms", "-1", "2.5")] == [
        0, 30, 600, 5400, 0.5, -1, 2.5
    ]


JOB = """\
apiVersion: kubetrain.dev/v1alpha1
kind: TrainJob
metadata: {name: demo, namespace: default}
spec:
  framework: pytorch
  image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
  run: {python: [train.py]}
  replicas: 2
"""


def test_wait_on_kubernetes_is_woken_by_the_watch(emulated: Cluster, tmp_path: Path) -> None:
    """A pod's change on the cluster wakes the wait (the backend's watch); the job's success ends it."""
    assert emulated.emu is not None
    k8s = ["--backend", "k8s", "--kubeconfig", str(emulated.kubeconfig)]
    write(tmp_path / "job.yaml", JOB)
    assert cli("run", tmp_path / "job.yaml", "--detach", "--flavor", "job", *k8s).returncode == 0
    pods = emulated.controllers.create_pods("job", "demo")  # type: ignore[union-attr]
    running = spawn_cli("wait", "demo", "--for=condition=Running", "--timeout=-1", *k8s)
    succeeded = spawn_cli("wait", "demo", "--for=condition=Succeeded", "--timeout=-1", *k8s)
    for pod in pods.values():
        emulated.kubelet(pod, "Running")
    out, err = running.communicate(timeout=120)
    assert (running.returncode, out) == (0, "job/demo condition met\n"), err
    for pod in pods.values():
        emulated.kubelet(pod, "Succeeded", exit_code=0)
    emulated.conclude("job", "demo", "Succeeded")
    out, err = succeeded.communicate(timeout=120)
    assert (succeeded.returncode, out) == (0, "job/demo condition met\n"), err
    gone = cli("wait", "nothere", "--for=condition=Running", *k8s)
    assert gone.returncode == 1 and "Traceback" not in gone.stderr
