"""`KubernetesClusterResolver`: the cluster from the pods the Kubernetes API lists, TensorFlow's contract.

The contract of `tf.distribute.cluster_resolver.KubernetesClusterResolver`: a mapping of job types to
label selectors (several per type are concatenated in order), `tf_server_port`, `rpc_layer`,
`override_client`; `task_type`, `task_id`, `rpc_layer`, `environment`; `cluster_spec()` (read from the API
on every call), `master()`, `num_accelerators()`; RuntimeError when a matched pod is not Running;
ImportError when the Kubernetes client is missing and no `override_client` is given.

What kubetrain adds: addresses are pod IPs (TensorFlow's uses the node's IP, which pods on one node
share); pods are ordered by their replica index, then name; a replaced pod's terminated predecessor is
ignored; inside a kubetrain replica the mapping, the port and the task (`task_type`, `task_id`) come from
the replica's own env and labels; `num_accelerators()` reads the task's pod resources (nvidia.com/gpu,
amd.com/gpu and MIG slices → "GPU", google.com/tpu → "TPU"); pods are listed in one namespace (a Role
suffices, see `kubetrain.resolver.rbac`); `wait()` waits for every pod to run.

The Kubernetes client is imported only when a resolver is created without `override_client`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..contract import env_names
from ..contract.labels import INDEX_KEYS, JOB_LABEL, ROLE_LABEL
from ..contract.naming import label_value
from .cluster_spec import ClusterResolver, ClusterSpec, expand_cluster, within_config
from .env import _int, framework_cluster

__all__ = [
    "DEFAULT_MAPPING",
    "DEFAULT_TF_SERVER_PORT",
    "INDEX_KEYS",
    "KubernetesClusterResolver",
    "PodInfo",
    "count_accelerators",
    "kubetrain_mapping",
    "label_value",
    "pod_accelerators",
]

DEFAULT_MAPPING: dict[str, list[str]] = {"worker": ["job-name=tensorflow"]}
"""TensorFlow's default mapping, used outside kubetrain replicas when none is given."""
DEFAULT_TF_SERVER_PORT = 8470
"""TensorFlow's default port, used when none is given and the env contract has none for the job type."""


SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
_TERMINAL = ("Succeeded", "Failed")



def kubetrain_mapping(environ: Mapping[str, str]) -> dict[str, list[str]] | None:
    """The mapping inside a kubetrain replica: a job type per role of its job (for TensorFlow jobs, the
    roles of TF_CONFIG's cluster), each the pods labelled with the job and the role. None outside one."""
    job, raw = environ.get(env_names.JOB), environ.get(env_names.CLUSTER)
    if not job or not raw:
        return None
    roles = framework_cluster(environ.get(env_names.FRAMEWORK), expand_cluster(raw))
    return {role: [f"{JOB_LABEL}={label_value(job)},{ROLE_LABEL}={role}"] for role in roles}


# -- pods ---------------------------------------------------------------------------------------------


def _get(obj: Any, *path: tuple[str, str]) -> Any:
    """A field from a client model (snake_case attributes) or a plain dict (the API's camelCase)."""
    for snake, camel in path:
        if obj is None:
            return None
        obj = obj.get(camel, obj.get(snake)) if isinstance(obj, Mapping) else getattr(obj, snake, None)
    return obj


def _parse_index(labels: Mapping[str, str], annotations: Mapping[str, str]) -> int | None:
    for key in INDEX_KEYS:
        for source in (labels, annotations):
            value = source.get(key)
            if value is not None and str(value).isdigit():
                return int(value)
    return None


