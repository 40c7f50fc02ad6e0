"""The environment the local supervisor gives every replica on top of the caller's."""

from __future__ import annotations

import os

from kubetrain.backends.local.supervisor import replica_base_env


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
