"""The environment the local supervisor gives every replica on top of the caller's."""

from __future__ import annotations

import os

from kubetrain.backends.local.replica_env import replica_base_env


def test_the_interpreters_folder_comes_first_on_path() -> None:
    env = replica_base_env({"PATH": "/usr/bin:/bin"}, "/opt/venv/bin/python", ["worker-0"])
    assert env["PATH"] == "/opt/venv/bin:/usr/bin:/bin"
    again = replica_base_env(env, "/opt/venv/bin/python", ["worker-0"])
    assert again["PATH"] == env["PATH"]  # not added twice


def test_threads_are_shared_among_the_jobs_processes() -> None:
    cores = len(os.sched_getaffinity(0))
    one = replica_base_env({}, "/usr/bin/python3", ["worker-0"])
    assert one["OMP_NUM_THREADS"] == str(cores)
    many = replica_base_env({}, "/usr/bin/python3", [f"worker-{i}" for i in range(4 * cores)])
    assert many["OMP_NUM_THREADS"] == "1"


def test_a_thread_count_the_user_set_is_kept() -> None:
    env = replica_base_env({"OMP_NUM_THREADS": "7"}, "/usr/bin/python3", ["a", "b"])
    assert env["OMP_NUM_THREADS"] == "7"


def test_a_job_whose_supervisor_died_before_starting_replicas_is_failed_not_pending(tmp_path: object) -> None:
    """A detached supervisor killed between recording itself and starting the replicas: the job must not
    stay Pending forever; the next look reports it Failed with reason SupervisorLost."""
    import subprocess
    import sys

    from kubetrain.backends.local.backend import LocalBackend
    from kubetrain.jobspec import from_dict
    from kubetrain.status import JobPhase
    from tests.support.helpers import create_job

    job = from_dict({"metadata": {"name": "lost"}, "spec": {"run": {"exec": ["true"]}, "replicas": 1}})
    with LocalBackend() as backend:
        job_id = create_job(backend, job, tmp_path)  # type: ignore[arg-type]
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        backend.store.set_supervisor(job_id, gone.pid)  # recorded while alive...
        gone.wait()  # ...then dead, before any replica started
        assert backend.store.get_status(job_id).phase is JobPhase.PENDING
        status = backend.status(job_id)
        assert status.phase is JobPhase.FAILED
        assert status.reason == "SupervisorLost"
        with LocalBackend() as other:
            created = create_job(other, job, tmp_path)  # type: ignore[arg-type]
        assert backend.status(created).phase is JobPhase.PENDING  # no supervisor yet: simply waiting
