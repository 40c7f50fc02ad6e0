"""A tiny Keras model trained with tf.distribute.MultiWorkerMirroredStrategy, for the resolver tests.

    --resolver tf-config   TensorFlow's own TFConfigClusterResolver reads the TF_CONFIG kubetrain set
    --resolver kubetrain   kubetrain's EnvClusterResolver, through its TensorFlow adapter; TF_CONFIG is
                           removed first, so the cluster can only come from kubetrain's env contract

Before training, each task checks that kubetrain's resolver and TensorFlow's agree on the cluster and the
task. A custom training loop: Keras 3's `model.fit` fails under MultiWorkerMirroredStrategy on TF 2.21
("unsupported type PerReplica" while building the model), while the model, layers, loss and optimizer
are Keras'. Prints `loss <first> <last>` and `final-params-checksum <type>/<index> <float>` (exact repr).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import keras
import tensorflow as tf

from kubetrain.resolver import EnvClusterResolver

FEATURES = 4


def check_agreement() -> None:
    """kubetrain's resolver (env contract) and TensorFlow's (TF_CONFIG) must describe the same task."""
    ours = EnvClusterResolver()
    theirs = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    assert ours.tf_config() == json.loads(os.environ["TF_CONFIG"]), (ours.tf_config(), os.environ["TF_CONFIG"])
    assert ours.as_tf().cluster_spec().as_dict() == theirs.cluster_spec().as_dict()
    assert (ours.task_type, ours.task_id) == (theirs.task_type, theirs.task_id)
    print("resolvers agree", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--resolver", choices=["tf-config", "kubetrain"], required=True)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()

    check_agreement()
    if args.resolver == "kubetrain":
        del os.environ["TF_CONFIG"]
        strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=EnvClusterResolver().as_tf())
    else:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    resolver = strategy.cluster_resolver
    task = f"{resolver.task_type}/{resolver.task_id}"
    workers = strategy.num_replicas_in_sync
    print(f"task {task}: {workers} replicas in sync, resolver {type(resolver).__name__}", flush=True)

    per_worker = 16
    global_batch = per_worker * workers
    x = tf.random.stateless_normal((512, FEATURES), seed=[0, 1])
    y = x @ tf.constant([[1.0], [-2.0], [0.5], [3.0]]) + 0.25
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(global_batch)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    iterator = iter(strategy.experimental_distribute_dataset(data.with_options(options)))

    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(8, activation="tanh"),
                                  keras.layers.Dense(1)])  # fmt: skip
        optimizer = keras.optimizers.SGD(0.05)
        mse = keras.losses.MeanSquaredError(reduction="none")

    @tf.function
    def train_step(iterator: tf.distribute.DistributedIterator) -> tf.Tensor:
        def step(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(mse(yb, model(xb, training=True)), global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))  # all-reduced
            return loss

        xb, yb = next(iterator)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step, args=(xb, yb)), axis=None)

    losses = [float(train_step(iterator)) for _ in range(args.steps)]
    print(f"loss {losses[0]!r} {losses[-1]!r}", flush=True)
    checksum = sum(float(tf.reduce_sum(tf.cast(v, tf.float64))) for v in model.trainable_variables)
    print(f"final-params-checksum {task} {checksum!r}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
