"""KubernetesClusterResolver against the API emulator: TensorFlow's contract (selectors, order, Running,
master, ImportError) and what kubetrain adds (task inference, accelerators, namespaces, 403 retries), and
the same TF_CONFIG as the env contract for the pods of a rendered job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kube_emulator import KubeEmulator
from kubernetes import client as k8s

from kubetrain import load
from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.resolver import ClusterSpec, EnvClusterResolver, KubernetesClusterResolver
from kubetrain.resolver.apiserver import DEFAULT_MAPPING, PodInfo, count_accelerators
from kubetrain.resolver.env import main as resolve_main
from tests.support.kubelet import expand

ROOT = Path(__file__).resolve().parents[2]
NS = "default"


def make_pod(
    kube: KubeEmulator,
    name: str,
    labels: dict[str, str],
    *,
    phase: str = "Running",
    namespace: str = NS,
    limits: list[dict[str, str]] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod as the kubelet reports it (`phase`, and a pod IP once it runs). Returns the stored pod."""
    containers = [
        {"name": f"c{i}", "image": "busybox", **({"resources": {"limits": lim}} if lim else {})}
        for i, lim in enumerate(limits or [{}])
    ]
    kube.create({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations or {}},
        "spec": {"containers": containers},
    })  # fmt: skip
    if phase != "Pending":
        kube.set_pod_phase(namespace, name, phase, exit_code=0 if phase == "Succeeded" else None)
    return kube.get("pods", name, namespace)


def ip_of(kube: KubeEmulator, name: str, namespace: str = NS) -> str:
    ip = kube.get("pods", name, namespace)["status"].get("podIP")
    assert ip, name
    return str(ip)


def resolver(api: Any, mapping: Any = None, **kw: Any) -> KubernetesClusterResolver:
    kw.setdefault("environ", {})  # not a kubetrain replica unless the test says so
    return KubernetesClusterResolver(mapping, override_client=k8s.CoreV1Api(api), **kw)


# -- TensorFlow's contract --------------------------------------------------------------------------------


def test_one_selector_per_job_type(kube_emulator: KubeEmulator, kube_api_client: Any) -> None:
    for name in ("w-b", "w-a", "w-c"):
        make_pod(kube_emulator, name, {"job-name": "workers"})
    make_pod(kube_emulator, "ps-0", {"job-name": "ps"})
    make_pod(kube_emulator, "other", {"job-name": "unrelated"})
    r = resolver(kube_api_client, {"worker": ["job-name=workers"], "ps": ["job-name=ps"]}, tf_server_port=2222)
    spec = r.cluster_spec()
    assert isinstance(spec, ClusterSpec)
    assert spec.jobs == ["worker", "ps"]  # the mapping's order
    assert spec.as_dict() == {
        "worker": [f"{ip_of(kube_emulator, n)}:2222" for n in ("w-a", "w-b", "w-c")],  # by name: no index
        "ps": [f"{ip_of(kube_emulator, 'ps-0')}:2222"],
    }
    # pod IPs, not the node's (TensorFlow's resolver used hostIP, shared by every pod of a node)
    assert len(set(spec.job_tasks("worker"))) == 3


def test_several_selectors_per_job_type_are_concatenated_in_order(
    kube_emulator: KubeEmulator, kube_api_client: Any
) -> None:
    for name, group in (("a-1", "a"), ("a-0", "a"), ("b-1", "b"), ("b-0", "b")):
        make_pod(kube_emulator, name, {"group": group})
    r = resolver(kube_api_client, {"worker": ["group=b", "group=a"]}, tf_server_port=8470)
    assert r.cluster_spec().job_tasks("worker") == [
        f"{ip_of(kube_emulator, n)}:8470" for n in ("b-0", "b-1", "a-0", "a-1")
    ]
    # a single selector may be given as a string
    r = resolver(kube_api_client, {"worker": "group=a"})
    assert r.cluster_spec().num_tasks("worker") == 2
    assert r.port("worker") == 8470  # TensorFlow's default port outside kubetrain


