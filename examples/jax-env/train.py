"""Data-parallel linear regression over JAX processes joined by jax.distributed.

Each process computes the gradient on its own shard; the gradients are averaged across processes with
`multihost_utils.process_allgather`, so every process takes the same step. Prints the loss from process
0 and, on every process, `final-params-checksum <process> <float>`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

import jax
import jax.numpy as jnp
from jax.experimental import multihost_utils

FEATURES = 8


def initialize() -> tuple[int, int]:
    """Join the cluster described by kubetrain's env contract; returns (process id, process count)."""
    num_processes = int(os.environ["JAX_NUM_PROCESSES"])
    process_id = int(os.environ["JAX_PROCESS_ID"])
    # Cross-process collectives on CPU go through gloo (GPUs use NCCL, TPUs their interconnect); a jax
    # without this option has no CPU collectives to configure.
    with contextlib.suppress(AttributeError):
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],  # jax would also read it by itself
        num_processes=num_processes,
        process_id=process_id,
    )
    return jax.process_index(), jax.process_count()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args(argv)

    process, count = initialize()
    print(f"process {process} of {count}, {jax.local_device_count()} local device(s)", flush=True)

    true_w = jax.random.normal(jax.random.PRNGKey(0), (FEATURES,))
    key = jax.random.PRNGKey(1000 + process)  # each process its own data shard
    w = jnp.zeros(FEATURES)

    def loss_fn(w: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean((x @ w - y) ** 2)

    grad_fn = jax.jit(jax.value_and_grad(loss_fn))
    for step in range(1, args.steps + 1):
        key, k1, k2 = jax.random.split(key, 3)
        x = jax.random.normal(k1, (args.batch_size, FEATURES))
        y = x @ true_w + 0.1 * jax.random.normal(k2, (args.batch_size,))
        loss, grad = grad_fn(w, x, y)
        grads = multihost_utils.process_allgather(grad)  # (count, FEATURES) on every process
        w = w - args.lr * jnp.mean(grads, axis=0)
        if process == 0 and (step % 5 == 0 or step == args.steps):
            print(f"step {step}/{args.steps} loss {float(loss):.6f}", flush=True)

    print(f"final-params-checksum {process} {float(jnp.sum(w))!r}", flush=True)
    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
