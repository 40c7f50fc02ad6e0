"""The least the in-cluster resolver needs: read the pods of its own namespace.

A Role granting `get` and `list` on `pods` (core group) in the job's namespace, and a RoleBinding giving
it to the service account the job's pods run as. Without a service account of the job's own
(`spec.serviceAccount`), a dedicated ServiceAccount `<job>-resolver` is created, so the grant reaches
this job's pods and no others (binding the namespace's `default` account would give it to every pod
that runs as it). `EnvClusterResolver` needs none of this: it makes no API call.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ....contract.labels import JOB_LABEL
from ....contract.naming import is_dns_subdomain, label_value

__all__ = ["RESOLVER_RULES", "rbac_manifest", "rbac_objects", "resolver_object_name"]

RESOLVER_RULES: list[dict[str, Any]] = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
"""What `KubernetesClusterResolver` calls: list pods by label selector (and get one)."""

_SUFFIX = "-resolver"


def resolver_object_name(base: str) -> str:
    """Name of the Role, RoleBinding and (when created) ServiceAccount: `<base>-resolver`, where `base` is
    the job's root object name (the render's, a DNS label of at most 63 characters)."""
    name = f"{base}{_SUFFIX}"
    if not base or not is_dns_subdomain(name):
        raise ValueError(
            f"{name!r} is not a valid object name: pass the job's object name (the render's base name) as object_name"
        )
    return name


def rbac_objects(
    job_name: str, namespace: str, service_account: str | None = None, *, object_name: str | None = None
) -> list[dict[str, Any]]:
    """[ServiceAccount (only when `service_account` is None),] Role, RoleBinding — plain dicts.

    `job_name`: the job's name; the objects get the `kubetrain.dev/job` label the render gives the job's
    other objects. `namespace`: where the pods run; required, since a RoleBinding's ServiceAccount
    subject names its namespace. `service_account`: the account the pods run as (`spec.serviceAccount`);
    None: a dedicated `<job>-resolver` account, which the pods must then use (`serviceAccountName`).
    `object_name`: the job's root object name when it differs from `job_name` (the render shortens and
    sanitizes long or invalid names); the objects are named `<object_name>-resolver`.
    """
    if not namespace:
        raise ValueError("the namespace is required: the RoleBinding's subject is a ServiceAccount in it")
    name = resolver_object_name(object_name or job_name)
    labels = {"app.kubernetes.io/managed-by": "kubetrain", JOB_LABEL: label_value(job_name)}

    def meta() -> dict[str, Any]:
        return {"name": name, "namespace": namespace, "labels": dict(labels)}

    objects: list[dict[str, Any]] = []
    account = service_account
    if account is None:
        account = name
        objects.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta()})
    objects.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta(),
            "rules": copy.deepcopy(RESOLVER_RULES),
        }
    )
    objects.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        }
    )
    return objects


def rbac_manifest(job_name: str, namespace: str, service_account: str | None = None, output: str = "yaml") -> str:
    """`rbac_objects` as text for `kubetrain rbac`: YAML documents (`---` separated) or a JSON List."""
    objects = rbac_objects(job_name, namespace, service_account)
    if output == "json":
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2) + "\n"
    if output != "yaml":
        raise ValueError(f"unknown output {output!r}: yaml or json")
    import yaml

    return "".join("---\n" + yaml.safe_dump(obj, sort_keys=False) for obj in objects)