def test_order_is_completion_index_then_name(kube_emulator: KubeEmulator, kube_api_client: Any) -> None:
    index = "batch.kubernetes.io/job-completion-index"
    # names sort differently from the indexes: "w-10-..." < "w-2-..." < "w-9-..."
    make_pod(kube_emulator, "w-2-zzz", {"app": "t", index: "2"})
    make_pod(kube_emulator, "w-10-aaa", {"app": "t", index: "10"})
    make_pod(kube_emulator, "w-9-mmm", {"app": "t", index: "9"})
    make_pod(kube_emulator, "a-no-index", {"app": "t"})
    make_pod(kube_emulator, "kf", {"app": "t", "training.kubeflow.org/replica-index": "0"})
    pods = resolver(kube_api_client, {"worker": ["app=t"]}).pods()["worker"]
    assert [p.name for p in pods] == ["kf", "w-2-zzz", "w-9-mmm", "w-10-aaa", "a-no-index"]
    assert [p.index for p in pods] == [0, 2, 9, 10, None]


def test_cluster_spec_reads_the_api_on_every_call(kube_emulator: KubeEmulator, kube_api_client: Any) -> None:
    make_pod(kube_emulator, "w-0", {"app": "t"})
    r = resolver(kube_api_client, {"worker": ["app=t"]})
    assert r.cluster_spec().num_tasks("worker") == 1
    make_pod(kube_emulator, "w-1", {"app": "t"})
    kube_emulator.clear_requests()
    assert r.cluster_spec().num_tasks("worker") == 2
    assert kube_emulator.count_requests("GET", r"/pods$") == 1


@pytest.mark.parametrize("phase", ["Pending", "Succeeded", "Failed"])
def test_a_matched_pod_not_running_is_a_runtime_error(
    kube_emulator: KubeEmulator, kube_api_client: Any, phase: str
) -> None:
    make_pod(kube_emulator, "w-0", {"app": "t"})
    make_pod(kube_emulator, "w-1", {"app": "t"}, phase=phase)
    r = resolver(kube_api_client, {"worker": ["app=t"]})
    with pytest.raises(RuntimeError, match=f'Pod "w-1" is not running; phase: "{phase}"'):
        r.cluster_spec()
    with pytest.raises(RuntimeError):
        r.master("worker", 0)  # master() resolves the cluster too


def test_a_replaced_pods_terminated_predecessor_is_ignored(kube_emulator: KubeEmulator, kube_api_client: Any) -> None:
    index = "batch.kubernetes.io/job-completion-index"
    make_pod(kube_emulator, "w-0-old", {"app": "t", index: "0"}, phase="Failed")
    make_pod(kube_emulator, "w-0-new", {"app": "t", index: "0"})
    make_pod(kube_emulator, "w-1-abc", {"app": "t", index: "1"})
    r = resolver(kube_api_client, {"worker": ["app=t"]}, tf_server_port=1)
    assert r.cluster_spec().job_tasks("worker") == [f"{ip_of(kube_emulator, n)}:1" for n in ("w-0-new", "w-1-abc")]
    # no replacement yet: the failed pod is the index's only pod, and the contract's error stands
    kube_emulator.delete("pods", "w-0-new")
    with pytest.raises(RuntimeError, match='"w-0-old" is not running'):
        r.cluster_spec()


def test_master_with_and_without_rpc_layer(kube_emulator: KubeEmulator, kube_api_client: Any) -> None:
    for name in ("w-0", "w-1"):
        make_pod(kube_emulator, name, {"app": "t"})
    ip1 = ip_of(kube_emulator, "w-1")
    r = resolver(kube_api_client, {"worker": ["app=t"]}, tf_server_port=2222)
    assert r.rpc_layer == "grpc"  # TensorFlow's default
    assert r.master() == ""  # no task known: TensorFlow's answer
    assert r.master("worker", 1) == f"grpc://{ip1}:2222"
    assert r.master("worker", 1, rpc_layer="grpc+verbs") == f"grpc+verbs://{ip1}:2222"
    r.task_type, r.task_id = "worker", 1
    assert r.master() == f"grpc://{ip1}:2222"
    assert r.master(task_id=0) == f"grpc://{ip_of(kube_emulator, 'w-0')}:2222"
    r.rpc_layer = None
    assert r.master() == f"{ip1}:2222"
    r = resolver(kube_api_client, {"worker": ["app=t"]}, tf_server_port=2222, rpc_layer=None)
    assert r.master("worker", 0) == f"{ip_of(kube_emulator, 'w-0')}:2222"
    assert r.environment == ""
    with pytest.raises(ValueError, match="no task 5"):
        r.master("worker", 5)


