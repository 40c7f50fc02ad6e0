"""A stand-in for the corpus files' MPI programs: every rank prints what the MPI world gave it, as JSON."""

import json
import os
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank(), op=MPI.SUM)
sys.stdout.write(json.dumps({"rank": comm.Get_rank(), "size": comm.Get_size(), "sum": total,
                             "argv": sys.argv[1:], "job": os.environ.get("KUBETRAIN_JOB")}) + "\n")
sys.stdout.flush()
