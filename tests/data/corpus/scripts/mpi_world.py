"""Stand-in for an MPI program (Horovod's, an mpi4py script): joins the world its mpirun started, all-reduces
a one and reports what it saw with the variables and files its controller gives the launcher:
`CORPUS {"rank": r, "world": n, "sum": n, ...}`. `--env NAME ...` adds those variables, `--hostfile` the file
OMPI_MCA_orte_default_hostfile names (the MPI Operator's /etc/mpi/hostfile)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from mpi4py import MPI


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", nargs="*", default=[])
    parser.add_argument("--hostfile", action="store_true")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    report: dict[str, object] = {"rank": comm.Get_rank(), "world": comm.Get_size(), "sum": comm.allreduce(1)}
    report.update({name: os.environ.get(name) for name in args.env})
    if args.hostfile:
        path = os.environ.get("OMPI_MCA_orte_default_hostfile")  # noqa: SIM112 (Open MPI's own spelling)
        report["hostfile"] = None
        if path:
            with open(path, encoding="utf-8") as handle:
                report["hostfile"] = handle.read()
    # One write of the whole line: mpirun forwards every rank's output to one stream, where a line written in
    # two pieces (print's text, then its newline) can be cut by another rank's.
    sys.stdout.write("CORPUS " + json.dumps(report, sort_keys=True) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
