"""spec.apiAccess: the replicas may read the Kubernetes API (KubernetesClusterResolver) on every flavor."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.backends.kubernetes.flavors import FLAVORS
from kubetrain.jobspec import from_dict
from tests.support.manifest_schemas import assert_valid
from tests.support.render import render


def job(**spec: Any) -> Any:
    return from_dict({
        "metadata": {"name": "tfjob", "namespace": "ml"},
        "spec": {"framework": "tensorflow", "image": "tensorflow/tensorflow:2.21.0",
                 "run": {"python": ["train.py"]}, "roles": {"chief": {}, "worker": {"replicas": 2}}, **spec},
    })


def pod_specs(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every pod template in the objects, wherever the flavor keeps it."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "containers" in node and isinstance(node["containers"], list):
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(objects)
    return found


@pytest.mark.parametrize("flavor", FLAVORS)
def test_api_access_renders_a_role_to_list_pods_and_pods_use_its_account(flavor: str) -> None:
    objects = render(job(apiAccess=True), flavor=flavor)
    assert_valid(objects)
    by_kind = {o["kind"]: o for o in objects}
    role = by_kind["Role"]
    assert role["metadata"]["namespace"] == "ml"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    account = by_kind["ServiceAccount"]["metadata"]["name"]
    binding = by_kind["RoleBinding"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "ml"}]
    for pod in pod_specs(objects):
        assert pod["serviceAccountName"] == account
        assert pod["automountServiceAccountToken"] is True


def test_api_access_binds_the_jobs_own_service_account() -> None:
    objects = render(job(apiAccess=True, serviceAccount="trainer"), flavor="jobset")
    kinds = [o["kind"] for o in objects]
    assert "ServiceAccount" not in kinds  # the user's account exists already
    binding = next(o for o in objects if o["kind"] == "RoleBinding")
    assert binding["subjects"][0]["name"] == "trainer"
    assert all(p["serviceAccountName"] == "trainer" for p in pod_specs(objects))


def test_without_api_access_no_rbac_and_no_token() -> None:
    objects = render(job(), flavor="job")
    assert not {"Role", "RoleBinding", "ServiceAccount"} & {o["kind"] for o in objects}
    assert all(p["automountServiceAccountToken"] is False for p in pod_specs(objects))
