"""An XGBoostJob's replica program, runnable here without xgboost: it reads the env contract the Kubeflow
operator gives every XGBoostJob replica (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK; rank 0 is the Master,
where XGBoost's Rabit tracker listens) and the job's args, then checks over torch.distributed (gloo) that
every replica joined the same world with the same parameters.

Prints `xgboost-replica <rank> <world> job_type=<...> n_estimators=<n> agreed=<True|False>` on every rank.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job_type", choices=("Train", "Predict"), required=True)
    parser.add_argument("--xgboost_parameter", default="")
    parser.add_argument("--n_estimators", type=int, default=10)
    args = parser.parse_args(argv)
    dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK
    rank, world = dist.get_rank(), dist.get_world_size()
    # Every replica must train the same number of trees: the largest and the smallest agree.
    largest, smallest = torch.tensor([args.n_estimators]), torch.tensor([-args.n_estimators])
    dist.all_reduce(largest, op=dist.ReduceOp.MAX)
    dist.all_reduce(smallest, op=dist.ReduceOp.MAX)
    agreed = int(largest.item()) == -int(smallest.item()) == args.n_estimators
    print(
        f"xgboost-replica {rank} {world} job_type={args.job_type} n_estimators={args.n_estimators} "
        f"agreed={agreed} master={os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
        flush=True,
    )
    dist.destroy_process_group()
    return 0 if agreed else 1


if __name__ == "__main__":
    sys.exit(main())
