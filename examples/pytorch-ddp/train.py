"""DistributedDataParallel over a small MLP on synthetic regression data, on CPU with gloo.

Reads the torch.distributed env contract (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE; LOCAL_RANK when
set) through `init_process_group(init_method="env://")`, so it runs unchanged under kubetrain, torchrun
or a Kubernetes operator. Deterministic: the same seed and world size give the same parameters.

Printed lines other programs read:
  final-params-checksum <rank> <float>   on every rank: the sum of all parameters, full precision
  samples/s <float>                      on rank 0: training throughput over all ranks

`--fail-rank R --fail-code C` makes rank R exit with code C after its first step (for testing failure
handling).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

try:  # kubetrain's metrics (`kubetrain metrics ID`, the web view); the script runs without kubetrain too
    from kubetrain.metrics import log as log_metrics
except ImportError:

    def log_metrics(step: int | None = None, **values: float) -> None:
        """kubetrain is not installed where this runs: train without reporting metrics."""

IN_FEATURES = 16
HIDDEN = 64


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="optimizer steps (default 50)")
    parser.add_argument("--batch-size", type=int, default=32, help="samples per rank and step (default 32)")
    parser.add_argument("--lr", type=float, default=0.05, help="learning rate (default 0.05)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the model and the data (default 0)")
    parser.add_argument("--log-every", type=int, default=10, help="print the loss every N steps (default 10)")
    parser.add_argument("--fail-rank", type=int, default=None, help="this rank exits after its first step")
    parser.add_argument("--fail-code", type=int, default=1, help="exit code of --fail-rank (default 1)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1 or args.log_every < 1:
        parser.error("--steps, --batch-size and --log-every must be at least 1")
    return args


def make_model(seed: int) -> nn.Module:
    torch.manual_seed(seed)  # the same initial parameters on every rank (DDP also broadcasts rank 0's)
    return nn.Sequential(nn.Linear(IN_FEATURES, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 1))


def make_batch(generator: torch.Generator, batch_size: int, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A noisy linear target: y = x·w + 0.1·noise."""
    x = torch.randn(batch_size, IN_FEATURES, generator=generator)
    noise = torch.randn(batch_size, 1, generator=generator)
    return x, x @ target + 0.1 * noise


def checksum(model: nn.Module) -> float:
    with torch.no_grad():
        return float(sum(p.detach().double().sum() for p in model.parameters()))


def train(args: argparse.Namespace) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    model = DistributedDataParallel(make_model(args.seed))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.MSELoss()
    target = torch.randn(IN_FEATURES, 1, generator=torch.Generator().manual_seed(args.seed))
    data = torch.Generator().manual_seed(args.seed * 1000 + rank + 1)  # each rank its own shard

    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        x, y = make_batch(data, args.batch_size, target)
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()  # DDP averages the gradients over all ranks here
        optimizer.step()
        if step == 1 and args.fail_rank == rank:
            print(f"rank {rank}: failing on purpose with exit code {args.fail_code}", file=sys.stderr, flush=True)
            sys.exit(args.fail_code)
        if step % args.log_every == 0 or step == 1 or step == args.steps:
            # Every rank reports its own loss (`kubetrain metrics ID --per-rank`); rank 0 also prints it.
            rate = step * args.batch_size * world / (time.perf_counter() - start)
            log_metrics(step=step, loss=loss.item(), samples_per_s=rate)
            if rank == 0:
                print(f"step {step}/{args.steps} loss {loss.item():.6f}", flush=True)
    elapsed = time.perf_counter() - start

    print(f"final-params-checksum {rank} {checksum(model.module)!r}", flush=True)
    if rank == 0:
        print(f"samples/s {args.steps * args.batch_size * world / elapsed:.1f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)  # one core per process: replicas share the machine
    dist.init_process_group(backend="gloo", init_method="env://")
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        if rank == 0:
            where = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
            print(f"world size {world}, master {where}, {args.steps} steps of {args.batch_size}", flush=True)
        train(args)
        dist.barrier()  # nobody leaves while a peer still needs them
    finally:
        # DDP's reference cycles would keep gloo's threads alive into interpreter shutdown, where they
        # can abort the process ("terminate called without an active exception"): collect them first.
        gc.collect()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