@dataclass(frozen=True)
class PodInfo:
    """What the resolver reads of a pod."""

    name: str
    namespace: str | None
    phase: str | None
    pod_ip: str | None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    hostname: str | None = None
    deleting: bool = False
    resources: tuple[dict[str, str], ...] = ()
    """Per app container: its limits, with requests filling resources that have no limit."""

    @property
    def index(self) -> int | None:
        """The replica index the engine gave the pod (completion index, operator index), if any."""
        return _parse_index(self.labels, self.annotations)

    @property
    def live(self) -> bool:
        return self.phase not in _TERMINAL and not self.deleting

    @classmethod
    def from_api(cls, pod: Any) -> PodInfo:
        """From a `V1Pod` or a pod as a dict."""
        meta = (("metadata", "metadata"),)
        containers = _get(pod, ("spec", "spec"), ("containers", "containers")) or []
        resources = []
        for container in containers:
            limits = dict(_get(container, ("resources", "resources"), ("limits", "limits")) or {})
            requests = dict(_get(container, ("resources", "resources"), ("requests", "requests")) or {})
            resources.append({str(k): str(v) for k, v in {**requests, **limits}.items()})
        return cls(
            name=str(_get(pod, *meta, ("name", "name")) or ""),
            namespace=_get(pod, *meta, ("namespace", "namespace")),
            phase=_get(pod, ("status", "status"), ("phase", "phase")),
            pod_ip=_get(pod, ("status", "status"), ("pod_ip", "podIP")),
            labels=dict(_get(pod, *meta, ("labels", "labels")) or {}),
            annotations=dict(_get(pod, *meta, ("annotations", "annotations")) or {}),
            hostname=_get(pod, ("spec", "spec"), ("hostname", "hostname")),
            deleting=_get(pod, *meta, ("deletion_timestamp", "deletionTimestamp")) is not None,
            resources=tuple(resources),
        )


