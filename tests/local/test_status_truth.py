"""What the store says happened is what happened: when a lost supervisor ended, how cancelled and suspended
replicas show, a missing script refused before a job exists, and a stored launch record whose size per
replica does not grow with the replica count."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from dataclasses import replace
from pathlib import Path

import pytest

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.backends.local.launch import LaunchRecord
from kubetrain.backends.local.prepare import local_plan
from kubetrain.backends.local.store import JobStore
from kubetrain.backends.local.store_connection import StoreConnection
from kubetrain.status import JobPhase, ReplicaPhase
from tests.support.helpers import (
    cli,
    generic,
    job_file,
    make_job,
    no_traceback,
    running_sleepers,
    signal_supervisor,
    status_of,
    supervisor_arrives_after_first_look,
    wait_gone,
    wait_phase,
    write,
)

pytestmark = pytest.mark.timeout(120)


def test_a_lost_supervisor_finished_when_it_died_not_when_someone_looked(tmp_path: Path) -> None:
    job_id, _, found = running_sleepers(tmp_path, "lost")
    supervisor = signal_supervisor(job_id, signal.SIGKILL)
    wait_gone([supervisor, *found.values()])  # its watchdog killed the replicas
    killed_by = time.time()
    status = status_of(job_id)  # looked at only now
    assert (status.phase, status.reason) == (JobPhase.FAILED, "SupervisorLost")
    assert status.finished_at is not None and status.started_at is not None
    assert status.started_at <= status.finished_at <= killed_by
    failed = status.condition("Failed")
    assert failed is not None and failed.time == status.finished_at


def test_cancelled_replicas_show_stopped_by_cancel(tmp_path: Path) -> None:
    job_id, _, _ = running_sleepers(tmp_path, "cancelme")
    assert cli("cancel", job_id).returncode == 0
    status = status_of(job_id)
    assert [(r.phase, r.reason, r.describe_exit()) for r in status.replicas] == [
        (ReplicaPhase.CANCELLED, "Cancelled", "stopped by cancel (SIGTERM)")
    ] * 2
    assert (status.counts()["worker"].cancelled, status.counts()["worker"].failed) == (2, 0)
    shown = cli("describe", job_id)
    assert "stopped by cancel (SIGTERM)" in shown.stdout and "Failed, stopped" not in shown.stdout
    assert "Failed" not in shown.stdout.split("Replicas:")[1].split("Conditions:")[0]


def test_suspended_replicas_are_pending_again_stopped_by_suspend(tmp_path: Path) -> None:
    job_id, _, _ = running_sleepers(tmp_path, "pauseme")
    assert cli("suspend", job_id).returncode == 0
    status = status_of(job_id)
    assert status.phase is JobPhase.SUSPENDED
    for replica in status.replicas:
        assert (replica.phase, replica.reason, replica.describe_exit()) == (ReplicaPhase.PENDING, "Suspended", "")
        assert replica.message is not None and replica.message.startswith("stopped by suspend (SIGTERM)")
    assert cli("cancel", job_id).returncode == 0


def test_a_missing_script_is_refused_before_a_local_job_exists(tmp_path: Path) -> None:
    path = job_file(tmp_path, generic(["missing.py"], replicas=2, image="python:3.12"))
    result = cli("run", path)
    assert result.returncode == 2
    no_traceback(result)
    assert "spec.run.python[0]:" in result.stderr and str(tmp_path / "missing.py") in result.stderr
    assert cli("list", "-o", "name").stdout.strip() == ""
    # Only a real local run needs the file: a dry run, or a render for a cluster (the image has it), does not.
    assert cli("run", "--dry-run", path).returncode == 0
    assert cli("render", path).returncode == 0


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow", "generic"])
def test_the_stored_launch_record_per_replica_does_not_grow_with_the_replica_count(framework: str) -> None:
    def stored(replicas: int) -> tuple[LaunchRecord, str]:
        spec = {"framework": framework, "replicas": replicas, "run": {"python": ["train.py"]}}
        record = LaunchRecord.from_plan(local_plan(make_job(spec, "big"), "big-abcde", Path("/x/files")), cwd="/x")
        return record, record.to_json()

    small, large = stored(16), stored(256)
    per_replica = [len(text) / len(record.replicas) for record, text in (small, large)]
    assert per_replica[1] <= per_replica[0] * 1.1, per_replica
    # Lossless: what the supervisor reads back is every process's whole environment.
    for record, text in (small, large):
        assert LaunchRecord.from_json(text) == record
    assert json.loads(large[1])["replicas"][255]["processes"][0]["env"]["KUBETRAIN_REPLICA_INDEX"] == "255"


def test_a_stored_launch_record_of_an_earlier_kubetrain_still_reads(tmp_path: Path) -> None:
    record = LaunchRecord.from_plan(
        local_plan(make_job(generic(["t.py"], replicas=3), "old"), "old-abcde", tmp_path), cwd=str(tmp_path)
    )
    # The layout earlier records were stored in: every process's whole env listed with it, and no cluster.
    envs = record.envs()
    full = {k: v for k, v in record.to_dict().items() if k not in ("cluster", "env", "sharedValues")}
    full["replicas"] = [
        {**r, "processes": [{**p, "env": envs[p["key"]]} for p in r["processes"]]} for r in full["replicas"]
    ]
    assert LaunchRecord.from_json(json.dumps(full)) == replace(record, cluster={})


@pytest.mark.parametrize("shape", ["gang", "trials"])
def test_a_reader_never_sees_a_replica_running_under_a_pending_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """`status`, the web view and `wait --for=condition=Running` read the store while the supervisor writes it:
    a job whose replicas run is Running in every state they can read, never Pending. Each state the store
    holds is looked at by another connection (as another process's `status`) right after it is committed."""
    write(tmp_path / "ok.py", "print('ok', flush=True)\n")
    spec = generic(["ok.py"], replicas=3)
    if shape == "trials":
        spec = {"run": {"python": ["ok.py"]}, "trials": {"completions": 3, "parallelism": 3}}
    job = make_job(spec, "seen").with_base_dir(tmp_path)
    seen: list[tuple[JobPhase, tuple[ReplicaPhase, ...]]] = []
    commit = StoreConnection._commit
    with LocalBackend() as backend, JobStore(backend.store.db_path) as reader:

        def commit_then_look(self: StoreConnection, conn: sqlite3.Connection) -> None:
            commit(self, conn)
            if self is not reader:
                seen.extend((s.phase, tuple(r.phase for r in s.replicas)) for s in reader.list_jobs())

        monkeypatch.setattr(StoreConnection, "_commit", commit_then_look)
        result = backend.run(job)  # attached: its supervisor writes through this process's store
    assert result.status is not None and result.status.phase is JobPhase.SUCCEEDED, result.status
    assert (JobPhase.PENDING, (ReplicaPhase.PENDING,) * 3) in seen  # the reader saw the job before it started
    assert any(phase is JobPhase.RUNNING and ReplicaPhase.RUNNING in replicas for phase, replicas in seen)
    mixed = [(phase, replicas) for phase, replicas in seen
             if phase is JobPhase.PENDING and ReplicaPhase.RUNNING in replicas]
    assert not mixed, f"replicas Running under a Pending job: {mixed[0]}"


def test_a_supervisor_recording_itself_while_status_looks_is_not_taken_for_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A detached supervisor records itself in the store a moment after it starts, and `resume` (as `run --detach`)
    looks at the job right then. Here the look's first read of the record comes just before the supervisor
    records itself: the job goes on to succeed, not Failed (SupervisorLost) under a supervisor about to run it."""
    gate = tmp_path / "gate"  # the replicas wait for it: their supervisor stays recorded while the test looks
    write(tmp_path / "ok.py", f"import os, time\nwhile not os.path.exists({str(gate)!r}):\n    time.sleep(0.01)\n")
    job = make_job(generic(["ok.py"], replicas=2, runMode="Pause"), "arriving").with_base_dir(tmp_path)
    with LocalBackend() as backend:
        job_id = backend.run(job).job_id
        with supervisor_arrives_after_first_look(monkeypatch, backend) as first:
            resumed = backend.resume(job_id)
        assert first == [None]  # the look read the record before the supervisor had recorded itself
        assert resumed.phase in (JobPhase.PENDING, JobPhase.RUNNING), resumed.message
        gate.touch()
    status = wait_phase(job_id, JobPhase.SUCCEEDED, JobPhase.FAILED)
    assert status.phase is JobPhase.SUCCEEDED, (status.reason, status.message)
