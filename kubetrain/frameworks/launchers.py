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


__all__ = ["DEEPSPEED", "HOROVODRUN", "MPIRUN", "TORCHRUN", "launcher_of", "run_launcher"]