def test_ipv6_pod_addresses_are_bracketed(kube_emulator: KubeEmulator, kube_api_client: Any) -> None:
    kube_emulator.create({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "v6", "namespace": NS, "labels": {"app": "t"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running", "podIP": "fd00:10:244::5"},
    })  # fmt: skip
    assert resolver(kube_api_client, {"worker": ["app=t"]}, tf_server_port=2222).master("worker", 0) == (
        "grpc://[fd00:10:244::5]:2222"
    )


def test_default_mapping_outside_kubetrain_is_tensorflows(kube_emulator: KubeEmulator, kube_api_client: Any) -> None:
    make_pod(kube_emulator, "tf-0", {"job-name": "tensorflow"})
    r = resolver(kube_api_client)
    assert r.job_to_label_mapping == DEFAULT_MAPPING
    assert r.cluster_spec().as_dict() == {"worker": [f"{ip_of(kube_emulator, 'tf-0')}:8470"]}
    kube_emulator.clear_requests()
    assert (r.task_type, r.task_id) == (None, None)  # nothing to infer it from
    assert kube_emulator.count_requests() == 0  # and no API call to find that out


# -- the client: ImportError, kubeconfig, namespaces, TensorFlow-style clients -----------------------------


def test_import_error_without_the_kubernetes_client(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "kubernetes" or m.startswith("kubernetes.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # `import kubernetes` raises ImportError
    with pytest.raises(ImportError, match="Kubernetes Python client must be installed"):
        KubernetesClusterResolver({"worker": ["app=t"]})

    class ListsPods:  # what TensorFlow's tests pass: anything with its list call
        def list_pod_for_all_namespaces(self, label_selector: str) -> dict[str, Any]:
            pod = {"metadata": {"name": "p"}, "status": {"phase": "Running", "podIP": "10.0.0.7"}}
            return {"items": [pod] if label_selector == "app=t" else []}

    r = KubernetesClusterResolver({"worker": ["app=t"]}, 2222, override_client=ListsPods(), environ={})
    assert r.cluster_spec().as_dict() == {"worker": ["10.0.0.7:2222"]}
    assert r.master("worker", 0) == "grpc://10.0.0.7:2222"


def test_kubeconfig_namespace_and_all_namespaces(
    kube_emulator: KubeEmulator, kube_config_file: Path, kube_api_client: Any
) -> None:
    k8s.CoreV1Api(kube_api_client).create_namespace({"metadata": {"name": "team"}})
    make_pod(kube_emulator, "here", {"app": "t"})
    make_pod(kube_emulator, "there", {"app": "t"}, namespace="team")
    # its own client from the kubeconfig (not the process-wide default configuration); its namespace
    r = KubernetesClusterResolver({"worker": ["app=t"]}, 1, kubeconfig=kube_config_file, environ={})
    assert r.namespace == NS
    assert r.cluster_spec().job_tasks("worker") == [f"{ip_of(kube_emulator, 'here')}:1"]
    r = KubernetesClusterResolver({"worker": ["app=t"]}, 1, kubeconfig=kube_config_file, namespace="team", environ={})
    assert r.cluster_spec().job_tasks("worker") == [f"{ip_of(kube_emulator, 'there', 'team')}:1"]
    r = resolver(kube_api_client, {"worker": ["app=t"]}, environ={"POD_NAMESPACE": "team"})
    assert r.namespace == "team"
    r = resolver(kube_api_client, {"worker": ["app=t"]}, all_namespaces=True)
    assert r.cluster_spec().num_tasks("worker") == 2
    # an ApiClient is accepted as the override too
    r = KubernetesClusterResolver({"worker": ["app=t"]}, 1, override_client=kube_api_client, environ={})
    assert r.cluster_spec().num_tasks("worker") == 1


def test_forbidden_is_retried_then_explained(kube_emulator: KubeEmulator, kube_api_client: Any) -> None:
    make_pod(kube_emulator, "w-0", {"app": "t"})
    r = resolver(kube_api_client, {"worker": ["app=t"]}, access_timeout=10)
    kube_emulator.fail_next("GET", r"/pods$", status=403, times=2)  # the RoleBinding arrives a moment late
    assert r.cluster_spec().num_tasks("worker") == 1
    r = resolver(kube_api_client, {"worker": ["app=t"]}, access_timeout=0.3)
    kube_emulator.fail_next("GET", r"/pods$", status=403, times=100)
    with pytest.raises(PermissionError, match="kubetrain rbac"):
        r.cluster_spec()
    kube_emulator.clear_faults()
    kube_emulator.fail_next("GET", r"/pods$", status=404, times=1)  # anything else is not retried
    with pytest.raises(k8s.ApiException):
        r.cluster_spec()


def test_wait_until_every_pod_runs(kube_emulator: KubeEmulator, kube_api_client: Any) -> None:
    make_pod(kube_emulator, "w-0", {"app": "t"})
    make_pod(kube_emulator, "w-1", {"app": "t"}, phase="Pending")
    r = resolver(kube_api_client, {"worker": ["app=t"]})
    with pytest.raises(TimeoutError, match='"w-1" is not running'):
        r.wait(timeout=0.2, interval=0.05)
    kube_emulator.set_pod_phase(NS, "w-1", "Running")
    assert r.wait(timeout=5, interval=0.05).num_tasks("worker") == 2


# -- inference of the task inside kubetrain replicas -------------------------------------------------------


def kubetrain_env(
    job: str, role: str, index: int, cluster: dict[str, Any], framework: str = "tensorflow"
) -> dict[str, str]:
    return {
        "KUBETRAIN_JOB": job,
        "KUBETRAIN_FRAMEWORK": framework,
        "KUBETRAIN_ROLE": role,
        "KUBETRAIN_REPLICA_INDEX": str(index),
        "KUBETRAIN_CLUSTER": json.dumps(cluster),
    }


CLUSTER = {
    "chief": {"count": 1, "address": "tf-chief-{index}.tf:2222"},
    "worker": {"count": 2, "address": "tf-worker-{index}.tf:2222"},
    "evaluator": {"count": 1, "address": "tf-evaluator-{index}.tf:2222"},
}


def kubetrain_pods(kube: KubeEmulator, job: str = "tf") -> None:
    index = "batch.kubernetes.io/job-completion-index"
    for role, n in (("chief", 1), ("worker", 2), ("evaluator", 1)):
        for i in range(n):
            labels = {"kubetrain.dev/job": job, "kubetrain.dev/role": role, index: str(i)}
            make_pod(kube, f"{job}-{role}-{i}-x{i}", labels)


def test_task_inferred_from_the_env_contract_without_an_api_call(
    kube_emulator: KubeEmulator, kube_api_client: Any
) -> None:
    kubetrain_pods(kube_emulator)
    make_pod(kube_emulator, "other-worker-0", {"kubetrain.dev/job": "other", "kubetrain.dev/role": "worker"})
    env = kubetrain_env("tf", "worker", 1, CLUSTER)
    r = resolver(kube_api_client, environ=env)
    kube_emulator.clear_requests()
    assert (r.task_type, r.task_id) == ("worker", 1)
    assert kube_emulator.count_requests() == 0
    # the mapping: a job type per role of this job, TensorFlow's cluster roles only; the port from the env
    assert r.job_to_label_mapping == {
        "chief": ["kubetrain.dev/job=tf,kubetrain.dev/role=chief"],
        "worker": ["kubetrain.dev/job=tf,kubetrain.dev/role=worker"],
    }
    assert r.master() == f"grpc://{ip_of(kube_emulator, 'tf-worker-1-x1')}:2222"
    assert r.tf_config()["task"] == {"type": "worker", "index": 1}
    # the evaluator is a task outside the cluster, as in TF_CONFIG
    r = resolver(kube_api_client, environ=kubetrain_env("tf", "evaluator", 0, CLUSTER))
    assert (r.task_type, r.task_id) == ("evaluator", 0)
    assert "evaluator" not in r.cluster_spec().jobs
    # set explicitly, as with TensorFlow's resolver: that wins
    r.task_type, r.task_id = "chief", 0
    assert (r.task_type, r.task_id) == ("chief", 0)


def test_task_inferred_from_the_own_pod_with_a_custom_mapping(
    kube_emulator: KubeEmulator, kube_api_client: Any
) -> None:
    kubetrain_pods(kube_emulator)
    mapping = {"worker": ["kubetrain.dev/role=chief", "kubetrain.dev/role=worker"]}  # chief first: one job type
    r = resolver(kube_api_client, mapping, environ=kubetrain_env("tf", "worker", 1, CLUSTER))
    assert (r.task_type, r.task_id) == ("worker", 2)  # found by its labels: after the chief and worker 0
    assert r.port("worker") == 2222
    r = resolver(kube_api_client, mapping, environ=kubetrain_env("tf", "chief", 0, CLUSTER))
    assert (r.task_type, r.task_id) == ("worker", 0)
    # a pod of another kubetrain job with the same role and index is not this one
    r = resolver(kube_api_client, mapping, environ=kubetrain_env("elsewhere", "worker", 1, CLUSTER))
    assert (r.task_type, r.task_id) == (None, None)
    # pods that are not kubetrain's: found by name (HOSTNAME is the pod name unless the pod sets one)
    for name in ("tfjob-worker-0", "tfjob-worker-1"):
        make_pod(kube_emulator, name, {"app": "tfjob"})
    r = resolver(kube_api_client, {"worker": ["app=tfjob"]}, environ={"HOSTNAME": "tfjob-worker-1"})
    assert (r.task_type, r.task_id) == ("worker", 1)
    r = resolver(kube_api_client, {"worker": ["app=tfjob"]}, environ={"POD_NAME": "tfjob-worker-0"})
    assert (r.task_type, r.task_id) == ("worker", 0)


# -- accelerators --------------------------------------------------------------------------------------------


def test_num_accelerators_reads_the_pods_resources(kube_emulator: KubeEmulator, kube_api_client: Any) -> None:
    idx = "batch.kubernetes.io/job-completion-index"
    make_pod(kube_emulator, "gpu-0", {"app": "g", idx: "0"}, limits=[{"nvidia.com/gpu": "4", "cpu": "8"}])
    # MIG slices are devices of their own; containers add up
    make_pod(kube_emulator, "gpu-1", {"app": "g", idx: "1"},
             limits=[{"nvidia.com/mig-1g.5gb": "2"}, {"nvidia.com/gpu": "1"}])  # fmt: skip
    make_pod(kube_emulator, "tpu-0", {"app": "t"}, limits=[{"google.com/tpu": "8"}])
    make_pod(kube_emulator, "cpu-0", {"app": "c"}, limits=[{"cpu": "2", "memory": "1Gi"}])
    make_pod(kube_emulator, "frac-0", {"app": "f"}, annotations={"gpu-fraction": "0.5"})
    r = resolver(kube_api_client, {"gpu": ["app=g"], "tpu": ["app=t"], "cpu": ["app=c"], "frac": ["app=f"]})
    assert r.num_accelerators("gpu", 0) == {"GPU": 4}
    assert r.num_accelerators("gpu", 1) == {"GPU": 3}
    assert r.num_accelerators("tpu", 0) == {"TPU": 8}
    assert r.num_accelerators("cpu", 0) == {}
    assert r.num_accelerators("frac", 0) == {"GPU": 1}  # a Run:ai GPU share is one device
    assert r.num_accelerators() == {}  # no task known
    r.task_type, r.task_id = "gpu", 1
    assert r.num_accelerators(config_proto=object()) == {"GPU": 3}  # own task; a config that limits nothing
    with pytest.raises(ValueError, match="no job type"):
        r.num_accelerators("nope", 0)
    with pytest.raises(ValueError, match="no task 2"):
        r.num_accelerators("gpu", 2)


def test_num_accelerators_of_the_own_kubetrain_pod(kube_emulator: KubeEmulator, kube_api_client: Any) -> None:
    idx = "batch.kubernetes.io/job-completion-index"
    for i in range(2):
        labels = {"kubetrain.dev/job": "tf", "kubetrain.dev/role": "worker", idx: str(i)}
        make_pod(kube_emulator, f"tf-worker-{i}-x", labels, limits=[{"nvidia.com/gpu": str(i + 1)}])
    r = resolver(kube_api_client, environ=kubetrain_env("tf", "worker", 1, {"worker": CLUSTER["worker"]}))
    assert r.num_accelerators() == {"GPU": 2}


def test_count_accelerators() -> None:
    mixed = {"nvidia.com/gpu": "8", "amd.com/gpu": "1", "google.com/tpu": "4"}
    assert count_accelerators(mixed) == {"GPU": 9, "TPU": 4}
    assert count_accelerators({"nvidia.com/mig-3g.20gb": "1", "nvidia.com/mig-1g.5gb": "2"}) == {"GPU": 3}
    assert count_accelerators({"nvidia.com/gpumem": "4000", "cpu": "500m"}) == {}
    pod = PodInfo.from_api({"metadata": {"name": "p", "labels": {"volcano.sh/task-index": "3"}}, "status": {}})
    assert pod.index == 3 and pod.resources == ()


# -- the same TF_CONFIG as the env contract, for the pods of a rendered job --------------------------------


def container_env(pod: dict[str, Any]) -> dict[str, str]:
    """The environment the pod's container gets: its `env` values, the completion index the kubelet
    resolves, then kubetrain's start-up script run by a real POSIX shell (it exports the index-dependent
    variables, TF_CONFIG among them, and execs the program: here, a dump of the environment)."""
    container = pod["spec"]["containers"][0]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        elif "job-completion-index" in json.dumps(var.get("valueFrom")):
            env[var["name"]] = pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
    dump = [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"]
    command = [expand(word, env) for word in container["command"]]  # the kubelet's `$(VAR)` expansion
    out = subprocess.run([*command, *dump], env=env, capture_output=True, text=True, check=True)
    result: dict[str, str] = json.loads(out.stdout)
    return result


def test_same_tf_config_from_env_and_kubernetes_for_a_rendered_job(
    kube_emulator: KubeEmulator, kube_api_client: Any
) -> None:
    job = load(str(ROOT / "examples" / "tensorflow-multiworker" / "job.yaml"))
    rendered = render_manifests(job, "job", NS, api_access=True)
    for obj in rendered.objects:
        kube_emulator.create(obj)
    pods = []
    for obj in rendered.objects:
        if obj["kind"] == "Job":
            for pod in kube_emulator.create_job_pods(NS, obj["metadata"]["name"]):
                kube_emulator.set_pod_phase(NS, pod["metadata"]["name"], "Running")
                pods.append(kube_emulator.get("pods", pod["metadata"]["name"]))
    assert len(pods) == 3  # chief + 2 workers
    # what DNS would answer: <hostname>.<subdomain> is the pod with that hostname
    ip_of_name = {f"{p['spec']['hostname']}.{p['spec']['subdomain']}": p["status"]["podIP"] for p in pods}

    def by_ip(config: dict[str, Any]) -> dict[str, Any]:
        cluster = {
            role: [f"{ip_of_name[a.rsplit(':', 1)[0]]}:{a.rsplit(':', 1)[1]}" for a in addresses]
            for role, addresses in config["cluster"].items()
        }
        return {**config, "cluster": cluster}

    core = k8s.CoreV1Api(kube_api_client)
    seen = set()
    for pod in pods:
        env = container_env(pod)
        tf_config = json.loads(env["TF_CONFIG"])  # what kubetrain gives this replica on Kubernetes
        assert EnvClusterResolver(environ=env).tf_config() == tf_config
        k8s_resolver = KubernetesClusterResolver(override_client=core, environ=env)
        assert k8s_resolver.tf_config() == by_ip(tf_config)
        seen.add((tf_config["task"]["type"], tf_config["task"]["index"]))
    assert seen == {("chief", 0), ("worker", 0), ("worker", 1)}


def test_resolve_command_from_the_api(
    kube_emulator: KubeEmulator,
    kube_config_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`kubetrain resolve --source kubernetes` in a replica: the kubeconfig's cluster, the replica's task."""
    kubetrain_pods(kube_emulator)
    monkeypatch.setenv("KUBECONFIG", str(kube_config_file))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for name, value in kubetrain_env("tf", "worker", 0, CLUSTER).items():
        monkeypatch.setenv(name, value)
    assert resolve_main(["--source", "kubernetes", "--format", "tf-config"]) == 0
    config = json.loads(capsys.readouterr().out)
    assert config["task"] == {"type": "worker", "index": 0}
    assert config["cluster"]["worker"] == [f"{ip_of(kube_emulator, f'tf-worker-{i}-x{i}')}:2222" for i in range(2)]
    kube_emulator.set_pod_phase(NS, "tf-chief-0-x0", "Failed", exit_code=1)
    assert resolve_main(["--source", "kubernetes", "--format", "tf-config"]) == 1
    assert 'error: Pod "tf-chief-0-x0" is not running' in capsys.readouterr().err
    kube_emulator.fail_next("GET", r"/pods$", status=404, times=5)
    assert resolve_main(["--source", "kubernetes"]) == 1  # an API error: a message, not a traceback
    assert capsys.readouterr().err.startswith("error: ")
    assert resolve_main(["--source", "kubernetes", "--format", "hostfile"]) == 1
    assert "env contract" in capsys.readouterr().err
