"""The live status line of an attached `kubetrain run`: under the merged output on a terminal, never inside a
line of it, gone from CI logs; and the state machine behind it."""

# ruff: noqa: F811 - pytest fixtures are imported from tests.support.cluster and named as parameters

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from kubetrain.backends.base import RunEvent
from kubetrain.metrics.sample import MetricSample
from kubetrain.progress import Progress, format_elapsed
from kubetrain.status import JobPhase, JobStatus, ReplicaPhase, ReplicaStatus
from tests.metrics.terminal_session import TerminalSession
from tests.support.cluster import Cluster, emulated, job_doc  # noqa: F401
from tests.support.helpers import CLI, cli, document, write

GATED = """\
import os, kubetrain.metrics as m
rank = int(os.environ["RANK"])
for step in range(3):
    print(f"rank {rank} step {step}", flush=True)
    m.log(step=step, loss=1.0 / (step + 1), samples_per_s=100.0 + step)
with open(os.environ["GATE"]) as gate:  # blocks until the test opens the pipe for writing
    gate.read()
print(f"rank {rank} done", flush=True)
"""
STATUS = re.compile(r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] \w+ · ")


def test_on_a_terminal_a_live_line_follows_a_two_replica_job_and_leaves_every_line_intact(tmp_path: Path) -> None:
    write(tmp_path / "train.py", GATED)
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    session = TerminalSession(
        [*CLI, "run", "--framework", "pytorch", "--replicas", "2", "--", "python", "train.py"],
        env={"GATE": str(gate)},
        cwd=str(tmp_path),
    )
    # The line shows both replicas running and the metrics they logged, while they wait at the gate.
    session.expect(r"Running · 2/2 running · \d:\d\d · step 2 loss 0\.3333 samples_per_s 102")
    with open(gate, "w") as f:
        f.write("go")
    assert session.finish() == 0
    raw = session.raw
    # Redrawn in place: erased (CR, clear line) before each burst of output, drawn again after it.
    drawn = [m.start() for m in STATUS.finditer(raw)]
    assert len(drawn) >= 2
    for start in drawn:  # every drawing is erased before the next line ends: it never becomes part of one
        end = raw.find("\n", start)
        assert "\r\x1b[K" in raw[start : end if end != -1 else None], raw[start : start + 200]
    screen = session.screen.text()
    lines = [line for line in screen if line]
    expected = {f"[worker-{r}] rank {r} step {s}" for r in (0, 1) for s in range(3)}
    expected |= {"[worker-0] rank 0 done", "[worker-1] rank 1 done"}
    assert expected <= set(lines), screen
    assert not any(STATUS.search(line) for line in screen), screen  # erased at the end, in no output line
    assert re.fullmatch(r"job \S+ succeeded in [\d.]+s", lines[-1])
    assert not any("@kubetrain:metrics" in line for line in screen)