def _quantity(value: str) -> float:
    """A whole-number quantity (accelerators are counted in units); `1k`-style suffixes for completeness."""
    suffixes = {"k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3}
    for suffix, factor in suffixes.items():
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * factor
    return float(value)


def count_accelerators(resources: Mapping[str, str]) -> dict[str, int]:
    """Accelerators in one container's resources: `nvidia.com/gpu`, `amd.com/gpu` and MIG slices
    (`nvidia.com/mig-<profile>`, each a device of its own) → "GPU"; `google.com/tpu` → "TPU". Types with
    none are left out."""
    counts = {"GPU": 0.0, "TPU": 0.0}
    for name, value in resources.items():
        if name in ("nvidia.com/gpu", "amd.com/gpu") or name.startswith("nvidia.com/mig-"):
            counts["GPU"] += _quantity(value)
        elif name == "google.com/tpu":
            counts["TPU"] += _quantity(value)
    return {kind: int(n) for kind, n in counts.items() if n >= 1}


def pod_accelerators(pod: PodInfo) -> dict[str, int]:
    """A pod's accelerators: its app containers' summed. A GPU share scheduled by annotation (Run:ai's
    `gpu-fraction` / `gpu-memory`, no GPU resource) is one GPU, or `gpu-fraction-num-devices`."""
    total: dict[str, int] = {}
    for resources in pod.resources:
        for kind, n in count_accelerators(resources).items():
            total[kind] = total.get(kind, 0) + n
    shared = "gpu-fraction" in pod.annotations or "gpu-memory" in pod.annotations
    if shared and "GPU" not in total:
        total["GPU"] = int(pod.annotations.get("gpu-fraction-num-devices") or 1)
    return total


def _address(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _ordered(pods: list[PodInfo]) -> list[PodInfo]:
    """By replica index (pods without one last), then name. Of several pods with one index (a replaced
    pod and its terminated predecessor), the live ones only, when there are any."""
    by_index: dict[int, list[PodInfo]] = {}
    for pod in pods:
        if pod.index is not None:
            by_index.setdefault(pod.index, []).append(pod)
    superseded = {id(p) for group in by_index.values() if any(q.live for q in group) for p in group if not p.live}
    kept = [p for p in pods if id(p) not in superseded]
    return sorted(kept, key=lambda p: (p.index is None, p.index or 0, p.name))


# -- the resolver --------------------------------------------------------------------------------------


class KubernetesClusterResolver(ClusterResolver):
    """TensorFlow's `KubernetesClusterResolver`, without TensorFlow, for kubetrain replicas and any pods.

    `job_to_label_mapping`: `{job_type: [label_selector, ...]}`. Default: inside a kubetrain replica, a
    job type per role of its job (`kubetrain.dev/job=<job>,kubetrain.dev/role=<role>`; for TensorFlow
    jobs chief, worker and ps); elsewhere TensorFlow's `{"worker": ["job-name=tensorflow"]}`.
    `tf_server_port`: the port of every task. Default: the role's port from the env contract inside a
    kubetrain replica (so addresses match TF_CONFIG's), else TensorFlow's 8470.
    `rpc_layer`: for `master()` ("grpc"). `override_client`: a `CoreV1Api` (or anything with
    `list_namespaced_pod` / `list_pod_for_all_namespaces`), or an `ApiClient`; default: the in-cluster
    service account, else the kubeconfig (`kubeconfig`, else $KUBECONFIG / ~/.kube/config).
    `namespace`: where the pods are listed. Default: KUBETRAIN_NAMESPACE or POD_NAMESPACE, the service
    account's namespace when the client comes from it (in a pod), the kubeconfig context's, else
    "default" (with `override_client`, pass it unless it is "default"). `all_namespaces=True` lists
    across namespaces as TensorFlow's does (needs a ClusterRole).
    `environ`: the env contract to read (default `os.environ`). `access_timeout`: how long a 403 is
    retried (the job's RoleBinding is created just after its first pods may start).
    """

    def __init__(
        self,
        job_to_label_mapping: Mapping[str, Sequence[str] | str] | None = None,
        tf_server_port: int | None = None,
        rpc_layer: str | None = "grpc",
        override_client: Any = None,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        kubeconfig: str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] | None = None,
        access_timeout: float = 30.0,
    ) -> None:
        self._environ = environ
        self._kubeconfig_namespace: str | None = None
        self._in_cluster = False
        if override_client is None:
            self._client = self._client_from_config(kubeconfig)
        elif hasattr(override_client, "list_namespaced_pod") or hasattr(override_client, "list_pod_for_all_namespaces"):
            self._client = override_client
        elif hasattr(override_client, "call_api"):  # an ApiClient
            from kubernetes import client as k8s_client

            self._client = k8s_client.CoreV1Api(override_client)
        else:
            raise TypeError("override_client must be a CoreV1Api (or list pods like one) or an ApiClient")
        env = self.environ
        self._kubetrain_mapping = job_to_label_mapping is None and kubetrain_mapping(env) is not None
        mapping = job_to_label_mapping or kubetrain_mapping(env) or DEFAULT_MAPPING
        self._mapping: dict[str, list[str]] = {
            job: [selectors] if isinstance(selectors, str) else list(selectors) for job, selectors in mapping.items()
        }
        self._tf_server_port = tf_server_port
        self.rpc_layer = rpc_layer
        self._all_namespaces = all_namespaces
        self._namespace = namespace or self._default_namespace()
        self._access_timeout = access_timeout
        self._inferred: tuple[str, int] | None = None

    # -- set-up ----------------------------------------------------------------------------------------

    def _client_from_config(self, kubeconfig: str | os.PathLike[str] | None) -> Any:
        try:
            from kubernetes import client as k8s_client
            from kubernetes import config as k8s_config
        except ImportError as exc:
            raise ImportError(
                "The Kubernetes Python client must be installed before using the Kubernetes Cluster Resolver "
                "(pip install kubernetes), or pass override_client."
            ) from exc
        configuration = k8s_client.Configuration()
        in_cluster = (
            kubeconfig is None
            and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
            and os.path.exists(os.path.join(SERVICE_ACCOUNT_DIR, "token"))
        )
        if in_cluster:
            k8s_config.load_incluster_config(client_configuration=configuration)
            self._in_cluster = True
        else:
            # $KUBECONFIG as it is now: the client reads it once, when it is first imported.
            path = os.fspath(kubeconfig) if kubeconfig is not None else os.environ.get("KUBECONFIG") or None
            k8s_config.load_kube_config(config_file=path, client_configuration=configuration)
            try:
                _contexts, current = k8s_config.list_kube_config_contexts(config_file=path)
                self._kubeconfig_namespace = (current.get("context") or {}).get("namespace")
            except Exception:  # the namespace is a default only; the config itself has loaded
                self._kubeconfig_namespace = None
        return k8s_client.CoreV1Api(k8s_client.ApiClient(configuration))

    def _default_namespace(self) -> str:
        env = self.environ
        for name in (env_names.NAMESPACE, "POD_NAMESPACE"):
            if env.get(name):
                return env[name]
        if self._in_cluster:
            try:
                with open(os.path.join(SERVICE_ACCOUNT_DIR, "namespace")) as f:
                    if text := f.read().strip():
                        return text
            except OSError:
                pass
        return self._kubeconfig_namespace or "default"

    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    @property
    def namespace(self) -> str:
        return self._namespace

    @property
    def job_to_label_mapping(self) -> dict[str, list[str]]:
        return {job: list(selectors) for job, selectors in self._mapping.items()}

    def port(self, job_type: str) -> int:
        """The port of `job_type`'s tasks (see `tf_server_port`)."""
        if self._tf_server_port is not None:
            return self._tf_server_port
        raw = self.environ.get(env_names.CLUSTER)
        if raw:
            addresses = expand_cluster(raw).get(job_type)
            if addresses:
                return int(addresses[0].rpartition(":")[2])
        return DEFAULT_TF_SERVER_PORT

    # -- the API ---------------------------------------------------------------------------------------

    def _list(self, selector: str) -> list[PodInfo]:
        deadline = time.monotonic() + self._access_timeout
        delay = 0.1
        while True:
            try:
                if self._all_namespaces or not hasattr(self._client, "list_namespaced_pod"):
                    answer = self._client.list_pod_for_all_namespaces(label_selector=selector)
                else:
                    answer = self._client.list_namespaced_pod(self._namespace, label_selector=selector)
                break
            except Exception as exc:
                if getattr(exc, "status", None) != 403:
                    raise
                if time.monotonic() + delay > deadline:
                    where = "any namespace" if self._all_namespaces else f"namespace {self._namespace!r}"
                    raise PermissionError(
                        f"listing pods in {where} is forbidden: {getattr(exc, 'reason', exc)}. The resolver needs "
                        "get/list on pods there (`kubetrain rbac` prints a Role and RoleBinding for a job)"
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        items = answer.get("items") if isinstance(answer, Mapping) else answer.items
        return _ordered([PodInfo.from_api(pod) for pod in items or []])

    def pods(self) -> dict[str, list[PodInfo]]:
        """Each job type's pods in task order (read now; any phase)."""
        return {job: [pod for selector in selectors for pod in self._list(selector)]
                for job, selectors in self._mapping.items()}  # fmt: skip

    def cluster_spec(self) -> ClusterSpec:
        """The cluster as the API lists it now: `podIP:port` per pod, job types in mapping order.

        Raises RuntimeError when a matched pod is not Running (or has no IP yet)."""
        cluster: dict[str, list[str]] = {}
        for job, pods in self.pods().items():
            port = self.port(job)
            addresses = []
            for pod in pods:
                if pod.phase != "Running":
                    raise RuntimeError(f'Pod "{pod.name}" is not running; phase: "{pod.phase}"')
                if not pod.pod_ip:
                    raise RuntimeError(f'Pod "{pod.name}" is running but has no IP yet')
                addresses.append(_address(pod.pod_ip, port))
            cluster[job] = addresses
        return ClusterSpec(cluster)

    def wait(self, timeout: float = 300.0, interval: float = 1.0) -> ClusterSpec:
        """`cluster_spec()` once every matched pod runs and, inside a kubetrain replica with the default
        mapping, every replica of the job has a pod (elsewhere: every job type has one). Raises
        TimeoutError, with the last reason, after `timeout` seconds."""
        expected: dict[str, int] | None = None
        if self._kubetrain_mapping:
            expected = {r: len(a) for r, a in expand_cluster(self.environ[env_names.CLUSTER]).items()}
        deadline = time.monotonic() + timeout
        while True:
            try:
                spec = self.cluster_spec()
                missing = [
                    job for job in spec.jobs
                    if spec.num_tasks(job) < (expected.get(job, 1) if expected is not None else 1)
                ]  # fmt: skip
                if not missing:
                    return spec
                reason = f"waiting for the pods of {', '.join(missing)}"
            except RuntimeError as exc:
                reason = str(exc)
            if time.monotonic() > deadline:
                raise TimeoutError(f"the cluster is not ready after {timeout:g}s: {reason}")
            time.sleep(interval)

    # -- this replica's task ---------------------------------------------------------------------------

    def _is_self(self, pod: PodInfo) -> bool:
        env = self.environ
        names = {env.get(env_names.POD_NAME), env.get("POD_NAME")} - {None, ""}
        if names:
            return pod.name in names
        role, index, job = env.get(env_names.ROLE), _int(env, env_names.REPLICA_INDEX), env.get(env_names.JOB)
        if role and index is not None and ROLE_LABEL in pod.labels:
            same_job = job is None or pod.labels.get(JOB_LABEL) in (None, label_value(job))
            return same_job and pod.labels[ROLE_LABEL] == role and pod.index == index and pod.live
        hostname = env.get("HOSTNAME")
        return bool(hostname) and hostname in (pod.name, pod.hostname) and pod.live

    def _infer(self) -> tuple[str, int] | None:
        """This replica's (job type, task id). With kubetrain's default mapping the env contract says it
        (no API call); with another mapping, this replica's pod is found among the listed ones (by
        POD_NAME, its kubetrain labels, or its hostname) and its position taken."""
        if self._inferred is not None:
            return self._inferred
        env = self.environ
        role, index = env.get(env_names.ROLE), _int(env, env_names.REPLICA_INDEX)
        found: tuple[str, int] | None = None
        identifiable = any(env.get(n) for n in (env_names.POD_NAME, "POD_NAME", "HOSTNAME")) or (
            role and index is not None
        )
        if self._kubetrain_mapping and role and index is not None:
            found = (role, index)
        elif not identifiable:
            return None  # nothing to recognise this replica's pod by: no API call
        else:
            for job, pods in self.pods().items():
                position = next((i for i, pod in enumerate(pods) if self._is_self(pod)), None)
                if position is not None:
                    found = (job, position)
                    break
            if found is None and role and index is not None and role not in self._mapping:
                found = (role, index)  # a task outside the cluster, e.g. TensorFlow's evaluator
        self._inferred = found
        return found

    def _own_task(self) -> tuple[str | None, int | None]:
        inferred = self._infer()
        return inferred if inferred is not None else (None, None)

    def num_accelerators(
        self, task_type: str | None = None, task_id: int | None = None, config_proto: Any = None
    ) -> dict[str, int]:
        """Accelerators of a task (default: this replica's) from its pod's resources, summed over its
        containers: `{"GPU": n}`, `{"TPU": n}`; `{}` when it has none or the task is not known.
        `config_proto` (TensorFlow's ConfigProto) limits them as a session started with it would see them
        (`within_config`: device_count, gpu_options.visible_device_list)."""
        task_type = task_type if task_type is not None else self.task_type
        task_id = task_id if task_id is not None else self.task_id
        if task_type is None or task_id is None:
            return {}
        if task_type not in self._mapping:
            raise ValueError(f"no job type {task_type!r} in the mapping ({', '.join(self._mapping)})")
        pods = [pod for selector in self._mapping[task_type] for pod in self._list(selector)]
        if not 0 <= task_id < len(pods):
            raise ValueError(f"no task {task_id} in job type {task_type!r} ({len(pods)} pods)")
        return within_config(pod_accelerators(pods[task_id]), config_proto)
