"""A Ctrl-C or SIGTERM at any moment of `kubetrain run`'s start-up: exit 130 or 143, no traceback, the job (if
it was recorded yet) ended Cancelled, and no process of it left running.

The moments are reached deterministically: `KUBETRAIN_TEST_PAUSE_AT=POINT` stops the command at that named
point of start-up, which it says on stderr; only then is the signal sent (`contract.pause`)."""

# ruff: noqa: F811 - the emulated fixture is imported from tests.support.cluster and named as a parameter

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from kubetrain.contract.env_names import PAUSE_AT
from tests.support.cluster import Cluster, emulated  # noqa: F401 - the fixture
from tests.support.helpers import (
    CLI,
    cli,
    generic,
    job_file,
    make_job,
    processes_of,
    run_job,
    supervisor_pid,
    wait_for,
    write,
)

POINTS = [
    "cli:start",  # the CLI's first line: nothing parsed, nothing recorded
    "local:recording",  # the job's row written, its launch record not yet
    "local:created",  # the job recorded Pending, no supervisor yet
    "local:supervising",  # the supervisor's handlers in place, nothing launched
    "local:launched",  # the replicas' processes started
]


def paused_run(directory: Path, point: str, *args: str) -> subprocess.Popen[str]:
    """`kubetrain run` of a two-replica job that would sleep for ten minutes, stopped at `point`."""
    write(directory / "sleep.py", "import time\ntime.sleep(600)\n")
    path = job_file(directory, generic(["sleep.py"]))
    return paused(["run", str(path), *args], point)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("point", POINTS)
def test_a_signal_at_any_point_of_start_up_ends_the_run_cleanly(
    tmp_path: Path, kubetrain_home: Path, point: str, signum: signal.Signals
) -> None:
    proc = paused_run(tmp_path, point)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum, (proc.returncode, err)
    assert "Traceback" not in err + out, err
    jobs = json.loads(cli("list", "-o", "json").stdout)["items"]
    if point == "cli:start":
        assert jobs == []
    else:
        (job,) = jobs
        assert job["phase"] == "Cancelled", job
    # The replicas (and their watchdogs) are stopped before the command returns; given time to finish exiting.
    wait_for("no process of the job left", lambda: not processes_of(kubetrain_home), timeout=30)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_before_run_detach_says_the_id_cancels_the_job_it_started(
    tmp_path: Path, kubetrain_home: Path, signum: signal.Signals
) -> None:
    """The detached supervisor is started, the id not printed yet: the user, who never saw the id, gets no job
    running behind their back."""
    proc = paused_run(tmp_path, "local:detached", "--detach")
    (created,) = json.loads(cli("list", "-o", "json").stdout)["items"]
    # Its supervisor has taken the job over (before that, the job is ended as one never started).
    wait_for("the detached supervisor", lambda: supervisor_pid(created["jobId"]), timeout=60)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum, (proc.returncode, err)
    assert "Traceback" not in err + out, err
    (job,) = json.loads(cli("list", "-o", "json").stdout)["items"]
    assert job["phase"] == "Cancelled", job
    wait_for("no process of the job left", lambda: not processes_of(kubetrain_home), timeout=30)


def paused(argv: list[str], point: str) -> subprocess.Popen[str]:
    """`kubetrain ARGV` stopped at `point` (it says so on stderr)."""
    proc = subprocess.Popen(
        [*CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, PAUSE_AT: point}
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith(f"kubetrain: paused at {point} "):
            return proc
    proc.wait()
    raise AssertionError(f"never paused at {point}: exit {proc.returncode}\n{''.join(seen)}")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_as_the_web_view_starts_ends_it_with_the_signals_status(signum: signal.Signals) -> None:
    """Announced, not yet serving: uvicorn's and asyncio's handlers are not in place; the CLI's are."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = paused(["ui", "--port", str(port)], "ui:serving")
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, (proc.returncode, err)
    assert out.startswith("kubetrain ui: serving local jobs at"), out
    assert "Traceback" not in err and "CancelledError" not in err, err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_as_metrics_watch_starts_shows_the_table_and_the_signals_status(
    tmp_path: Path, signum: signal.Signals
) -> None:
    write(tmp_path / "train.py", "import kubetrain.metrics as m\nm.log(step=0, loss=0.5)\n")
    status = run_job(make_job(generic(["train.py"], replicas=1)), tmp_path)
    proc = paused(["metrics", status.job_id, "--watch"], "metrics:watch")
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, (proc.returncode, err)
    assert "Traceback" not in err, err
    # What it had read when the signal came, shown once: the table, or (its reader not yet there) none.
    # (Not on a terminal, a table is followed by a blank line.)
    assert out == "no metrics\n\n" or out.splitlines()[0].split()[:2] == ["METRIC", "LATEST"], out


K8S_JOB = """\
apiVersion: kubetrain.dev/v1alpha1
kind: TrainJob
metadata: {name: demo}
spec:
  framework: pytorch
  image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
  run: {python: [train.py]}
  replicas: 2
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_between_the_submit_and_the_follow_leaves_no_job_on_the_cluster(
    emulated: Cluster, tmp_path: Path, signum: signal.Signals
) -> None:
    """The job is created, the follow (which cancels on Ctrl-C) not yet started: the job is cancelled still."""
    assert emulated.emu is not None
    write(tmp_path / "train.py", "pass\n")
    write(tmp_path / "job.yaml", K8S_JOB)
    argv = ["run", str(tmp_path / "job.yaml"), "--backend", "k8s", "--kubeconfig", str(emulated.kubeconfig)]
    proc = paused([*argv, "--flavor", "job"], "kubernetes:submitted")
    assert [j["metadata"]["name"] for j in emulated.emu.objects("jobs")] == ["demo-worker"]  # created
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum, (proc.returncode, err)
    assert "Traceback" not in err + out, err
    assert emulated.emu.objects("jobs") == [] and emulated.emu.objects("services") == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_following_on_kubernetes_cancels_the_job_with_the_signals_status(
    emulated: Cluster, tmp_path: Path, signum: signal.Signals
) -> None:
    """The follow catches the interruption and cancels the job; the exit status still says which signal."""
    assert emulated.emu is not None
    write(tmp_path / "train.py", "pass\n")
    write(tmp_path / "job.yaml", K8S_JOB)
    argv = ["run", str(tmp_path / "job.yaml"), "--backend", "k8s", "--kubeconfig", str(emulated.kubeconfig)]
    proc = paused([*argv, "--flavor", "job"], "kubernetes:following")
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum, (proc.returncode, err)
    assert "interrupted: cancelling job demo" in err and "Traceback" not in err + out, err
    assert emulated.emu.objects("jobs") == [] and emulated.emu.objects("services") == []