def test_without_a_terminal_there_is_no_status_line(tmp_path: Path) -> None:
    write(tmp_path / "train.py", "import kubetrain.metrics as m\nm.log(step=1, loss=0.5)\nprint('trained')\n")
    done = cli("run", "--framework", "pytorch", "--replicas", "2", "--", "python", "train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == ["[worker-0] trained", "[worker-1] trained"]
    assert "\r" not in done.stdout + done.stderr and "\x1b" not in done.stdout + done.stderr
    assert not STATUS.search(done.stderr)


def test_metric_lines_in_a_replicas_output_are_not_shown_by_run(tmp_path: Path) -> None:
    """As on Kubernetes, where metrics travel in the container log: the run's output stays the program's."""
    write(
        tmp_path / "train.py",
        "import kubetrain.metrics as m\nprint('before')\nm.log(step=1, loss=0.5)\nprint('after')\n",
    )
    # No metrics file (the local backend gives each process one): the replica prints a marked line instead.
    env = [{"name": "KUBETRAIN_METRICS", "value": "stdout"}, {"name": "KUBETRAIN_METRICS_FILE", "value": ""}]
    spec = {"framework": "generic", "replicas": 1, "run": {"python": ["train.py"]}, "env": env}
    write(tmp_path / "job.yaml", json.dumps(document(spec, "marked")))
    done = cli("run", "job.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[worker-0] before", "[worker-0] after"]
    job_id = re.search(r"job (\S+): 1 process \(worker×1\)", done.stderr)  # singular: not "1 processes"
    assert job_id is not None, done.stderr
    marked = cli("logs", job_id.group(1), "--grep", "^@kubetrain:metrics ")
    assert marked.returncode == 0 and '"loss":0.5' in marked.stdout, marked.stdout + marked.stderr


def replica(index: int, phase: ReplicaPhase, reason: str | None = None, restarts: int = 0) -> ReplicaStatus:
    return ReplicaStatus("worker", index, phase, reason=reason, restarts=restarts)


def test_the_line_says_what_is_running_what_waits_and_the_latest_metrics() -> None:
    p = Progress(started=100.0)
    p.event(RunEvent("warning", "created job fake-id would be text, not an event"))
    assert p.job_id is None and not p.job_known.is_set()  # message text is never read
    p.event(RunEvent("created", "the wording may change", job_id="train-ab12"))
    assert p.job_id == "train-ab12" and p.job_known.is_set()
    p.keys(["worker-0", "worker-1", "worker-2"])
    assert re.fullmatch(r". Pending · \?/3 running · 0:05", p.line(now=105.0))
    unplaced = JobStatus(
        "train-ab12",
        "train",
        backend="kubernetes",
        replicas=[replica(i, ReplicaPhase.PENDING) for i in range(3)],
        placed_by_scheduler=True,
    )
    p.event(RunEvent("status", "", "train-ab12", unplaced))
    assert p.line(now=106.0)[2:] == "Pending · 0/3 running · 3 scheduling · 0:06"
    waiting = JobStatus(
        "train-ab12",
        "train",
        backend="kubernetes",
        phase=JobPhase.PENDING,
        replicas=[
            replica(0, ReplicaPhase.RUNNING),
            replica(1, ReplicaPhase.PENDING, "ContainerCreating"),
            replica(2, ReplicaPhase.PENDING, "ImagePullBackOff"),
        ],
    )
    p.event(RunEvent("status", waiting.summary_line(), "train-ab12", waiting))
    assert p.line(now=172.0)[2:] == "Pending · 1/3 running · 1 pulling image (back-off), 1 starting · 1:12"
    p.status(
        JobStatus(
            "train-ab12",
            "train",
            phase=JobPhase.RUNNING,
            replicas=[replica(i, ReplicaPhase.RUNNING, restarts=1 if i == 2 else 0) for i in range(3)],
        )
    )
    for rank, loss in ((1, 9.0), (0, 0.5), (1, 8.0)):
        p.sample(MetricSample("loss", loss, 40 + rank, 0.0, "worker", rank, rank))
    p.sample(MetricSample("samples_per_s", 812.04, 41, 0.0, "worker", 0, 0))
    assert p.line(now=3700.0)[2:] == "Running · 3/3 running · restarts 1 · 1:00:00 · step 41 loss 0.5 samples_per_s 812"
    short = p.line(width=30, now=3700.0)
    assert len(short) == 30 and short.endswith("…")


def test_after_a_restart_the_line_shows_the_step_of_the_values_it_shows() -> None:
    p = Progress(started=0.0)
    for step in range(120, 125):
        p.sample(MetricSample("loss", 1.0 / step, step, float(step), "worker", 0, 0))
    assert p.line(now=1.0).endswith("step 124 loss 0.008065")
    p.sample(MetricSample("loss", 2.5, 0, 200.0, "worker", 0, 0))  # the replica restarted: its steps start over
    assert p.line(now=2.0).endswith("step 0 loss 2.5")
    for name in ("acc", "lr", "not_shown"):
        p.sample(MetricSample(name, 0.5, 1, 201.0, "worker", 0, 0))
    p.sample(MetricSample("not_shown", 0.25, 90, 202.0, "worker", 0, 0))  # beyond MAX_METRICS: not its step
    assert p.line(now=3.0).endswith("step 1 loss 2.5 acc 0.5 lr 0.5")


def test_odd_metric_names_stay_on_the_one_line() -> None:
    p = Progress(started=0.0)
    p.sample(MetricSample("a\nb\x1b[2J" + "x" * 100, 1.0, 3, 0.0))
    line = p.line(width=200, now=1.0)
    assert "\n" not in line and "\x1b" not in line
    assert line.endswith("step 3 a\\x0ab\\x1b[2J" + "x" * 10 + "… 1")  # the name cut to 24 characters


def test_a_local_back_off_shows_on_the_line_and_elapsed_time_reads_as_a_clock() -> None:
    p = Progress()
    backing_off = JobStatus(
        "x7k2p", "metrics", phase=JobPhase.RUNNING, reason="BackOff", backoff_count=1,
        replicas=[replica(0, ReplicaPhase.FAILED), replica(1, ReplicaPhase.FAILED)],
    )  # fmt: skip
    p.event(RunEvent("status", backing_off.summary_line(), "x7k2p", backing_off))
    assert re.fullmatch(r". BackOff · 0/2 running · restarts 1 · \d:\d\d", p.line())
    assert [format_elapsed(s) for s in (7, 754, 3723)] == ["0:07", "12:34", "1:02:03"]


def test_the_cli_imports_no_backend_for_the_status_line() -> None:
    code = "import sys, kubetrain.progress; print([m for m in ('kubetrain.backends', 'pydantic') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_on_a_cluster_the_line_shows_pods_scheduled_pulling_and_starting_from_the_runs_watch(
    emulated: Cluster, tmp_path: Path
) -> None:
    emu, controllers = emulated.emu, emulated.controllers
    assert emu is not None and controllers is not None
    job_file = write(tmp_path / "job.yaml", json.dumps(job_doc("progress")))
    session = TerminalSession(
        [*CLI, "run", str(job_file), "--backend", "kubernetes", "--kubeconfig", str(emulated.kubeconfig),
         "--namespace", "default", "--flavor", "job"],
        cwd=str(tmp_path),
    )  # fmt: skip
    session.expect(r"kubetrain: created job progress \(job flavor\)")
    pods = controllers.create_pods("job", "progress")
    session.expect(r"Pending · 0/2 running · 2 scheduling · ")  # created, no node yet
    emu.set_pod_phase("default", pods["worker-0"], "Pending", reason="ContainerCreating")
    emu.set_pod_phase("default", pods["worker-1"], "Pending", reason="ErrImagePull", message="pull access denied")
    session.expect(r"Pending · 0/2 running · 1 pulling image \(failing\), 1 starting · ")
    emu.set_pod_phase("default", pods["worker-1"], "Pending", reason="ContainerCreating")
    emu.set_pod_phase("default", pods["worker-0"], "Running")
    emu.set_pod_phase("default", pods["worker-1"], "Running")
    session.expect(r"Running · 2/2 running · ")
    for replica, pod in pods.items():
        emu.append_log("default", pod, f"training on {replica}\n")
        emu.set_pod_phase("default", pod, "Succeeded", exit_code=0)
    controllers.conclude("job", "progress", "Succeeded")
    assert session.finish() == 0
    lines = [line for line in session.screen.text() if line]
    assert {"[worker-0] training on worker-0", "[worker-1] training on worker-1"} <= set(lines), lines
    assert not any(STATUS.search(line) for line in lines), lines  # erased at the end, in no output line
    assert re.fullmatch(r"job progress succeeded in [\d.]+s", lines[-1])
    # What the line showed came from the run's own watch: the pods were listed once, to start it, never polled.
    pod_lists = [r for r in emu.requests if r.path.endswith("/pods") and r.query.get("watch") != "true"]
    assert len(pod_lists) == 1, [(r.method, r.path, r.query) for r in emu.requests]
