"""`Backend.metrics` on both backends: what real replicas logged, read back per rank, followed to the job's end."""

# ruff: noqa: F811 - pytest fixtures are imported from tests.support.cluster and named as parameters

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.backends.local.backend import LocalBackend
from kubetrain.metrics import MARKER
from kubetrain.metrics.sample import MetricSample
from kubetrain.status import JobPhase
from tests.support.cluster import Cluster, emulated  # noqa: F401
from tests.support.helpers import create_job, make_job, open_gate, run_job, start_gated_metrics, wait_phase, write
from tests.support.kubelet import expand, kubelet_env, main_container, pod_templates

TRAIN = """\
import os, kubetrain.metrics as m
rank = int(os.environ["RANK"])
for step in range(3):
    m.log(step=step, loss=1.0 / (step + 1) + rank, samples_per_s=100.0 * (rank + 1))
print("trained", rank)
"""


def pytorch(script: str = "train.py", **spec: object) -> dict[str, object]:
    # The pytorch contract (RANK, WORLD_SIZE, ...) without importing torch: the script only logs.
    return {"framework": "pytorch", "replicas": 2, "run": {"python": [script]}, **spec}


def test_a_local_job_s_metrics_come_back_per_rank_from_its_folder(tmp_path: Path) -> None:
    write(tmp_path / "train.py", TRAIN)
    job = make_job(pytorch(), name="metrics")
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.SUCCEEDED
    with LocalBackend() as backend:
        samples = list(backend.metrics(status.job_id))
        folder = backend.store.log_dir(status.job_id) / "metrics"
        assert sorted(p.name for p in folder.iterdir()) == ["worker-0.jsonl", "worker-1.jsonl"]
        assert len(samples) == 12
        assert [s.time for s in samples] == sorted(s.time for s in samples)
        loss = {(s.rank, s.step): s.value for s in samples if s.name == "loss"}
        assert loss == {(r, step): 1.0 / (step + 1) + r for r in (0, 1) for step in range(3)}
        assert {(s.replica, s.rank) for s in samples} == {("worker-0", 0), ("worker-1", 1)}
        assert list(backend.metrics(status.job_id[:6], follow=True)) == samples  # ended: follow returns at once
        backend.delete(status.job_id)
    assert not folder.exists()


def test_each_process_gets_its_own_file_and_the_users_env_wins(tmp_path: Path) -> None:
    job = make_job(
        pytorch(
            procsPerReplica=2,
            roles={"worker": {"env": [{"name": "KUBETRAIN_METRICS_FILE", "value": "/data/$(KUBETRAIN_ROLE).jsonl"}]}},
            replicas=None,
        )
    )
    plain = make_job(pytorch(procsPerReplica=2))
    with LocalBackend() as backend:
        job_id = create_job(backend, plain, tmp_path)
        record = backend.launch_record(job_id)
        files = [p.env["KUBETRAIN_METRICS_FILE"] for p in record.processes]
        folder = backend.store.log_dir(job_id) / "metrics"
        assert files == [str(folder / f"worker-{i}.{j}.jsonl") for i in (0, 1) for j in (0, 1)]
        custom = backend.launch_record(create_job(backend, job, tmp_path))
        assert {p.env["KUBETRAIN_METRICS_FILE"] for p in custom.processes} == {"/data/worker.jsonl"}


def test_following_a_running_job_yields_samples_as_they_are_logged(tmp_path: Path) -> None:
    job_id, gate = start_gated_metrics(tmp_path, 0.5)
    got: list[MetricSample] = []
    first = threading.Event()

    def follow() -> None:
        with LocalBackend() as backend:
            for s in backend.metrics(job_id, follow=True):
                got.append(s)
                first.set()

    reader = threading.Thread(target=follow)
    reader.start()
    assert first.wait(60), "the first sample never arrived"
    assert [(s.step, s.value) for s in got] == [(0, 1.0)]
    open_gate(gate)
    reader.join(60)
    assert not reader.is_alive(), "following did not end with the job"
    assert [(s.step, s.value) for s in got] == [(0, 1.0), (1, 0.5)]
    assert wait_phase(job_id, JobPhase.SUCCEEDED).phase is JobPhase.SUCCEEDED


