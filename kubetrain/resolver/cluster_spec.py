"""`ClusterSpec` (job type → task addresses) and what every kubetrain cluster resolver shares.

Standard library only: this runs inside every replica, in images that may have neither pydantic nor the
Kubernetes client nor TensorFlow.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["ClusterResolver", "ClusterSpec", "expand_cluster", "format_master_url", "within_config"]


def format_master_url(master: str, rpc_layer: str | None = None) -> str:
    """`rpc_layer://master`, or `master` alone without an RPC layer (TensorFlow's rule)."""
    return f"{rpc_layer}://{master}" if rpc_layer else master


class ClusterSpec:
    """Job types (roles) and the addresses of their tasks, in task order. An immutable value.

    Mirrors the read side of `tf.train.ClusterSpec` (`jobs`, `num_tasks`, `task_indices`, `task_address`,
    `job_tasks`, `as_dict`) without needing TensorFlow; `as_tf()` gives the real one when it is installed.
    Job order is kept as given (TF_CONFIG lists chief, worker, ps in kubetrain's order).
    """

    __slots__ = ("_jobs",)

    def __init__(self, cluster: Mapping[str, Sequence[str]] | ClusterSpec | Any | None = None) -> None:
        if cluster is None:
            cluster = {}
        elif not isinstance(cluster, Mapping) and hasattr(cluster, "as_dict"):
            cluster = cluster.as_dict()  # a ClusterSpec, ours or TensorFlow's
        if not isinstance(cluster, Mapping):
            raise TypeError(f"a cluster is a mapping of job name to addresses, not {type(cluster).__name__}")
        jobs: dict[str, tuple[str, ...]] = {}
        for job, tasks in cluster.items():
            if not isinstance(job, str) or not job:
                raise ValueError(f"job names are non-empty strings, got {job!r}")
            if isinstance(tasks, Mapping):  # TensorFlow's sparse form {index: address}: dense only
                indices = sorted(tasks)
                if indices != list(range(len(indices))):
                    raise ValueError(f"job {job!r}: task indices must be 0..n-1, got {indices}")
                tasks = [tasks[i] for i in indices]
            if isinstance(tasks, str) or not isinstance(tasks, Sequence):
                raise ValueError(f"job {job!r}: tasks are a list of addresses, got {tasks!r}")
            for address in tasks:
                if not isinstance(address, str) or not address:
                    raise ValueError(f"job {job!r}: addresses are non-empty strings, got {address!r}")
            jobs[job] = tuple(tasks)
        self._jobs = jobs

    # -- tf.train.ClusterSpec's read API ------------------------------------------------------------

    @property
    def jobs(self) -> list[str]:
        return list(self._jobs)

    def num_tasks(self, job_name: str) -> int:
        return len(self._tasks(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        return list(range(self.num_tasks(job_name)))

    def task_address(self, job_name: str, task_index: int) -> str:
        tasks = self._tasks(job_name)
        if not 0 <= task_index < len(tasks):
            raise ValueError(f"no task {task_index} in job {job_name!r} ({len(tasks)} tasks)")
        return tasks[task_index]

    def job_tasks(self, job_name: str) -> list[str]:
        return list(self._tasks(job_name))

    def as_dict(self) -> dict[str, list[str]]:
        """`{job: [address, ...]}`, a fresh copy."""
        return {job: list(tasks) for job, tasks in self._jobs.items()}

    # -- beyond TensorFlow's -------------------------------------------------------------------------

    def as_tf_config(self, task_type: str | None, task_id: int | None) -> dict[str, Any]:
        """The TF_CONFIG for task (`task_type`, `task_id`): `{"cluster": ..., "task": {"type", "index"}}`.

        The task need not be in the cluster (TensorFlow keeps the evaluator out of it); without a task,
        only the cluster."""
        config: dict[str, Any] = {"cluster": self.as_dict()}
        if task_type is not None and task_id is not None:
            config["task"] = {"type": task_type, "index": int(task_id)}
        return config

    def as_tf(self) -> Any:
        """A `tf.train.ClusterSpec` with the same jobs and addresses. Needs TensorFlow."""
        try:
            import tensorflow as tf
        except ImportError as exc:
            raise ImportError("ClusterSpec.as_tf() needs TensorFlow: pip install tensorflow-cpu") from exc
        return tf.train.ClusterSpec(self.as_dict())

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), separators=(",", ":"))

    def _tasks(self, job_name: str) -> tuple[str, ...]:
        try:
            return self._jobs[job_name]
        except KeyError:
            raise ValueError(f"no job {job_name!r} in the cluster (jobs: {', '.join(self._jobs) or 'none'})") from None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ClusterSpec):
            return self._jobs == other._jobs
        if hasattr(other, "as_dict") and not isinstance(other, Mapping):
            try:
                return self == ClusterSpec(other)
            except (TypeError, ValueError):
                return False
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._jobs.items()))

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def __iter__(self) -> Iterator[str]:
        return iter(self._jobs)

    def __len__(self) -> int:
        return len(self._jobs)

    def __repr__(self) -> str:
        return f"ClusterSpec({self.as_dict()!r})"


def _field(message: Any, name: str) -> Any:
    """A field of a protobuf message (TensorFlow's ConfigProto) or of the same as a dict."""
    if isinstance(message, Mapping):
        return message.get(name)
    return getattr(message, name, None)


