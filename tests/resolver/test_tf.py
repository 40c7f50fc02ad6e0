"""kubetrain's resolvers with real TensorFlow: `ClusterSpec.as_tf()`, the adapter TensorFlow accepts as its
own ClusterResolver, agreement with TensorFlow's resolvers, and a Keras model trained with
MultiWorkerMirroredStrategy over 2 workers on the local backend.

Needs `tensorflow-cpu` (the test extras install it). Without it these tests fail, not skip: CI must run
them. `-m "not tensorflow"` leaves them out of a quick local run.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kube_emulator import KubeEmulator
from kubernetes import client as k8s

from kubetrain.jobspec import from_dict
from kubetrain.plan import plan
from kubetrain.resolver import ClusterSpec, EnvClusterResolver, KubernetesClusterResolver
from tests.support.helpers import (  # noqa: F401 (no_process_left_behind: an autouse fixture)
    cli,
    job_file,
    no_process_left_behind,
    no_traceback,
)

pytestmark = [pytest.mark.tensorflow, pytest.mark.timeout(300)]

SCRIPT = Path(__file__).parent.parent / "data" / "tf_mwms_keras.py"


@pytest.fixture(scope="module")
def tf() -> ModuleType:
    try:
        import tensorflow
    except ImportError as exc:
        pytest.fail(
            f"TensorFlow is not importable ({exc}): these tests need it. Install the test extras "
            "(pip install -e '.[test]' -c constraints.txt: tensorflow-cpu), or deselect them with -m 'not tensorflow'",
            pytrace=False,
        )
    return tensorflow


def tf_replica_env(role: str, index: int) -> dict[str, str]:
    job = from_dict({
        "apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": {"name": "tf"},
        "spec": {"framework": "tensorflow", "run": {"python": ["t.py"]},
                 "roles": {"chief": {}, "worker": {"replicas": 2}, "evaluator": {}}},
    })  # fmt: skip
    replica = next(r for r in plan(job).replicas if (r.role, r.index) == (role, index))
    return replica.processes[0].env


def test_cluster_spec_as_tf(tf: ModuleType) -> None:
    ours = ClusterSpec({"chief": ["c:1"], "worker": ["w0:1", "w1:1"]})
    theirs = ours.as_tf()
    assert isinstance(theirs, tf.train.ClusterSpec)
    assert theirs.as_dict() == ours.as_dict()
    assert theirs.jobs == ours.jobs and theirs.task_address("worker", 1) == "w1:1"
    assert ClusterSpec(theirs) == ours == theirs


@pytest.mark.parametrize(("role", "index"), [("chief", 0), ("worker", 1), ("evaluator", 0)])
def test_env_resolver_where_tensorflow_expects_its_own(
    tf: ModuleType, monkeypatch: pytest.MonkeyPatch, role: str, index: int
) -> None:
    env = tf_replica_env(role, index)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    adapter = EnvClusterResolver().as_tf()
    theirs = tf.distribute.cluster_resolver.TFConfigClusterResolver()  # reads the TF_CONFIG kubetrain set
    assert isinstance(adapter, tf.distribute.cluster_resolver.ClusterResolver)
    spec = adapter.cluster_spec()
    assert isinstance(spec, tf.train.ClusterSpec)
    assert spec.as_dict() == theirs.cluster_spec().as_dict()
    assert (adapter.task_type, adapter.task_id) == (theirs.task_type, theirs.task_id) == (role, index)
    if role != "evaluator":
        assert adapter.master(rpc_layer="grpc") == theirs.master(rpc_layer="grpc")
    assert adapter.environment == "" and not theirs.environment  # TensorFlow's: None when TF_CONFIG has none
    assert adapter.num_accelerators() == {}  # this machine has no GPU or TPU
    # the adapter is live: settings go through to the kubetrain resolver
    adapter.task_type, adapter.task_id, adapter.rpc_layer = "worker", 0, None
    assert adapter.resolver.task_type == "worker" and adapter.master() == spec.task_address("worker", 0)


def test_kubernetes_resolver_where_tensorflow_expects_its_own(
    tf: ModuleType, kube_emulator: KubeEmulator, kube_api_client: Any
) -> None:
    def pod(name: str, phase: str = "Running") -> None:
        kube_emulator.create({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"job-name": "tensorflow"}},
            "spec": {"containers": [{"name": "c", "image": "tf"}]},
        })  # fmt: skip
        if phase != "Pending":
            kube_emulator.set_pod_phase("default", name, phase)

    pod("tf-b")
    pod("tf-a")
    core = k8s.CoreV1Api(kube_api_client)
    ours = KubernetesClusterResolver(override_client=core, environ={})
    theirs = tf.distribute.cluster_resolver.KubernetesClusterResolver(override_client=core)
    adapter = ours.as_tf()
    assert isinstance(adapter, tf.distribute.cluster_resolver.ClusterResolver)
    # the same contract: default mapping, port, order (no index: by name); addresses: pod IPs where
    # TensorFlow's takes the node's IP, the same for every pod of a node
    mine, tfs = adapter.cluster_spec(), theirs.cluster_spec()
    assert mine.jobs == tfs.jobs == ["worker"]
    assert [a.rsplit(":", 1)[1] for a in mine.job_tasks("worker")] == ["8470", "8470"]
    assert mine.num_tasks("worker") == tfs.num_tasks("worker") == 2
    pod_ips = [kube_emulator.get("pods", n)["status"]["podIP"] for n in ("tf-a", "tf-b")]
    assert mine.job_tasks("worker") == [f"{ip}:8470" for ip in pod_ips]
    adapter.task_type, adapter.task_id = "worker", 1
    theirs.task_type, theirs.task_id = "worker", 1
    assert adapter.master() == f"grpc://{pod_ips[1]}:8470"
    assert theirs.master().startswith("grpc://") and theirs.master().endswith(":8470")
    # both read the API again on each call, and both refuse a pod that is not running
    pod("tf-c", phase="Pending")
    for resolver in (adapter, theirs):
        with pytest.raises(RuntimeError, match='Pod "tf-c" is not running; phase: "Pending"'):
            resolver.cluster_spec()


@pytest.mark.parametrize("resolver", ["tf-config", "kubetrain"])
def test_keras_multi_worker_mirrored_strategy_on_the_local_backend(
    tf: ModuleType, tmp_path: Path, resolver: str
) -> None:
    """Two workers train a Keras model in sync: `tf-config` with TensorFlow's TFConfigClusterResolver reading
    the TF_CONFIG kubetrain set, `kubetrain` with EnvClusterResolver through the adapter (TF_CONFIG removed).
    Both workers end with identical parameters, and the loss falls."""
    shutil.copy(SCRIPT, tmp_path / SCRIPT.name)
    spec = {
        "framework": "tensorflow",
        "run": {"python": [SCRIPT.name, "--resolver", resolver, "--steps", "10"]},
        "replicas": 2,
        "env": {"TF_CPP_MIN_LOG_LEVEL": "2"},
    }
    result = cli("run", job_file(tmp_path, spec, "mwms"), timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    no_traceback(result)
    lines = result.stdout.splitlines()
    assert sum("resolvers agree" in line for line in lines) == 2, lines
    expected_type = "TFClusterResolver" if resolver == "kubetrain" else "TFConfigClusterResolver"
    assert sum(f"2 replicas in sync, resolver {expected_type}" in line for line in lines) == 2, lines
    sums: dict[str, str] = {}
    losses = []
    for line in lines:
        words = line.split()
        if "final-params-checksum" in words:
            at = words.index("final-params-checksum")
            sums[words[at + 1]] = words[at + 2]
        if "loss" in words:
            at = words.index("loss")
            losses.append((float(words[at + 1]), float(words[at + 2])))
    assert sorted(sums) == ["worker/0", "worker/1"], lines
    assert len(set(sums.values())) == 1, f"the workers' parameters differ: {sums}"
    assert losses and all(last < first / 2 for first, last in losses), losses


def test_num_accelerators_honours_the_config_proto() -> None:
    """Seed 001: config_proto is the "Configuration for starting a new session to query how many accelerator cores
    it has": a session whose ConfigProto caps GPUs (device_count) or lists the visible ones (gpu_options) has
    those. It was accepted and not used."""
    import tensorflow as tf

    from kubetrain.resolver import EnvClusterResolver

    r = EnvClusterResolver(environ={"KUBETRAIN_ROLE": "worker", "KUBETRAIN_REPLICA_INDEX": "0",
                                    "CUDA_VISIBLE_DEVICES": "0,1,2,3", "TPU_VISIBLE_CHIPS": "0,1"})
    config = tf.compat.v1.ConfigProto
    assert r.num_accelerators() == {"GPU": 4, "TPU": 2}
    assert r.num_accelerators(config_proto=config(device_count={"GPU": 1})) == {"GPU": 1, "TPU": 2}
    assert r.num_accelerators(config_proto=config(device_count={"GPU": 0})) == {"TPU": 2}
    visible = config(gpu_options=tf.compat.v1.GPUOptions(visible_device_list="0,2"))
    assert r.num_accelerators(config_proto=visible) == {"GPU": 2, "TPU": 2}
    assert r.as_tf().num_accelerators(config_proto=visible) == {"GPU": 2, "TPU": 2}  # through TF's interface
