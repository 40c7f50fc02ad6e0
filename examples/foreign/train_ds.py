"""A DeepSpeedJob's worker program, runnable without DeepSpeed or GPUs: torch.distributed over gloo, from the
env contract deepspeed.init_distributed() reads (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK).

Takes `--local_rank` (what a DeepSpeedJob with `localRank: true` passes) and `--steps`; every rank averages a
gradient with the others each step, then prints `final-params-checksum <rank> <float>` (the same on every rank
when the allreduce kept them in step) and `env DS_EXAMPLE=<value>` (what the job's env gave it).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", "0")))
    args = parser.parse_args(argv)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    weight = torch.zeros(8, 1)
    target = torch.arange(8, dtype=torch.float32).reshape(8, 1)
    data = torch.Generator().manual_seed(rank + 1)  # each rank its own shard
    for _ in range(args.steps):
        x = torch.randn(16, 8, generator=data)
        grad = x.T @ (x @ weight - x @ target) / 16
        dist.all_reduce(grad)
        weight -= 0.05 * grad / world
    print(f"rank {rank}/{world} local_rank {args.local_rank}", flush=True)
    print(f"env DS_EXAMPLE={os.environ.get('DS_EXAMPLE')}", flush=True)
    print(f"final-params-checksum {rank} {float(weight.sum())!r}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
