"""Keras training under tf.distribute.MultiWorkerMirroredStrategy, configured by TF_CONFIG.

The strategy's default cluster resolver (TFConfigClusterResolver) reads TF_CONFIG, which kubetrain sets
on every replica. Gradients are all-reduced across the chief and the workers each step. Only the chief
prints the training log and the final summary; every task prints one line saying who it is.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import tensorflow as tf

FEATURES = 8


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps-per-epoch", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32, help="per replica; the global batch is N times this")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def dataset(global_batch: int, seed: int) -> tf.data.Dataset:
    """Synthetic regression data, y = x·w + noise, repeated forever."""
    rng = tf.random.Generator.from_seed(seed)
    x = rng.normal((4096, FEATURES))
    w = rng.normal((FEATURES, 1))
    y = x @ w + 0.1 * rng.normal((4096, 1))
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096, seed=seed).repeat().batch(global_batch)
    options = tf.data.Options()
    # In-memory data has no files to shard by: each worker takes every N-th batch element instead.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return data.with_options(options)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task = config.get("task", {})
    if not config.get("cluster"):
        print("TF_CONFIG is not set: run this under kubetrain (framework: tensorflow)", file=sys.stderr)
        return 2
    tf.keras.utils.set_random_seed(args.seed)

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    resolver = strategy.cluster_resolver
    is_chief = resolver.task_type == "chief" or (
        "chief" not in config["cluster"] and resolver.task_type == "worker" and resolver.task_id == 0
    )
    print(f"task {task.get('type')}/{task.get('index')}: {strategy.num_replicas_in_sync} replicas in sync",
          flush=True)

    with strategy.scope():
        model = tf.keras.Sequential([
            tf.keras.layers.Input((FEATURES,)),
            tf.keras.layers.Dense(32, activation="tanh"),
            tf.keras.layers.Dense(1),
        ])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse")

    history = model.fit(
        dataset(args.batch_size * strategy.num_replicas_in_sync, args.seed),
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        verbose=2 if is_chief else 0,
    )
    if is_chief:
        print(f"final-loss {history.history['loss'][-1]:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
