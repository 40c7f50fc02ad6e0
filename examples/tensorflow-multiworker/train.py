"""A small regression model trained with tf.distribute.MultiWorkerMirroredStrategy, configured by TF_CONFIG.

The strategy's default cluster resolver (TFConfigClusterResolver) reads TF_CONFIG, which kubetrain sets on
every replica. Each step, every worker computes gradients on its own share of the global batch and the
strategy all-reduces them, so the chief and the workers keep identical variables. A custom training loop
(the pattern of TensorFlow's multi-worker tutorial) works the same with Keras 2 and Keras 3.

Prints the loss from the chief and, on every task, `final-params-checksum <type>/<index> <float>`.
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
    parser.add_argument("--batch-size", type=int, default=32, help="per worker; the global batch is N times this")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def dataset(global_batch: int, seed: int) -> tf.data.Dataset:
    """Synthetic regression data, y = x·w + noise, repeated forever."""
    x = tf.random.stateless_normal((4096, FEATURES), seed=[seed, 1])
    w = tf.random.stateless_normal((FEATURES, 1), seed=[seed, 2])
    y = x @ w + 0.1 * tf.random.stateless_normal((4096, 1), seed=[seed, 3])
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096, seed=seed).repeat().batch(global_batch)
    options = tf.data.Options()
    # In-memory data has no files to shard by: each worker takes its share of every batch instead.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return data.with_options(options)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    if not config.get("cluster"):
        print("TF_CONFIG is not set: run this under kubetrain (framework: tensorflow)", file=sys.stderr)
        return 2
    task = f"{config['task']['type']}/{config['task']['index']}"
    is_chief = config["task"]["type"] == "chief" or (
        "chief" not in config["cluster"] and config["task"] == {"type": "worker", "index": 0}
    )

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    workers = strategy.num_replicas_in_sync
    global_batch = args.batch_size * workers
    print(f"task {task}: {workers} replicas in sync", flush=True)

    with strategy.scope():
        tf.random.set_seed(args.seed)  # the same initial variables everywhere (the strategy also syncs them)
        model = tf.keras.Sequential([
            tf.keras.Input((FEATURES,)),
            tf.keras.layers.Dense(32, activation="tanh"),
            tf.keras.layers.Dense(1),
        ])
        optimizer = tf.keras.optimizers.SGD(args.lr)

    @tf.function
    def train_step(iterator: tf.distribute.DistributedIterator) -> tf.Tensor:
        def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                per_example = tf.reduce_mean(tf.square(model(x, training=True) - y), axis=-1)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))  # all-reduced
            return loss

        x, y = next(iterator)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step, args=(x, y)), axis=None)

    iterator = iter(strategy.experimental_distribute_dataset(dataset(global_batch, args.seed)))
    for epoch in range(1, args.epochs + 1):
        total = 0.0
        for _ in range(args.steps_per_epoch):
            total += float(train_step(iterator))
        if is_chief:
            print(f"epoch {epoch}/{args.epochs} loss {total / args.steps_per_epoch:.6f}", flush=True)

    checksum = sum(float(tf.reduce_sum(tf.cast(v, tf.float64))) for v in model.trainable_variables)
    print(f"final-params-checksum {task} {checksum!r}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
