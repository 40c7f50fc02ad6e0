"""The environment a local job's replicas start from: the submitting shell's, kept with the job.

A pod's env is fixed when the job is submitted; a local replica would otherwise get the environment of
whichever process starts it, which for a resumed job is another shell, maybe another day. So the
environment of the shell that submitted the job is saved in its log folder and every supervisor starts its
replicas from it, plus what a launcher owes them (`replica_base_env`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

ENVIRONMENT_FILE = "environment.json"
"""The environment of the shell that submitted the job, in its log folder (private to the user, as the store):
what its replicas start from, whoever starts them later (`resume`, from another shell), as a pod's env is fixed
when the job is submitted."""


def save_environment(folder: Path, environ: Mapping[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / ENVIRONMENT_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with open(fd, "w") as f:
        json.dump(dict(environ), f)


def saved_environment(folder: Path) -> dict[str, str] | None:
    """The submitting shell's environment, or None for a job recorded before it was kept (or unreadable)."""
    try:
        data = json.loads((folder / ENVIRONMENT_FILE).read_text())
    except (OSError, ValueError):
        return None
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None


def replica_base_env(environ: Mapping[str, str], python: str, keys: list[str]) -> dict[str, str]:
    """The environment every replica starts from: the caller's, plus two things a launcher owes them.

    - The interpreter's folder first on PATH: `python` started by another program (mpirun, a shell script)
      is then the same interpreter as the replica's own, as in an activated virtual environment.
    - OMP_NUM_THREADS: this machine's cores shared among the job's processes (torchrun sets 1 for several
      processes). Without it every process starts a thread per core and they fight over the cores: DDP
      ran at half speed on 2 cores. A value the user set is kept.
    """
    env = dict(environ)
    bindir = os.path.dirname(python)
    path = env.get("PATH", "")
    if bindir and path.split(os.pathsep)[0] != bindir:
        env["PATH"] = bindir + (os.pathsep + path if path else "")
    if "OMP_NUM_THREADS" not in env:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        env["OMP_NUM_THREADS"] = str(max(1, cores // max(1, len(keys))))
    return env