def marker_lines(container: dict[str, object], index: int, code: str) -> list[str]:
    """What the replica's real program prints for metrics, run with the env the kubelet gives the rendered
    container (its start-up script computes the replica's index and rank in a real shell)."""
    env = kubelet_env(
        container, {"metadata.name": "", "status.podIP": "", "status.hostIP": ""}, {"JOB_COMPLETION_INDEX": str(index)}
    )
    command = [*(expand(w, env) for w in container["command"]), sys.executable, "-c", code]  # type: ignore[attr-defined]
    path = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "VIRTUAL_ENV")}
    out = subprocess.run(command, env={**env, **path}, capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.splitlines()


def test_on_kubernetes_metrics_come_from_the_marked_lines_of_the_container_logs(emulated: Cluster) -> None:
    cluster = emulated
    b = cluster.backend()
    job = cluster.job("metrics", script="python train.py")
    [container] = [main_container(t) for t in pod_templates(render_manifests(job, "job").objects).values()]
    code = "import kubetrain.metrics as m\nprint('epoch 1')\nm.log(step=1, loss=0.5)\nm.log(step=2, loss=0.25)"
    sub = b.submit(job, flavor="job")
    pods = cluster.start_pods(b, "job", sub.name)
    printed = {replica: marker_lines(container, int(replica[-1]), code) for replica in pods}
    assert all(lines[0] == "epoch 1" and lines[1].startswith(MARKER) for lines in printed.values())
    got: list[MetricSample] = []
    followed = threading.Thread(target=lambda: got.extend(b.metrics(sub.name, follow=True)))
    followed.start()
    for replica, pod in pods.items():
        cluster.kubelet(pod, "Succeeded", *printed[replica])
    cluster.conclude("job", sub.name, "Succeeded")
    followed.join(cluster.timeout)
    assert not followed.is_alive(), "following did not end with the job"
    samples = list(b.metrics(sub.name))
    assert sorted((s.replica, s.rank, s.step, s.value) for s in samples) == [
        ("worker-0", 0, 1, 0.5),
        ("worker-0", 0, 2, 0.25),
        ("worker-1", 1, 1, 0.5),
        ("worker-1", 1, 2, 0.25),
    ]
    assert sorted(got, key=lambda s: (s.replica, s.step)) == sorted(samples, key=lambda s: (s.replica, s.step))
    # `kubetrain logs` shows the program's own output; the metric lines only when asked for.
    assert sorted(r.text for r in b.logs(sub.name)) == ["epoch 1", "epoch 1"]
    assert len(list(b.logs(sub.name, grep="^" + MARKER))) == 4


def test_the_ddp_example_reports_loss_and_throughput_per_rank() -> None:
    """The example trainer (real torch.distributed over gloo) logs on every rank; `kubetrain metrics` reads it."""
    from kubetrain.jobspec import load_file
    from tests.support.helpers import EXAMPLES

    job = load_file(EXAMPLES / "pytorch-ddp" / "job.yaml", overrides=["spec.run.python[2]=5"])
    status = run_job(job, EXAMPLES / "pytorch-ddp")
    assert status.phase is JobPhase.SUCCEEDED
    with LocalBackend() as backend:
        samples = list(backend.metrics(status.job_id))
    by_rank: dict[int | None, dict[str, list[int | None]]] = {}
    for s in samples:
        by_rank.setdefault(s.rank, {}).setdefault(s.name, []).append(s.step)
    assert by_rank == {r: {"loss": [1, 5], "samples_per_s": [1, 5]} for r in (0, 1)}
    assert all(s.value > 0 for s in samples)
