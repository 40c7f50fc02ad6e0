"""Stand-in for a data-parallel training step: joins torch.distributed's default group the env:// way
(MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, as torchrun or the controller sets them), all-reduces a tensor of
ones and reports what it saw: `CORPUS {"rank": r, "world": n, "sum": n, ...}`."""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    ones = torch.ones(1)
    dist.all_reduce(ones)
    report = {
        "rank": rank,
        "world": world,
        "sum": int(ones.item()),
        "local_rank": os.environ.get("LOCAL_RANK"),
    }
    sys.stdout.write("CORPUS " + json.dumps(report, sort_keys=True) + "\n")  # one write: ranks may share the pipe
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
