"""The RBAC of the in-cluster resolver: valid objects, accepted by the API, granting exactly what the
resolver's requests need (checked against the requests it really makes) and nothing more."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml
from kube_emulator import KubeEmulator
from kubernetes import client as k8s

from kubetrain.backends.kubernetes.flavors import FLAVORS
from kubetrain.backends.kubernetes.manifests.rbac import RESOLVER_RULES, rbac_manifest, rbac_objects
from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.jobspec import from_dict
from kubetrain.plan import replica_counts
from kubetrain.resolver import KubernetesClusterResolver
from tests.support.manifest_schemas import validate_manifest

NS = "default"


def test_objects_with_a_dedicated_service_account() -> None:
    sa, role, binding = rbac_objects("train-x", "team-a")
    assert [o["kind"] for o in (sa, role, binding)] == ["ServiceAccount", "Role", "RoleBinding"]
    for obj in (sa, role, binding):
        assert obj["metadata"]["name"] == "train-x-resolver"
        assert obj["metadata"]["namespace"] == "team-a"
        assert obj["metadata"]["labels"] == {
            "app.kubernetes.io/managed-by": "kubetrain",
            "kubetrain.dev/job": "train-x",
        }
        assert validate_manifest(obj) == []
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "train-x-resolver"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "train-x-resolver", "namespace": "team-a"}]


def test_objects_for_the_jobs_own_service_account() -> None:
    objects = rbac_objects("train-x", "team-a", "trainer")
    assert [o["kind"] for o in objects] == ["Role", "RoleBinding"]  # the account is the user's
    assert objects[1]["subjects"] == [{"kind": "ServiceAccount", "name": "trainer", "namespace": "team-a"}]
    assert all(validate_manifest(o) == [] for o in objects)
    # the rules are copies: changing the returned objects does not change the next ones
    objects[0]["rules"][0]["verbs"].append("delete")
    assert rbac_objects("train-x", "team-a", "trainer")[0]["rules"] == RESOLVER_RULES
    assert RESOLVER_RULES[0]["verbs"] == ["get", "list"]


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="namespace is required"):
        rbac_objects("train-x", "")
    with pytest.raises(ValueError, match="not a valid object name"):
        rbac_objects("", "default")
    with pytest.raises(ValueError, match="pass the job's object name"):
        rbac_objects("My Job", "default")
    with pytest.raises(ValueError, match="unknown output"):
        rbac_manifest("train-x", "default", output="toml")


def test_named_and_labelled_like_the_rendered_job() -> None:
    """A job name the render has to shorten: the objects take the render's base name, and the job label
    the render puts on every object of the job (so `-l kubetrain.dev/job=...` finds them too)."""
    name = "Nightly_Run " + "x" * 80
    job = from_dict({
        "apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": {"name": "placeholder"},
        "spec": {"framework": "tensorflow", "image": "tf", "run": {"python": ["t.py"]}, "replicas": 2},
    })  # fmt: skip
    rendered = render_manifests(job, "job", NS, name=name, api_access=True)
    base = FLAVORS["job"].layout(name, replica_counts(job.spec)).base
    objects = rbac_objects(name, NS, object_name=base)
    job_labels = {o["metadata"]["labels"]["kubetrain.dev/job"] for o in rendered.objects}
    assert {o["metadata"]["labels"]["kubetrain.dev/job"] for o in objects} == job_labels
    assert all(o["metadata"]["name"] == f"{base}-resolver" and validate_manifest(o) == [] for o in objects)


def test_manifest_text_round_trips() -> None:
    objects = rbac_objects("train-x", "default")
    assert list(yaml.safe_load_all(rbac_manifest("train-x", "default"))) == objects
    assert json.loads(rbac_manifest("train-x", "default", output="json"))["items"] == objects


def _allowed(rules: list[dict[str, Any]], verb: str, resource: str) -> bool:
    return any("" in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


def test_the_role_covers_exactly_the_resolvers_requests(kube_emulator: KubeEmulator, kube_api_client: Any) -> None:
    """Every request the resolver makes (cluster, inference of the task, accelerators) is one the Role
    allows in the job's namespace; the Role allows nothing else."""
    objects = rbac_objects("tf", NS)
    for obj in objects:
        kube_emulator.create(obj)  # the API accepts them
    index = "batch.kubernetes.io/job-completion-index"
    for i in range(2):
        kube_emulator.create({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"tf-worker-{i}-x", "namespace": NS,
                         "labels": {"kubetrain.dev/job": "tf", "kubetrain.dev/role": "worker", index: str(i)}},
            "spec": {"serviceAccountName": "tf-resolver", "containers": [{"name": "c", "image": "busybox"}]},
        })  # fmt: skip
        kube_emulator.set_pod_phase(NS, f"tf-worker-{i}-x", "Running")
    env = {
        "KUBETRAIN_JOB": "tf",
        "KUBETRAIN_FRAMEWORK": "tensorflow",
        "KUBETRAIN_ROLE": "worker",
        "KUBETRAIN_REPLICA_INDEX": "1",
        "KUBETRAIN_CLUSTER": json.dumps({"worker": {"count": 2, "address": "tf-worker-{index}.tf:2222"}}),
    }
    core = k8s.CoreV1Api(kube_api_client)
    kube_emulator.clear_requests()
    default = KubernetesClusterResolver(override_client=core, environ=env)
    custom = KubernetesClusterResolver({"w": ["kubetrain.dev/role=worker"]}, override_client=core, environ=env)
    for r in (default, custom):
        r.cluster_spec()
        r.master()
        r.num_accelerators()
        r.wait(timeout=1)
    assert custom.task_type == "w"
    requests = kube_emulator.requests
    assert requests
    role = next(o for o in objects if o["kind"] == "Role")
    for req in requests:
        m = re.fullmatch(r"/api/v1/namespaces/(?P<ns>[^/]+)/pods(/(?P<name>[^/]+))?", req.path)
        assert m and m["ns"] == NS, req.path  # pods of this namespace, nothing else
        verb = {"GET": "get" if m["name"] else "list"}.get(req.method)
        assert verb is not None and _allowed(role["rules"], verb, "pods"), (req.method, req.path)
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