def within_config(counts: Mapping[str, int], config_proto: Any) -> dict[str, int]:
    """The accelerators a session started with `config_proto` would have, as TensorFlow's `num_accelerators`
    lists them from such a session (seed 001: "Configuration for starting a new session to query how many
    accelerator cores it has"): `device_count` caps each device type ({"GPU": 1}; 0 leaves it out), and
    `gpu_options.visible_device_list` ("0,2") the GPUs the session sees. A ConfigProto or the same as a dict;
    None: `counts` as they are."""
    out = dict(counts)
    if config_proto is None:
        return out
    limits = _field(config_proto, "device_count") or {}
    for kind, limit in dict(limits).items():
        if str(kind) in out:
            out[str(kind)] = min(out[str(kind)], int(limit))
    visible = _field(_field(config_proto, "gpu_options") or {}, "visible_device_list")
    if visible and "GPU" in out:
        out["GPU"] = min(out["GPU"], len([d for d in str(visible).split(",") if d.strip()]))
    return {kind: n for kind, n in out.items() if n > 0}


def expand_cluster(cluster: str | Mapping[str, Any]) -> dict[str, list[str]]:
    """KUBETRAIN_CLUSTER as `{role: [address, ...]}`.

    The variable holds either explicit lists (`{"worker": ["127.0.0.1:4001", ...]}`, locally) or, where
    addresses follow a pattern, `{"worker": {"count": N, "address": "job-worker-{index}.job:2222"}}`
    (Kubernetes: constant size whatever the replica count).
    """
    data: Any = json.loads(cluster) if isinstance(cluster, str) else cluster
    if not isinstance(data, Mapping):
        raise ValueError(f"KUBETRAIN_CLUSTER is not a JSON object: {cluster!r}")
    out: dict[str, list[str]] = {}
    for role, value in data.items():
        if isinstance(value, list) and all(isinstance(a, str) for a in value):
            out[role] = list(value)
        elif isinstance(value, Mapping) and isinstance(value.get("address"), str):
            count = value.get("count")
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise ValueError(f"KUBETRAIN_CLUSTER: role {role!r} has no valid count: {value!r}")
            pattern = value["address"]
            out[role] = [pattern.replace("{index}", str(i)) for i in range(count)]
        else:
            raise ValueError(f"KUBETRAIN_CLUSTER: role {role!r} is neither a list nor {{count, address}}: {value!r}")
    return out


class ClusterResolver:
    """What kubetrain's resolvers share with TensorFlow's `ClusterResolver`: `task_type`, `task_id`,
    `rpc_layer`, `environment`, `cluster_spec()`, `master()`, `num_accelerators()`.

    Not a subclass of TensorFlow's (kubetrain does not need TensorFlow); `as_tf()` wraps a resolver in
    one that is (`kubetrain.resolver.tf.TFClusterResolver`).
    """

    rpc_layer: str | None = "grpc"
    _task_type: str | None = None
    _task_id: int | None = None

    @property
    def task_type(self) -> str | None:
        """This replica's job type: as set, else as the resolver infers it (None when it cannot)."""
        return self._task_type if self._task_type is not None else self._own_task()[0]

    @task_type.setter
    def task_type(self, value: str | None) -> None:
        self._task_type = value

    @property
    def task_id(self) -> int | None:
        """This replica's index within its job type: as set, else as inferred (None when unknown)."""
        return self._task_id if self._task_id is not None else self._own_task()[1]

    @task_id.setter
    def task_id(self, value: int | None) -> None:
        self._task_id = None if value is None else int(value)

    def _own_task(self) -> tuple[str | None, int | None]:
        """(task type, task id) as the resolver infers them."""
        return None, None

    @property
    def environment(self) -> str:
        """TensorFlow's meaning: "google" inside Google, else empty."""
        return ""

    def cluster_spec(self) -> ClusterSpec:
        raise NotImplementedError

    def master(self, task_type: str | None = None, task_id: int | None = None, rpc_layer: str | None = None) -> str:
        """The address of task (`task_type`, `task_id`) — by default this replica's own — as
        `rpc_layer://host:port` (`rpc_layer` defaults to the resolver's; none: `host:port`). Empty when
        the task is not known (TensorFlow's contract)."""
        task_type = task_type if task_type is not None else self.task_type
        task_id = task_id if task_id is not None else self.task_id
        if task_type is not None and task_id is not None:
            return format_master_url(self.cluster_spec().task_address(task_type, task_id), rpc_layer or self.rpc_layer)
        return ""

    def num_accelerators(
        self, task_type: str | None = None, task_id: int | None = None, config_proto: Any = None
    ) -> dict[str, int]:
        raise NotImplementedError

    def tf_config(self, task_type: str | None = None, task_id: int | None = None) -> dict[str, Any]:
        """TF_CONFIG for a task (default: this replica's), from the cluster as resolved now."""
        task_type = task_type if task_type is not None else self.task_type
        task_id = task_id if task_id is not None else self.task_id
        return self.cluster_spec().as_tf_config(task_type, task_id)

    def as_tf(self) -> Any:
        """This resolver as a `tf.distribute.cluster_resolver.ClusterResolver` (needs TensorFlow), for
        `tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=...)` and the like. Live: it asks
        this resolver on every call."""
        from .tf import TFClusterResolver

        return TFClusterResolver(self)
