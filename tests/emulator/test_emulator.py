"""The Kubernetes API emulator, exercised through the official client the way the backend uses it.

Each test pins down one behaviour of the real API server that kubetrain's Kubernetes backend relies
on; if the emulator drifted from it, backend tests would pass against a server that does not exist.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.rest import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError

if TYPE_CHECKING:
    from kube_emulator import KubeEmulator

NS = "default"
JOBSET = "jobsets.jobset.x-k8s.io"


def pod_body(name: str, labels: dict[str, str] | None = None, containers: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": f"c{i}" if i else "main", "image": "python:3.11"} for i in range(containers)],
        },
    }


def job_body(name: str, completions: int = 2, indexed: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kubetrain.io/job": name}},
        "spec": {
            "completions": completions,
            "parallelism": completions,
            "completionMode": "Indexed" if indexed else "NonIndexed",
            "template": {
                "metadata": {"labels": {"kubetrain.io/job": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "subdomain": name,
                    "containers": [{"name": "trainer", "image": "python:3.11"}],
                },
            },
        },
    }


def jobset_body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {"app": "train"}},
        "spec": {"suspend": False, "replicatedJobs": [{"name": "workers", "replicas": 1, "template": {}}]},
    }


def status_body(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
    return body


@pytest.fixture
def core(kube_api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(kube_api_client)


@pytest.fixture
def batch(kube_api_client: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(kube_api_client)


@pytest.fixture
def custom(kube_api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube_api_client)


def collect(func: Callable[..., Any], *args: Any, n: int, **kwargs: Any) -> list[tuple[str, dict[str, Any]]]:
    """The first ``n`` watch events (type, raw object); timeoutSeconds only as a safety net."""
    w = watch.Watch()
    events = []
    for event in w.stream(func, *args, timeout_seconds=5, **kwargs):
        events.append((event["type"], event["raw_object"]))
        if len(events) == n:
            w.stop()
    return events


def in_thread(fn: Callable[[], None], delay: float) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        fn()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


# ---------------------------------------------------------------------------------------------- discovery


def test_discovery_lists_core_batch_and_installed_crds(kube_api_client: client.ApiClient) -> None:
    assert client.CoreApi(kube_api_client).get_api_versions().versions == ["v1"]
    groups = {g.name: g for g in client.ApisApi(kube_api_client).get_api_versions().groups}
    assert {
        "batch",
        "rbac.authorization.k8s.io",
        "jobset.x-k8s.io",
        "kubeflow.org",
        "batch.volcano.sh",
        "scheduling.volcano.sh",
        "kueue.x-k8s.io",
    } <= set(groups)
    # Kueue serves v1beta1 and v1beta2; v1beta2 has the higher priority.
    assert groups["kueue.x-k8s.io"].preferred_version.version == "v1beta2"
    core = {r.name: r for r in client.CoreV1Api(kube_api_client).get_api_resources().resources}
    assert core["pods"].namespaced and core["pods"].kind == "Pod" and "watch" in core["pods"].verbs
    assert core["pods/log"].verbs == ["get"]
    assert not core["namespaces"].namespaced
    jobs = {r.name: r for r in client.BatchV1Api(kube_api_client).get_api_resources().resources}
    assert set(jobs["jobs/status"].verbs) == {"get", "patch", "update"}


@pytest.mark.kube_crds(JOBSET)
def test_dynamic_client_sees_exactly_the_installed_crds(kube_dynamic_client: Any) -> None:
    jobsets = kube_dynamic_client.resources.get(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet")
    assert jobsets.namespaced and "status" in jobsets.subresources
    created = jobsets.create(body=jobset_body("js"), namespace=NS)
    assert created.metadata.namespace == NS and created.metadata.uid
    with pytest.raises(ResourceNotFoundError):
        kube_dynamic_client.resources.get(api_version="kubeflow.org/v1", kind="PyTorchJob")


def test_crds_can_be_installed_and_removed_at_runtime(
    kube_emulator: KubeEmulator, kube_api_client: client.ApiClient, custom: client.CustomObjectsApi
) -> None:
    def served() -> set[str]:
        return {g.name for g in client.ApisApi(kube_api_client).get_api_versions().groups}

    custom.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", jobset_body("js"))
    kube_emulator.uninstall_crds([JOBSET])
    assert "jobset.x-k8s.io" not in served()
    with pytest.raises(ApiException) as exc:
        custom.list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets")
    assert exc.value.status == 404
    kube_emulator.install_crds([JOBSET])
    assert "jobset.x-k8s.io" in served()
    # Removing a CRD removed its objects.
    assert custom.list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets")["items"] == []
    crd = client.ApiextensionsV1Api(kube_api_client).read_custom_resource_definition(JOBSET)
    assert crd.spec.group == "jobset.x-k8s.io"
    assert {c.type: c.status for c in crd.status.conditions}["Established"] == "True"


# ---------------------------------------------------------------------------------------------- CRUD semantics


def test_create_answers_201_and_fills_server_fields(core: client.CoreV1Api) -> None:
    pod, code, _ = core.create_namespaced_pod_with_http_info(NS, pod_body("p"))
    assert code == 201
    assert pod.metadata.namespace == NS and pod.metadata.uid and pod.metadata.creation_timestamp
    assert pod.status.phase == "Pending" and pod.status.qos_class == "BestEffort"
    assert pod.spec.service_account_name == "default"
    second = core.create_namespaced_pod(NS, pod_body("q"))
    assert int(second.metadata.resource_version) > int(pod.metadata.resource_version)
    listed = core.list_namespaced_pod(NS)
    assert [p.metadata.name for p in listed.items] == ["p", "q"]
    assert int(listed.metadata.resource_version) >= int(second.metadata.resource_version)


def test_error_statuses_carry_reason_and_details(core: client.CoreV1Api, batch: client.BatchV1Api) -> None:
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod("missing", NS)
    assert exc.value.status == 404
    body = status_body(exc.value)
    assert body["kind"] == "Status" and body["reason"] == "NotFound"
    assert body["details"] == {"name": "missing", "kind": "pods"}

    core.create_namespaced_pod(NS, pod_body("p"))
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(NS, pod_body("p"))
    assert exc.value.status == 409 and status_body(exc.value)["reason"] == "AlreadyExists"

    nameless = pod_body("x")
    del nameless["metadata"]["name"]
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(NS, nameless)
    assert exc.value.status == 422
    causes = status_body(exc.value)["details"]["causes"]
    assert causes[0]["field"] == "metadata.name" and causes[0]["reason"] == "FieldValueRequired"

    bad_job = job_body("j")
    bad_job["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    with pytest.raises(ApiException) as exc:
        batch.create_namespaced_job(NS, bad_job)
    assert exc.value.status == 422
    assert [c["field"] for c in status_body(exc.value)["details"]["causes"]] == ["spec.template.spec.restartPolicy"]

    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("nowhere", pod_body("p"))
    assert exc.value.status == 404 and status_body(exc.value)["details"]["kind"] == "namespaces"


def test_names_and_labels_are_validated_like_the_server(core: client.CoreV1Api, batch: client.BatchV1Api) -> None:
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(NS, pod_body("Trainer_0"))
    assert exc.value.status == 422
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(NS, pod_body("p", labels={"job": "x" * 64}))
    assert status_body(exc.value)["details"]["causes"][0]["field"] == "metadata.labels"
    with pytest.raises(ApiException) as exc:
        batch.create_namespaced_job(NS, job_body("j" * 64))
    assert "must be no more than 63 characters" in status_body(exc.value)["message"]


C = "spec.template.spec.containers[0].resources"


# The API server's ValidateResourceRequirements (k8s.io/kubernetes pkg/apis/core/validation): extended
# resources (a domain outside kubernetes.io) are integers in requests and limits alike and cannot be
# overcommitted; huge pages are whole pages, cannot be overcommitted, and need cpu or memory beside them.
@pytest.mark.parametrize(("resources", "fields", "message"), [
    ({"limits": {"nvidia.com/gpu": "1"}}, None, None),
    ({"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}, None, None),
    ({"requests": {"cpu": "500m", "example.kubernetes.io/x": "0.5"}}, None, None),  # native: fractions are fine
    ({"limits": {"nvidia.com/gpu": "0.5"}}, f"{C}.limits[nvidia.com/gpu]", "must be an integer"),
    ({"requests": {"example.com/x": "500m"}, "limits": {"example.com/x": "500m"}},
     f"{C}.limits[example.com/x] {C}.requests[example.com/x]", "must be an integer"),
    ({"requests": {"example.com/x": "1"}}, f"{C}.limits", "Limit must be set for non overcommitable resources"),
    ({"requests": {"example.com/x": "1"}, "limits": {"example.com/x": "2"}}, f"{C}.requests",
     "must be equal to example.com/x limit of 2"),
    ({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}, f"{C}.requests", "must be less than or equal to cpu limit"),
    ({"limits": {"hugepages-2Mi": "4Mi", "memory": "1Gi"}}, None, None),
    ({"limits": {"hugepages-2Mi": "3Mi", "memory": "1Gi"}}, f"{C}.limits[hugepages-2Mi]",
     "3Mi is not positive integer multiple of hugepages-2Mi"),
    ({"requests": {"hugepages-2Mi": "2Mi", "memory": "1Gi"}, "limits": {"hugepages-2Mi": "4Mi"}}, f"{C}.requests",
     "must be equal to hugepages-2Mi limit of 4Mi"),
    ({"limits": {"hugepages-1Gi": "1Gi"}}, C, "HugePages require cpu or memory"),
])
def test_container_resources_are_validated_like_the_server(
    batch: client.BatchV1Api, resources: dict[str, Any], fields: str | None, message: str | None
) -> None:
    """`fields`: the fields of the causes, in order, space-separated; None: accepted."""
    body = job_body("j")
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = resources
    if fields is None:
        batch.create_namespaced_job(NS, body, dry_run="All")
        return
    with pytest.raises(ApiException) as exc:
        batch.create_namespaced_job(NS, body, dry_run="All")
    assert exc.value.status == 422
    causes = status_body(exc.value)["details"]["causes"]
    assert [c["field"] for c in causes] == fields.split(), causes
    assert message is not None and all(message in c["message"] for c in causes)


@pytest.mark.parametrize(("toleration", "message"), [
    ({"key": "a", "operator": "In", "value": "x"}, 'Unsupported value: "In"'),
    ({"key": "a", "operator": "Exists", "value": "x"}, "value must be empty when `operator` is 'Exists'"),
    ({"operator": "Equal", "value": "x"}, "operator must be Exists when `key` is empty"),
])
def test_tolerations_are_validated_like_the_server(
    batch: client.BatchV1Api, toleration: dict[str, Any], message: str
) -> None:
    body = job_body("j")
    body["spec"]["template"]["spec"]["tolerations"] = [{"key": "ok", "operator": "Exists"}, toleration]
    with pytest.raises(ApiException) as exc:
        batch.create_namespaced_job(NS, body, dry_run="All")
    [cause] = status_body(exc.value)["details"]["causes"]
    assert cause["field"] == "spec.template.spec.tolerations[1].operator" and message in cause["message"]


def test_generate_name_gets_a_random_suffix(core: client.CoreV1Api) -> None:
    body = pod_body("")
    body["metadata"] = {"generateName": "trainer-"}
    names = {core.create_namespaced_pod(NS, body).metadata.name for _ in range(3)}
    assert len(names) == 3
    assert all(n.startswith("trainer-") and len(n) == len("trainer-") + 5 for n in names)


def test_update_with_a_stale_resource_version_conflicts(core: client.CoreV1Api) -> None:
    cm = core.create_namespaced_config_map(NS, {"metadata": {"name": "cfg"}, "data": {"a": "1"}})
    cm.data = {"a": "2"}
    updated = core.replace_namespaced_config_map("cfg", NS, cm)
    assert updated.data == {"a": "2"}
    cm.data = {"a": "3"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as exc:
        core.replace_namespaced_config_map("cfg", NS, cm)
    assert exc.value.status == 409 and status_body(exc.value)["reason"] == "Conflict"


def test_multi_version_crds_share_objects_across_versions(custom: client.CustomObjectsApi) -> None:
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "team"},
        "spec": {"clusterQueue": "cluster"},
    }
    custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", NS, "localqueues", queue)
    old = custom.get_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", NS, "localqueues", "team")
    assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1" and old["spec"] == {"clusterQueue": "cluster"}


def test_custom_object_update_requires_a_resource_version(custom: client.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", jobset_body("js"))
    with pytest.raises(ApiException) as exc:
        custom.replace_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", "js", jobset_body("js"))
    assert exc.value.status == 422
    kindless = jobset_body("other")
    del kindless["kind"]
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", kindless)
    assert exc.value.status == 400


def test_label_and_field_selectors(kube_emulator: KubeEmulator, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_body("a", {"role": "worker", "idx": "0"}))
    core.create_namespaced_pod(NS, pod_body("b", {"role": "worker", "idx": "1"}))
    core.create_namespaced_pod(NS, pod_body("c", {"role": "master"}))
    kube_emulator.set_pod_phase(NS, "b", "Running")

    def names(**kw: str) -> list[str]:
        return [p.metadata.name for p in core.list_namespaced_pod(NS, **kw).items]

    assert names(label_selector="role=worker") == ["a", "b"]
    assert names(label_selector="role==worker,idx!=0") == ["b"]
    assert names(label_selector="role in (master, chief)") == ["c"]
    assert names(label_selector="role notin (master)") == ["a", "b"]
    assert names(label_selector="idx") == ["a", "b"]
    assert names(label_selector="!idx") == ["c"]
    assert names(field_selector="status.phase=Running") == ["b"]
    assert names(field_selector="metadata.name!=a,status.phase=Pending") == ["c"]
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod(NS, field_selector="spec.containers=x")
    assert exc.value.status == 400
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod(NS, label_selector="role in (a")
    assert exc.value.status == 400


def test_list_pagination_with_limit_and_continue(core: client.CoreV1Api) -> None:
    for i in range(5):
        core.create_namespaced_config_map(NS, {"metadata": {"name": f"cm-{i}"}})
    first = core.list_namespaced_config_map(NS, limit=2)
    assert [c.metadata.name for c in first.items] == ["cm-0", "cm-1"]
    assert first.metadata.remaining_item_count == 3
    rest = core.list_namespaced_config_map(NS, limit=10, _continue=first.metadata._continue)
    assert [c.metadata.name for c in rest.items] == ["cm-2", "cm-3", "cm-4"]
    assert not rest.metadata._continue


# ---------------------------------------------------------------------------------------------- patches, status


def test_strategic_merge_patch_merges_containers_by_name(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_body("p", {"a": "1"}, containers=2))
    patched = core.patch_namespaced_pod(
        "p",
        NS,
        {
            "metadata": {"labels": {"b": "2", "a": None}},
            "spec": {"containers": [{"name": "c1", "image": "python:3.12"}]},
        },
    )
    assert patched.metadata.labels == {"b": "2"}
    assert [(c.name, c.image) for c in patched.spec.containers] == [("main", "python:3.11"), ("c1", "python:3.12")]
    # Only images may change on a pod.
    with pytest.raises(ApiException) as exc:
        core.patch_namespaced_pod("p", NS, {"spec": {"restartPolicy": "Always"}})
    assert exc.value.status == 422


def test_json_patch_and_merge_patch(core: client.CoreV1Api, custom: client.CustomObjectsApi) -> None:
    core.create_namespaced_config_map(NS, {"metadata": {"name": "cfg"}, "data": {"a": "1", "b": "2"}})
    cm = core.patch_namespaced_config_map(
        "cfg", NS, [{"op": "replace", "path": "/data/a", "value": "9"}, {"op": "remove", "path": "/data/b"}]
    )
    assert cm.data == {"a": "9"}
    custom.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", jobset_body("js"))
    js = custom.patch_namespaced_custom_object(
        "jobset.x-k8s.io",
        "v1alpha2",
        NS,
        "jobsets",
        "js",
        {"spec": {"suspend": True}, "metadata": {"labels": {"app": None}}},
    )
    assert js["spec"]["suspend"] is True and js["spec"]["replicatedJobs"][0]["name"] == "workers"
    assert "labels" not in js["metadata"] or "app" not in js["metadata"]["labels"]
    assert js["metadata"]["generation"] == 2
    # Custom resources do not support strategic merge patch.
    with pytest.raises(ApiException) as exc:
        custom.patch_namespaced_custom_object(
            "jobset.x-k8s.io",
            "v1alpha2",
            NS,
            "jobsets",
            "js",
            {"spec": {"suspend": False}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert exc.value.status == 415


def test_status_subresource_separates_spec_and_status(
    batch: client.BatchV1Api, custom: client.CustomObjectsApi
) -> None:
    batch.create_namespaced_job(NS, job_body("j"))
    # The main resource ignores status...
    job = batch.patch_namespaced_job("j", NS, {"status": {"active": 5}, "spec": {"suspend": True}})
    assert job.spec.suspend and job.status.active is None
    # ...and /status ignores everything else.
    job = batch.patch_namespaced_job_status("j", NS, {"status": {"active": 2}, "spec": {"suspend": False}})
    assert job.status.active == 2 and job.spec.suspend
    assert batch.read_namespaced_job_status("j", NS).status.active == 2

    custom.create_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", NS, "jobsets", {**jobset_body("js"), "status": {"restarts": 3}}
    )
    js = custom.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", "js")
    assert "status" not in js  # dropped on create
    js = custom.patch_namespaced_custom_object_status(
        "jobset.x-k8s.io", "v1alpha2", NS, "jobsets", "js", {"status": {"restarts": 1}}
    )
    assert js["status"] == {"restarts": 1}


def test_job_defaults_and_immutable_template(batch: client.BatchV1Api) -> None:
    job = batch.create_namespaced_job(NS, job_body("j"))
    uid = job.metadata.uid
    assert job.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    assert job.spec.template.metadata.labels["batch.kubernetes.io/job-name"] == "j"
    assert job.spec.backoff_limit == 6
    job.spec.template.spec.containers[0].image = "python:3.12"
    with pytest.raises(ApiException) as exc:
        batch.replace_namespaced_job("j", NS, job)
    assert exc.value.status == 422 and "field is immutable" in status_body(exc.value)["message"]


# ---------------------------------------------------------------------------------------------- watch


def test_watch_from_list_resource_version_misses_nothing(kube_emulator: KubeEmulator, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_body("before"))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod_body("between"))  # after the list, before the watch
    in_thread(lambda: kube_emulator.set_pod_phase(NS, "between", "Running"), 0.1)
    seen = []
    started = time.monotonic()
    for event in watch.Watch().stream(
        core.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=1, allow_watch_bookmarks=True
    ):
        obj = event["raw_object"]
        seen.append((event["type"], obj["metadata"].get("name"), obj.get("status", {}).get("phase")))
    assert seen == [("ADDED", "between", "Pending"), ("MODIFIED", "between", "Running"), ("BOOKMARK", None, None)]
    assert 0.9 < time.monotonic() - started < 5  # the server ends the stream at timeoutSeconds


def test_watch_without_resource_version_starts_with_current_state(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_body("a"))
    w = watch.Watch()
    events = []
    for event in w.stream(core.list_namespaced_pod, NS, timeout_seconds=1):
        events.append((event["type"], event["object"].metadata.name))
        w.stop()
    assert events == [("ADDED", "a")]


def test_watch_selection_changes_are_added_and_deleted(kube_emulator: KubeEmulator, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_body("a", {"role": "worker"}))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"role": "idle"}}})
    core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"role": "worker"}}})
    core.delete_namespaced_pod("a", NS)
    events = collect(core.list_namespaced_pod, NS, n=3, label_selector="role=worker", resource_version=rv)
    assert [t for t, _ in events] == ["DELETED", "ADDED", "DELETED"]
    assert events[0][1]["metadata"]["labels"] == {"role": "idle"}


def test_watch_from_a_compacted_resource_version_is_410(kube_emulator: KubeEmulator, core: client.CoreV1Api) -> None:
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod_body("a"))
    kube_emulator.compact()
    with pytest.raises(ApiException) as exc:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=1))
    assert exc.value.status == 410
    # The real server answers 200 and sends the 410 as an ERROR event.
    resp = core.list_namespaced_pod(NS, watch=True, resource_version=rv, _preload_content=False)
    assert resp.status == 200
    event = json.loads(resp.data.decode().splitlines()[0])
    assert event["type"] == "ERROR" and event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
    # A fresh list gives a version to resume from.
    fresh = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod_body("b"))
    events = collect(core.list_namespaced_pod, NS, n=1, resource_version=fresh)
    assert [(t, o["metadata"]["name"]) for t, o in events] == [("ADDED", "b")]


def test_watch_history_is_bounded(kube_emulator: KubeEmulator, core: client.CoreV1Api) -> None:
    kube_emulator.history_limit = 3  # restored by the next reset()
    rv = core.list_namespaced_config_map(NS).metadata.resource_version
    for i in range(5):
        core.create_namespaced_config_map(NS, {"metadata": {"name": f"cm-{i}"}})
    with pytest.raises(ApiException) as exc:
        list(watch.Watch().stream(core.list_namespaced_config_map, NS, resource_version=rv, timeout_seconds=1))
    assert exc.value.status == 410


def test_watch_custom_objects(custom: client.CustomObjectsApi) -> None:
    rv = custom.list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets")["metadata"][
        "resourceVersion"
    ]
    custom.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", jobset_body("js"))
    custom.patch_namespaced_custom_object_status(
        "jobset.x-k8s.io", "v1alpha2", NS, "jobsets", "js", {"status": {"restarts": 1}}
    )
    events = collect(
        custom.list_namespaced_custom_object, "jobset.x-k8s.io", "v1alpha2", NS, "jobsets", n=2, resource_version=rv
    )
    assert [(t, o["metadata"]["name"], o.get("status")) for t, o in events] == [
        ("ADDED", "js", None),
        ("MODIFIED", "js", {"restarts": 1}),
    ]


# ---------------------------------------------------------------------------------------------- logs


def test_log_follow_streams_until_the_pod_ends(kube_emulator: KubeEmulator, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_body("p"))
    kube_emulator.set_pod_phase(NS, "p", "Running")
    kube_emulator.append_log(NS, "p", "step 1\nstep 2\n")

    def finish() -> None:
        kube_emulator.append_log(NS, "p", "done")
        kube_emulator.set_pod_phase(NS, "p", "Succeeded")

    in_thread(finish, 0.2)
    started = time.monotonic()
    lines = list(watch.Watch().stream(core.read_namespaced_pod_log, "p", NS, follow=True))
    assert lines == ["step 1", "step 2", "done"]
    assert time.monotonic() - started < 5  # ended with the pod, not at the 60 s follow cap
    resp = core.read_namespaced_pod_log("p", NS, _preload_content=False)
    assert resp.headers["Content-Type"].startswith("text/plain")
    assert resp.data == b"step 1\nstep 2\ndone\n"


def test_log_options_previous_and_waiting(kube_emulator: KubeEmulator, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_body("p"))
    assert core.read_namespaced_pod_log("p", NS) == ""  # not on a node yet: nothing to read
    kube_emulator.set_pod_phase(NS, "p", "Pending")  # on a node, container being created
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod_log("p", NS)
    assert exc.value.status == 400 and "is waiting to start: ContainerCreating" in status_body(exc.value)["message"]
    kube_emulator.set_pod_phase(NS, "p", "Running")
    kube_emulator.append_log(NS, "p", "first run\nOOM soon\n")
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod_log("p", NS, previous=True)
    assert exc.value.status == 400
    pod = kube_emulator.set_pod_phase(NS, "p", "Running", restart=True, exit_code=137, reason="OOMKilled")
    kube_emulator.append_log(NS, "p", "second run\n")
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 1
    assert core.read_namespaced_pod_log("p", NS) == "second run\n"
    assert core.read_namespaced_pod_log("p", NS, previous=True) == "first run\nOOM soon\n"
    assert core.read_namespaced_pod_log("p", NS, previous=True, tail_lines=1) == "OOM soon\n"
    stamped = core.read_namespaced_pod_log("p", NS, timestamps=True)
    assert stamped.endswith("Z second run\n") and stamped[:4].isdigit()
    status = core.read_namespaced_pod("p", NS).status.container_statuses[0]
    assert status.last_state.terminated.exit_code == 137 and status.last_state.terminated.reason == "OOMKilled"

    core.create_namespaced_pod(NS, pod_body("two", containers=2))
    kube_emulator.set_pod_phase(NS, "two", "Running")
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod_log("two", NS)
    assert exc.value.status == 400 and "choose one of: [main c1]" in status_body(exc.value)["message"]
    assert core.read_namespaced_pod_log("two", NS, container="c1") == ""


# ---------------------------------------------------------------------------------------------- kubelet helpers


def test_pod_phases_look_like_a_kubelet_wrote_them(kube_emulator: KubeEmulator, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_body("p"))
    kube_emulator.set_pod_phase(NS, "p", "Pending", reason="Unschedulable")
    pod = core.read_namespaced_pod("p", NS)
    scheduled = {c.type: c for c in pod.status.conditions}["PodScheduled"]
    assert scheduled.status == "False" and scheduled.reason == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in scheduled.message and pod.spec.node_name is None

    kube_emulator.set_pod_phase(NS, "p", "Running")
    pod = core.read_namespaced_pod("p", NS)
    assert pod.status.pod_ip and pod.spec.node_name
    assert {c.type: c.status for c in pod.status.conditions}["Ready"] == "True"

    kube_emulator.set_pod_phase(NS, "p", "Failed", exit_code=3)
    term = core.read_namespaced_pod("p", NS).status.container_statuses[0].state.terminated
    assert (term.exit_code, term.reason) == (3, "Error")

    event = kube_emulator.add_event(kube_emulator.get("pods", "p"), "BackOff", "Back-off restarting", "Warning")
    events = core.list_namespaced_event(NS, field_selector="involvedObject.name=p").items
    assert [(e.reason, e.type, e.involved_object.uid) for e in events] == [
        ("BackOff", "Warning", event["involvedObject"]["uid"])
    ]


def test_create_job_pods_like_the_job_controller(
    kube_emulator: KubeEmulator, batch: client.BatchV1Api, core: client.CoreV1Api
) -> None:
    job = batch.create_namespaced_job(NS, job_body("train", completions=3))
    pods = kube_emulator.create_job_pods(NS, "train")
    assert len(pods) == 3
    listed = core.list_namespaced_pod(NS, label_selector="batch.kubernetes.io/job-name=train").items
    assert sorted(p.spec.hostname for p in listed) == ["train-0", "train-1", "train-2"]
    assert all(p.metadata.owner_references[0].uid == job.metadata.uid for p in listed)
    assert {p.metadata.labels["batch.kubernetes.io/job-completion-index"] for p in listed} == {"0", "1", "2"}


# ---------------------------------------------------------------------------------------------- deletes


def test_delete_cascades_by_propagation_policy(
    kube_emulator: KubeEmulator, batch: client.BatchV1Api, core: client.CoreV1Api
) -> None:
    for name in ("fg", "bg", "orphan", "default"):
        batch.create_namespaced_job(NS, job_body(name, completions=2))
        kube_emulator.create_job_pods(NS, name)

    def pods_of(job: str) -> list[client.V1Pod]:
        return core.list_namespaced_pod(NS, label_selector=f"batch.kubernetes.io/job-name={job}").items

    batch.delete_namespaced_job("fg", NS, propagation_policy="Foreground")
    batch.delete_namespaced_job("bg", NS, propagation_policy="Background")
    batch.delete_namespaced_job("orphan", NS, propagation_policy="Orphan")
    batch.delete_namespaced_job("default", NS)  # batch/v1 Jobs orphan their pods by default
    assert pods_of("fg") == [] and pods_of("bg") == []
    for job in ("orphan", "default"):
        left = pods_of(job)
        assert len(left) == 2 and all(not p.metadata.owner_references for p in left)
    assert [j.metadata.name for j in batch.list_namespaced_job(NS).items] == []


def test_finalizers_hold_a_deletion(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(NS, {"metadata": {"name": "cfg", "finalizers": ["kubetrain.io/cleanup"]}})
    core.delete_namespaced_config_map("cfg", NS)
    held = core.read_namespaced_config_map("cfg", NS)
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("cfg", NS, [{"op": "remove", "path": "/metadata/finalizers"}])
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("cfg", NS)
    assert exc.value.status == 404


def test_delete_collection_by_label(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_body("a", {"job": "x"}))
    core.create_namespaced_pod(NS, pod_body("b", {"job": "y"}))
    core.delete_collection_namespaced_pod(NS, label_selector="job=x")
    assert [p.metadata.name for p in core.list_namespaced_pod(NS).items] == ["b"]


def test_dry_run_validates_but_stores_nothing(
    kube_emulator: KubeEmulator, batch: client.BatchV1Api, core: client.CoreV1Api
) -> None:
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    created = batch.create_namespaced_job(NS, job_body("j"), dry_run="All")
    assert created.metadata.uid and created.spec.selector
    assert batch.list_namespaced_job(NS).items == []
    bad = job_body("j")
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    with pytest.raises(ApiException) as exc:
        batch.create_namespaced_job(NS, bad, dry_run="All")
    assert exc.value.status == 422

    batch.create_namespaced_job(NS, job_body("real"))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    patched = batch.patch_namespaced_job("real", NS, {"spec": {"suspend": True}}, dry_run="All")
    assert patched.spec.suspend
    batch.delete_namespaced_job("real", NS, dry_run="All")
    job = batch.read_namespaced_job("real", NS)
    assert not job.spec.suspend
    assert core.list_namespaced_pod(NS).metadata.resource_version == rv


# ---------------------------------------------------------------------------------------------- faults


def test_injected_failure_happens_before_any_state_change(
    kube_emulator: KubeEmulator, batch: client.BatchV1Api
) -> None:
    kube_emulator.fail_next("POST", r"/jobs$", status=500)
    with pytest.raises(ApiException) as exc:
        batch.create_namespaced_job(NS, job_body("j"))
    assert exc.value.status == 500
    assert kube_emulator.objects("jobs") == []
    batch.create_namespaced_job(NS, job_body("j"))  # the fault was used up

    kube_emulator.fail_next("POST", r"/jobs$", status=429)
    with pytest.raises(ApiException) as exc:
        batch.create_namespaced_job(NS, job_body("k"))
    assert exc.value.status == 429 and exc.value.headers["Retry-After"] == "1"
    assert kube_emulator.find("jobs", "k") is None
    # urllib3 itself retries idempotent methods on 429/503 with Retry-After: the caller never sees it.
    kube_emulator.fail_next("GET", r"/jobs/j$", status=429, retry_after=0)
    assert batch.read_namespaced_job("j", NS).metadata.name == "j"
    assert [r.status for r in kube_emulator.requests if r.method == "GET"] == [429, 200]


def test_dropped_connection_stores_nothing(kube_emulator: KubeEmulator, batch: client.BatchV1Api) -> None:
    kube_emulator.drop_next("POST", r"/jobs$")
    with pytest.raises(urllib3.exceptions.HTTPError):
        batch.create_namespaced_job(NS, job_body("j"))
    assert kube_emulator.objects("jobs") == []
    assert [r.status for r in kube_emulator.requests if r.method == "POST"] == [0]


# ---------------------------------------------------------------------------------------------- validator, log


def test_body_validator_turns_messages_into_422(
    kube_emulator: KubeEmulator, batch: client.BatchV1Api, core: client.CoreV1Api
) -> None:
    def no_latest(obj: dict[str, Any]) -> list[str]:
        containers = obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
        return [f"{c['name']}: image must be pinned" for c in containers if c["image"].endswith(":latest")]

    kube_emulator.body_validator = no_latest
    bad = job_body("j")
    bad["spec"]["template"]["spec"]["containers"][0]["image"] = "python:latest"
    with pytest.raises(ApiException) as exc:
        batch.create_namespaced_job(NS, bad)
    assert exc.value.status == 422
    assert status_body(exc.value)["details"]["causes"][0]["message"] == "trainer: image must be pinned"
    assert kube_emulator.objects("jobs") == []
    batch.create_namespaced_job(NS, job_body("ok"))
    assert [(f.verb, f.resource, f.name) for f in kube_emulator.validation_failures] == [("create", "jobs", "j")]


def test_body_validator_sees_the_endpoint_kind(
    kube_emulator: KubeEmulator, batch: client.BatchV1Api, custom: client.CustomObjectsApi
) -> None:
    seen: list[tuple[str, str]] = []

    def record(obj: dict[str, Any]) -> list[str]:
        seen.append((obj["apiVersion"], obj["kind"]))
        return []

    kube_emulator.body_validator = record
    # Built-in endpoints accept a body without apiVersion/kind; the validator still gets them.
    batch.create_namespaced_job(NS, {k: v for k, v in job_body("j").items() if k not in ("apiVersion", "kind")})
    batch.patch_namespaced_job("j", NS, {"spec": {"suspend": True}})
    custom.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", jobset_body("js"))
    assert seen == [("batch/v1", "Job"), ("batch/v1", "Job"), ("jobset.x-k8s.io/v1alpha2", "JobSet")]


def test_request_log_counts_api_calls(kube_emulator: KubeEmulator, batch: client.BatchV1Api) -> None:
    batch.create_namespaced_job(NS, job_body("j"))
    batch.read_namespaced_job("j", NS)
    batch.read_namespaced_job_status("j", NS)
    assert kube_emulator.count_requests() == 3
    assert kube_emulator.count_requests("GET", r"/jobs/j") == 2
    post = kube_emulator.requests[0]
    assert (post.method, post.path, post.status) == ("POST", "/apis/batch/v1/namespaces/default/jobs", 201)
    assert post.body["metadata"]["name"] == "j"


def _client_with(url: str, token: str | None) -> client.ApiClient:
    cfg = client.Configuration()
    cfg.host = url
    if token is not None:
        cfg.api_key = {"authorization": token}
        cfg.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(cfg)


def test_a_wrong_token_is_401_and_no_credentials_are_served_as_the_insecure_port_did() -> None:
    from kube_emulator import KubeEmulator

    with KubeEmulator() as emu:  # anonymous, as the benchmarks run it (kubectl sends no token to http://)
        # A presented bearer token is checked: a wrong one is refused, never taken as anonymous.
        with _client_with(emu.url, "not-the-token") as wrong, pytest.raises(ApiException) as exc:
            client.CoreV1Api(wrong).list_namespace()
        assert exc.value.status == 401
        with _client_with(emu.url, emu.token) as right:
            assert NS in [n.metadata.name for n in client.CoreV1Api(right).list_namespace().items]
        # No credentials at all: what client-go (kubectl) sends to an http:// server whatever the kubeconfig says.
        with _client_with(emu.url, None) as anonymous:
            assert NS in [n.metadata.name for n in client.CoreV1Api(anonymous).list_namespace().items]


def test_the_tests_emulator_refuses_requests_without_the_token(kube_emulator: KubeEmulator) -> None:
    """The emulator the tests share is strict (`anonymous=False`): kubetrain's requests are checked for the
    kubeconfig's token, as a real cluster's TLS port checks them."""
    with _client_with(kube_emulator.url, None) as anonymous, pytest.raises(ApiException) as exc:
        client.CoreV1Api(anonymous).list_namespace()
    assert exc.value.status == 401
    with _client_with(kube_emulator.url, kube_emulator.token) as right:
        assert client.CoreV1Api(right).list_namespace().items


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_reads_pods_through_the_written_kubeconfig(tmp_path: Path) -> None:
    from kube_emulator import KubeEmulator

    kubectl = shutil.which("kubectl")
    assert kubectl
    with KubeEmulator() as emu:  # anonymous: kubectl sends no token to an http:// server
        emu.create({**pod_body("p1", {"app": "a"}), "metadata": {"name": "p1", "namespace": NS,
                                                                 "labels": {"app": "a"}}})
        kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
        got = subprocess.run([kubectl, "--kubeconfig", str(kubeconfig), "get", "pods", "-l", "app=a", "-o", "name"],
                             capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(tmp_path)})
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["pod/p1"]


def test_reset_gives_each_test_a_fresh_cluster(kube_emulator: KubeEmulator, core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "team-a"}})
    kube_emulator.fail_next("GET")
    kube_emulator.reset()
    assert [n.metadata.name for n in core.list_namespace().items] == [
        "default",
        "kube-node-lease",
        "kube-public",
        "kube-system",
    ]
    assert kube_emulator.installed_crds() == sorted(kube_emulator.default_crds)


def test_a_client_hanging_up_is_no_traceback_other_errors_are(capfd: pytest.CaptureFixture[str]) -> None:
    """A watch or log stream ends when its client hangs up (an informer stopped, a process ended): a real API
    server says nothing of it, so neither does the emulator (its tracebacks buried the failures that mattered).
    Any other error in a connection's thread is still printed."""
    from kube_emulator.transport import Handler, HTTPServer

    server = HTTPServer(("127.0.0.1", 0), Handler)
    try:
        for gone in (ConnectionResetError(104, "Connection reset by peer"), BrokenPipeError(32, "Broken pipe")):
            try:
                raise gone
            except ConnectionError:
                server.handle_error(None, ("127.0.0.1", 1))
        assert capfd.readouterr().err == ""
        try:
            raise ValueError("a fault of the emulator")
        except ValueError:
            server.handle_error(None, ("127.0.0.1", 1))
        assert "ValueError: a fault of the emulator" in capfd.readouterr().err
    finally:
        server.server_close()


