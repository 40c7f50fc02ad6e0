"""A small MLP trained with DeepSpeed (ZeRO stage 1) on synthetic regression data.

deepspeed.init_distributed() reads the torch.distributed env contract kubetrain sets (MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK); deepspeed.initialize() builds the engine from
ds_config.json (given with --deepspeed_config). Prints the loss from rank 0 and, on every rank,
`final-params-checksum <rank> <float>`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import deepspeed
import torch
from torch import nn

try:  # kubetrain's metrics (`kubetrain metrics ID`, the web view); the script runs without kubetrain too
    from kubetrain.metrics import log as log_metrics
except ImportError:

    def log_metrics(step: int | None = None, **values: float) -> None:
        """kubetrain is not installed where this runs: train without reporting metrics."""

FEATURES = 32


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    # The launcher passes --local_rank (kubetrain too, with `localRank: true`); LOCAL_RANK is the fallback.
    parser.add_argument("--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", "0")))
    parser = deepspeed.add_config_arguments(parser)  # --deepspeed, --deepspeed_config
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    deepspeed.init_distributed()
    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(FEATURES, 256), nn.GELU(), nn.Linear(256, 1))
    engine, _, _, _ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
    rank = engine.global_rank
    device, dtype = engine.device, next(engine.module.parameters()).dtype

    generator = torch.Generator().manual_seed(args.seed * 1000 + rank + 1)  # each rank its own shard
    target = torch.randn(FEATURES, 1, generator=torch.Generator().manual_seed(args.seed))
    micro_batch = engine.train_micro_batch_size_per_gpu()
    world = torch.distributed.get_world_size()
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        x = torch.randn(micro_batch, FEATURES, generator=generator)
        y = x @ target + 0.1 * torch.randn(micro_batch, 1, generator=generator)
        loss = nn.functional.mse_loss(engine(x.to(device, dtype)), y.to(device, dtype))
        engine.backward(loss)
        engine.step()
        if step % 10 == 0 or step == args.steps:
            rate = step * micro_batch * world / (time.perf_counter() - start)
            log_metrics(step=step, loss=loss.item(), samples_per_s=rate)
            if rank == 0:
                print(f"step {step}/{args.steps} loss {loss.item():.6f}", flush=True)

    with torch.no_grad():
        total = float(sum(p.detach().double().sum() for p in engine.module.parameters()))
    print(f"final-params-checksum {rank} {total!r}", flush=True)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
