"""kubetrain's resolvers where TensorFlow expects its own `ClusterResolver`. Imports TensorFlow.

An adapter, not a subclass: `kubetrain.resolver` must import without TensorFlow (it runs in every
replica, whatever its framework), so its resolvers cannot derive from TensorFlow's class. The adapter is
a real `tf.distribute.cluster_resolver.ClusterResolver` that asks the wrapped resolver on every call
(`cluster_spec()` re-reads the API or the environment each time), so TensorFlow's `isinstance` checks
pass and its strategies read a live cluster:

    from kubetrain.resolver import KubernetesClusterResolver
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=KubernetesClusterResolver().as_tf())
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from .cluster_spec import ClusterResolver

__all__ = ["TFClusterResolver", "to_tf"]


class TFClusterResolver(tf.distribute.cluster_resolver.ClusterResolver):
    """A TensorFlow `ClusterResolver` backed by a kubetrain resolver (`Env...` or `Kubernetes...`).

    `task_type`, `task_id` and `rpc_layer` read and write the wrapped resolver's; `cluster_spec()` returns
    a `tf.train.ClusterSpec`."""

    def __init__(self, resolver: ClusterResolver) -> None:
        self._resolver = resolver

    @property
    def resolver(self) -> ClusterResolver:
        """The kubetrain resolver this one asks."""
        return self._resolver

    def cluster_spec(self) -> Any:
        return self._resolver.cluster_spec().as_tf()

    def master(self, task_type: str | None = None, task_id: int | None = None, rpc_layer: str | None = None) -> str:
        return self._resolver.master(task_type, task_id, rpc_layer)

    def num_accelerators(
        self, task_type: str | None = None, task_id: int | None = None, config_proto: Any = None
    ) -> dict[str, int]:
        return self._resolver.num_accelerators(task_type, task_id, config_proto)

    @property
    def environment(self) -> str:
        return self._resolver.environment

    @property
    def task_type(self) -> str | None:
        return self._resolver.task_type

    @task_type.setter
    def task_type(self, value: str | None) -> None:
        self._resolver.task_type = value

    @property
    def task_id(self) -> int | None:
        return self._resolver.task_id

    @task_id.setter
    def task_id(self, value: int | None) -> None:
        self._resolver.task_id = value

    @property
    def rpc_layer(self) -> str | None:
        return self._resolver.rpc_layer

    @rpc_layer.setter
    def rpc_layer(self, value: str | None) -> None:
        self._resolver.rpc_layer = value


def to_tf(resolver: ClusterResolver | None = None) -> TFClusterResolver:
    """`resolver` (default: `EnvClusterResolver()`) as a TensorFlow ClusterResolver."""
    if resolver is None:
        from .env import EnvClusterResolver

        resolver = EnvClusterResolver()
    return TFClusterResolver(resolver)
