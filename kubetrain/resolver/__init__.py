"""Cluster resolvers: inside a replica, who its peers are and which task it is.

- `EnvClusterResolver`: from kubetrain's env contract alone (no API call; locally and on any cluster),
  with helpers for torch (`.torch()`), JAX (`.jax()`) and MPI/DeepSpeed (`.hostfile()`).
- `KubernetesClusterResolver`: TensorFlow's `KubernetesClusterResolver` contract (pods by label
  selector, `podIP:port`), without TensorFlow; inside a kubetrain replica it infers its own task and
  reads accelerators from the pods' resources.
- `ClusterSpec`: job → addresses, `.as_dict()`, `.as_tf_config(type, index)`, `.as_tf()`.
- `resolver.as_tf()` / `kubetrain.resolver.tf.TFClusterResolver`: a resolver where TensorFlow expects
  its own `ClusterResolver` (imports TensorFlow).

Importing this package loads the standard library only: the Kubernetes client when a
KubernetesClusterResolver is created, TensorFlow only through `as_tf()` or `kubetrain.resolver.tf`.
See docs/resolver.md.
"""

from __future__ import annotations

from .apiserver import KubernetesClusterResolver, PodInfo, count_accelerators, kubetrain_mapping
from .cluster_spec import ClusterResolver, ClusterSpec, expand_cluster, format_master_url
from .env import FORMATS, EnvClusterResolver, JaxDist, TorchDist, local_accelerators, resolve_output

__all__ = [
    "FORMATS",
    "ClusterResolver",
    "ClusterSpec",
    "EnvClusterResolver",
    "JaxDist",
    "KubernetesClusterResolver",
    "PodInfo",
    "TorchDist",
    "count_accelerators",
    "expand_cluster",
    "format_master_url",
    "kubetrain_mapping",
    "local_accelerators",
    "resolve_output",
]
