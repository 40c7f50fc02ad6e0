"""Sum every rank's number across the MPI world with mpi4py and print it on each rank.

Prints `rank <r> of <n> on <host>` and then `allreduce-sum <value>`, where value = 0 + 1 + ... + (n-1).
Exits 1 if the sum is not what it should be.
"""

from __future__ import annotations

import socket
import sys

from mpi4py import MPI


def say(line: str) -> None:
    """One write per line: mpirun merges the ranks' output streams, and `print` writes the text and its
    newline separately when unbuffered (PYTHONUNBUFFERED), which lets another rank's line slip in between."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> int:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    say(f"rank {rank} of {size} on {socket.gethostname()}")
    total = comm.allreduce(rank, op=MPI.SUM)
    say(f"allreduce-sum {total}")
    expected = size * (size - 1) // 2
    if total != expected:
        print(f"rank {rank}: expected {expected}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
