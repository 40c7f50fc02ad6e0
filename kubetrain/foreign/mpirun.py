"""An MPI launcher's `mpirun [options] program ...` read as kubetrain's mpi run: the program, and the options
kubetrain does not write itself (shared by the Kubeflow MPIJob and Volcano converters)."""

from __future__ import annotations

import posixpath
from typing import Any

from .shapes import program_run

_MPIRUN_VALUE_OPTIONS = frozenset(
    {
        "-np",
        "-n",
        "--np",
        "-c",
        "-N",
        "--npernode",
        "-npernode",
        "--hostfile",
        "-hostfile",
        "--machinefile",
        "-machinefile",
        "-H",
        "--host",
        "-host",
        "-x",
        "--map-by",
        "-map-by",
        "--bind-to",
        "-bind-to",
        "--rank-by",
        "-rank-by",
        "-wdir",
        "--wdir",
        "--prefix",
        "-f",
        "-ppn",
        "--tag-output-with",
    }
)
_MPIRUN_TWO_VALUES = frozenset({"--mca", "-mca", "-gmca", "--gmca"})
_MPIRUN_PLACEMENT = frozenset(
    {
        "-np",
        "-n",
        "--np",
        "-c",
        "--hostfile",
        "-hostfile",
        "--machinefile",
        "-machinefile",
        "-H",
        "--host",
        "-host",
        "-f",
    }
)
_MPIRUN_ROOT = frozenset({"--allow-run-as-root", "-allow-run-as-root"})


def mpirun_run(run: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The launcher's `mpirun [options] program ...` → kubetrain's mpi run: the program, and the options other
    than those kubetrain writes itself (-np, the hostfile, running as root) in otherArgs."""
    argv = run.get("exec")
    if argv is None or posixpath.basename(argv[0]) not in ("mpirun", "mpiexec", "orterun"):
        return run, None
    options: list[str] = []
    dropped: list[str] = []
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        word = argv[i]
        flag, eq, _ = word.partition("=")
        width = 0 if eq else 2 if word in _MPIRUN_TWO_VALUES else 1 if word in _MPIRUN_VALUE_OPTIONS else 0
        taken = argv[i : i + 1 + width]
        if flag in _MPIRUN_PLACEMENT or flag in _MPIRUN_ROOT:
            dropped.append(" ".join(taken))
        else:
            options += taken
        i += 1 + width
    program, how = program_run(argv[i:])
    if options:
        program["otherArgs"] = options
    hows = [how] if how else []
    if dropped:
        hows.append(
            f"mpirun's {', '.join(dropped)}: kubetrain writes -np (worker replicas × slotsPerWorker), "
            "the hostfile and OMPI_ALLOW_RUN_AS_ROOT itself"
        )
    return program, "; ".join(hows) or None


__all__ = [
    "mpirun_run",
]
