"""Telling a command that already is a distributed launcher (torchrun, deepspeed, mpirun, horovodrun) from a
program, so kubetrain never starts a launcher inside a launcher: a container whose command is `torchrun
train.py` runs as written, once per replica, with the variables its controller gives torchrun.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from ..jobspec import Run

TORCHRUN = "torchrun"
DEEPSPEED = "deepspeed"
MPIRUN = "mpirun"
HOROVODRUN = "horovodrun"

_PROGRAMS = {
    "torchrun": TORCHRUN,
    "deepspeed": DEEPSPEED,
    "mpirun": MPIRUN,
    "mpiexec": MPIRUN,
    "orterun": MPIRUN,
    "horovodrun": HOROVODRUN,
}
"""Launcher programs by the name they are run as."""

_MODULES = {
    "torch.distributed.run": TORCHRUN,
    "torch.distributed.launch": TORCHRUN,
    "deepspeed.launcher.runner": DEEPSPEED,
    "horovod.runner.launch": HOROVODRUN,
}
"""Launchers run as `python -m MODULE`."""

_PYTHON = re.compile(r"python[0-9.]*")
_PYTHON_VALUE_OPTIONS = frozenset({"-W", "-X", "-Q", "-c"})


def launcher_of(argv: Sequence[str]) -> str | None:
    """The launcher `argv` runs (`torchrun`, `deepspeed`, `mpirun`, `horovodrun`), or None for a program."""
    if not argv:
        return None
    first = posixpath.basename(str(argv[0]))
    if first in _PROGRAMS:
        return _PROGRAMS[first]
    if not _PYTHON.fullmatch(first):
        return None
    i = 1
    while i < len(argv) and str(argv[i]).startswith("-") and argv[i] != "-m":
        i += 2 if argv[i] in _PYTHON_VALUE_OPTIONS else 1
    if i + 1 < len(argv) and argv[i] == "-m":
        return _MODULES.get(str(argv[i + 1]))
    return None


_SHELLS = frozenset({"sh", "bash", "dash", "ash", "ksh", "zsh"})
_SCRIPT_WORD = re.compile(r"[^\s;&|()`'\"]+")


def script_launcher(argv: Sequence[str]) -> str | None:
    """The launcher a shell script runs (`sh -c '...; mpiexec --host $MPI_HOST ...'`, the shape Volcano's and
    the MPI Operator's examples use), or None: any word of the script that names one, a plain reading that
    errs towards seeing a launcher (no launcher is then started around the script)."""
    if len(argv) < 3 or posixpath.basename(str(argv[0])) not in _SHELLS:
        return None
    at = next((i for i, word in enumerate(argv[1:], 1)
               if str(word).startswith("-") and not str(word).startswith("--") and "c" in str(word)), None)
    if at is None or at + 1 >= len(argv):
        return None
    words = _SCRIPT_WORD.findall(str(argv[at + 1]))
    for i in range(len(words)):
        found = launcher_of(words[i:])
        if found is not None:
            return found
    return None


def run_launcher(run: Run | None) -> str | None:
    """The launcher a job's `run` starts (`module: [torch.distributed.run, ...]` is torchrun), or None."""
    if run is None:
        return None
    if run.module is not None:
        return _MODULES.get(str(run.module[0])) if run.module else None
    if run.exec is not None:
        return launcher_of(run.exec)
    if isinstance(run.custom_command, list):
        return launcher_of(run.custom_command)
    return None


def run_script_launcher(run: Run | None) -> str | None:
    """The launcher a job's `run` starts itself or from its shell script."""
    found = run_launcher(run)
    if found is not None or run is None:
        return found
    return script_launcher(run.exec or (run.custom_command if isinstance(run.custom_command, list) else None) or [])


__all__ = ["DEEPSPEED", "HOROVODRUN", "MPIRUN", "TORCHRUN", "launcher_of", "run_launcher", "run_script_launcher",
           "script_launcher"]