def test_a_paged_list_is_one_snapshot_and_says_its_version(core: client.CoreV1Api) -> None:
    """As the API server: the pages after the first are served from the first page's state, with its
    resourceVersion, so a watch from that version sees every change made while the pages were read."""
    for i in range(4):
        core.create_namespaced_config_map(NS, {"metadata": {"name": f"snap-{i}"}, "data": {"v": "0"}})
    first = core.list_namespaced_config_map(NS, limit=2)
    assert [c.metadata.name for c in first.items] == ["snap-0", "snap-1"]
    core.patch_namespaced_config_map("snap-0", NS, {"data": {"v": "1"}})  # in a page already read
    core.patch_namespaced_config_map("snap-3", NS, {"data": {"v": "1"}})  # in a page still to read
    core.create_namespaced_config_map(NS, {"metadata": {"name": "snap-4"}})
    rest = core.list_namespaced_config_map(NS, limit=10, _continue=first.metadata._continue)
    assert [c.metadata.name for c in rest.items] == ["snap-2", "snap-3"]
    assert rest.items[1].data == {"v": "0"}  # as it was at the first page
    assert rest.metadata.resource_version == first.metadata.resource_version
    w = watch.Watch()
    seen = [(e["type"], e["object"].metadata.name) for e in w.stream(
        core.list_namespaced_config_map, NS, resource_version=rest.metadata.resource_version, timeout_seconds=1)]
    assert seen == [("MODIFIED", "snap-0"), ("MODIFIED", "snap-3"), ("ADDED", "snap-4")]


def test_a_continue_token_of_a_list_no_longer_kept_is_410(core: client.CoreV1Api) -> None:
    for i in range(3):
        core.create_namespaced_config_map(NS, {"metadata": {"name": f"old-{i}"}})
    first = core.list_namespaced_config_map(NS, limit=1)
    for i in range(17):  # later lists, each at a version of its own
        core.create_namespaced_config_map(NS, {"metadata": {"name": f"later-{i}"}})
        core.list_namespaced_config_map(NS, limit=1)
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_config_map(NS, limit=1, _continue=first.metadata._continue)
    assert exc.value.status == 410
