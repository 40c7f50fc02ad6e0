"""The manifest schema checker itself: what it accepts, what it rejects, how it reports."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests.support.manifest_schemas import (
    KUBERNETES_MINOR,
    _convert,
    _crd_index,
    _crd_to_jsonschema,
    _registry,
    _validator,
    assert_valid,
    known_kinds,
    validate_manifest,
)

Manifest = dict[str, Any]


def container(**extra: Any) -> Manifest:
    return {
        "name": "main",
        "image": "python:3.11-slim",
        "command": ["python", "-m", "train"],
        "env": [{"name": "KUBETRAIN_ROLE", "value": "worker"}],
        "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": 2}},
        **extra,
    }


def pod_template(restart_policy: str = "Never") -> Manifest:
    return {
        "metadata": {"labels": {"kubetrain.io/job": "demo"}, "annotations": {"a": "b"}},
        "spec": {"restartPolicy": restart_policy, "containers": [container()]},
    }


def indexed_job() -> Manifest:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "demo-worker",
            "namespace": "default",
            "labels": {"kubetrain.io/job": "demo", "kueue.x-k8s.io/queue-name": "team-a"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "demo", "uid": "1234", "controller": False}
            ],
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": 4,
            "parallelism": 4,
            "backoffLimit": 0,
            "suspend": False,
            "podFailurePolicy": {
                "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]
            },
            "template": {
                "metadata": {"labels": {"kubetrain.io/job": "demo"}},
                "spec": {
                    "restartPolicy": "Never",
                    "subdomain": "demo",
                    "containers": [container()],
                    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                },
            },
        },
    }


def headless_service() -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "demo"},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {"kubetrain.io/job": "demo"},
            "ports": [{"name": "rdzv", "port": 29500, "targetPort": 29500}],
        },
    }


def config_map() -> Manifest:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo-hostfile"},
            "data": {"hostfile": "demo-worker-0.demo slots=8\n"}}


def jobset() -> Manifest:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "demo", "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
        "spec": {
            "network": {"enableDNSHostnames": True, "subdomain": "demo"},
            "failurePolicy": {"maxRestarts": 3},
            "startupPolicy": {"startupPolicyOrder": "InOrder"},
            "replicatedJobs": [
                {
                    "name": "worker",
                    "replicas": 1,
                    "template": {
                        "metadata": {"labels": {"kubetrain.io/role": "worker"}},
                        "spec": {"completionMode": "Indexed", "completions": 4, "parallelism": 4,
                                 "backoffLimit": 0, "template": pod_template()},
                    },
                }
            ],
        },
    }


def volcano_job() -> Manifest:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "demo"},
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "minAvailable": 3,
            "maxRetry": 2,
            "plugins": {"svc": [], "env": []},
            "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
            "tasks": [
                {"name": "master", "replicas": 1, "template": pod_template()},
                {"name": "worker", "replicas": 2, "template": pod_template()},
            ],
        },
    }


def kubeflow_job(kind: str, replica_key: str, roles: tuple[str, ...]) -> Manifest:
    specs = {role: {"replicas": 1, "restartPolicy": "OnFailure", "template": pod_template("OnFailure")}
             for role in roles}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": "demo"},
        "spec": {replica_key: specs, "runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 3}},
    }


def pytorch_job() -> Manifest:
    return kubeflow_job("PyTorchJob", "pytorchReplicaSpecs", ("Master", "Worker"))


def tf_job() -> Manifest:
    return kubeflow_job("TFJob", "tfReplicaSpecs", ("Chief", "Worker", "PS"))


def mpi_job() -> Manifest:
    job = kubeflow_job("MPIJob", "mpiReplicaSpecs", ("Launcher", "Worker"))
    job["spec"]["slotsPerWorker"] = 8
    return job


CUSTOM = {
    "JobSet": (jobset, ("spec", "replicatedJobs", 0, "template", "spec", "template")),
    "VolcanoJob": (volcano_job, ("spec", "tasks", 1, "template")),
    "PyTorchJob": (pytorch_job, ("spec", "pytorchReplicaSpecs", "Worker", "template")),
    "TFJob": (tf_job, ("spec", "tfReplicaSpecs", "PS", "template")),
    "MPIJob": (mpi_job, ("spec", "mpiReplicaSpecs", "Launcher", "template")),
}


def dig(obj: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


def pod_template_of(name: str, manifest: Manifest) -> Manifest:
    template: Manifest = dig(manifest, CUSTOM[name][1])
    return template


# --------------------------------------------------------------------------------------------------
# Core objects


def test_pinned_minor_is_recent() -> None:
    major, minor = (int(x) for x in KUBERNETES_MINOR.split("."))
    assert (major, minor) >= (1, 30)


def test_valid_core_objects_pass() -> None:
    assert_valid([indexed_job(), headless_service(), config_map()])


def test_unknown_field_in_pod_spec_fails() -> None:
    job = indexed_job()
    job["spec"]["template"]["spec"]["restartPolicyy"] = "Never"
    assert validate_manifest(job) == [
        "Job/demo-worker: $.spec.template.spec: Additional properties are not allowed "
        "('restartPolicyy' was unexpected)"
    ]


def test_unknown_field_in_object_meta_fails() -> None:
    job = indexed_job()
    job["metadata"]["label"] = {"a": "b"}
    assert [e for e in validate_manifest(job) if "'label' was unexpected" in e]


def test_wrong_type_fails() -> None:
    job = indexed_job()
    job["spec"]["completions"] = "4"
    (error,) = validate_manifest(job)
    assert error.startswith("Job/demo-worker: $.spec.completions: '4' is not of type 'integer'")


def test_all_errors_are_reported_not_just_the_first() -> None:
    job = indexed_job()
    pod = job["spec"]["template"]["spec"]
    pod["containers"][0]["imagee"] = "x"
    pod["containers"][0]["ports"] = [{"containerPort": "http"}]
    job["spec"]["parallelism"] = [4]
    job["metadata"]["labels"]["n"] = 1
    errors = validate_manifest(job)
    paths = {e.split(": ")[1] for e in errors}
    assert paths == {
        "$.metadata.labels.n",
        "$.spec.parallelism",
        "$.spec.template.spec.containers[0]",
        "$.spec.template.spec.containers[0].ports[0].containerPort",
    }, errors


def test_errors_are_kind_name_path_message() -> None:
    svc = headless_service()
    svc["spec"]["ports"][0]["port"] = "http"
    for error in validate_manifest(svc):
        assert re.fullmatch(r"Service/demo: \$[^:]*: .+", error), error


def test_assert_valid_lists_every_error_of_every_object() -> None:
    job, svc = indexed_job(), headless_service()
    job["spec"]["completions"] = "x"
    svc["spec"]["clusterIp"] = "None"
    with pytest.raises(AssertionError) as raised:
        assert_valid([job, svc, config_map()])
    text = str(raised.value)
    assert "2 manifest schema error(s)" in text
    assert "Job/demo-worker: $.spec.completions" in text
    assert "Service/demo: $.spec: Additional properties" in text


@pytest.mark.parametrize("cpu", ["500m", 2, 0.5, "1.5"])
def test_quantities_accept_int_or_string(cpu: Any) -> None:
    job = indexed_job()
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = cpu
    assert validate_manifest(job) == []


def test_int_or_string_target_port() -> None:
    svc = headless_service()
    svc["spec"]["ports"][0]["targetPort"] = "rdzv"
    assert validate_manifest(svc) == []
    svc["spec"]["ports"][0]["targetPort"] = [1]
    assert len(validate_manifest(svc)) == 1


def test_missing_name_fails() -> None:
    cm = config_map()
    del cm["metadata"]["name"]
    assert validate_manifest(cm) == ["ConfigMap/?: $.metadata: metadata.name (or generateName) is required"]
    cm["metadata"]["generateName"] = "demo-"
    assert validate_manifest(cm) == []


# --------------------------------------------------------------------------------------------------
# Unknown kinds and bad input fail loudly


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("v1", "Gizmo"),
        ("batch/v2", "Job"),
        ("batch.example.com/v1", "Job"),  # same file-name stem as batch/v1 Job, different group
        ("kubeflow.org/v1", "TrainJob"),
        ("jobset.x-k8s.io/v1alpha1", "JobSet"),
    ],
)
def test_unknown_kind_fails(api_version: str, kind: str) -> None:
    (error,) = validate_manifest({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}})
    assert error.startswith(f"{kind}/x: $: no schema for apiVersion={api_version!r}")


@pytest.mark.parametrize("obj", [{"kind": "Job", "metadata": {"name": "x"}}, {"apiVersion": "v1"}, {}])
def test_missing_api_version_or_kind_fails(obj: Manifest) -> None:
    (error,) = validate_manifest(obj)
    assert "apiVersion and kind must both be non-empty strings" in error


def test_client_model_objects_are_refused() -> None:
    from kubernetes.client import V1ConfigMap, V1ObjectMeta

    model = V1ConfigMap(api_version="v1", kind="ConfigMap", metadata=V1ObjectMeta(name="x"))
    assert validate_manifest(model) == ["?/?: $: expected a manifest dict, got V1ConfigMap"]  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# Custom resources


@pytest.mark.parametrize("name", sorted(CUSTOM))
def test_valid_custom_resources_pass(name: str) -> None:
    assert_valid([CUSTOM[name][0]()])


@pytest.mark.parametrize("name", sorted(CUSTOM))
def test_unknown_field_in_custom_resource_spec_fails(name: str) -> None:
    manifest = CUSTOM[name][0]()
    manifest["spec"]["replicaz"] = 1
    assert validate_manifest(manifest) == [
        f"{manifest['kind']}/demo: $.spec: Additional properties are not allowed ('replicaz' was unexpected)"
    ]


@pytest.mark.parametrize("name", sorted(CUSTOM))
def test_unknown_field_in_embedded_pod_spec_fails(name: str) -> None:
    manifest = CUSTOM[name][0]()
    template = pod_template_of(name, manifest)
    template["spec"]["containers"][0]["gpus"] = 1
    template["metadata"]["generateName"] = "x-"  # not among the template metadata fields the CRD keeps
    errors = validate_manifest(manifest)
    assert len(errors) == 2, errors
    assert any(".containers[0]: Additional properties are not allowed ('gpus' was unexpected)" in e
               for e in errors)
    assert any("'generateName' was unexpected" in e for e in errors)


@pytest.mark.parametrize("name", sorted(CUSTOM))
@pytest.mark.parametrize("cpu", ["500m", 2, "1.5", 0])
def test_custom_resource_quantities_accept_int_or_string(name: str, cpu: Any) -> None:
    manifest = CUSTOM[name][0]()
    pod_template_of(name, manifest)["spec"]["containers"][0]["resources"]["limits"]["cpu"] = cpu
    assert validate_manifest(manifest) == []


@pytest.mark.parametrize("cpu", [True, ["1"], "lots"])
def test_custom_resource_bad_quantity_fails(cpu: Any) -> None:
    # The CRD carries the Quantity pattern, so a malformed string fails here (the core schemas only
    # say "string").
    manifest = pytorch_job()
    pod_template_of("PyTorchJob", manifest)["spec"]["containers"][0]["resources"]["limits"]["cpu"] = cpu
    (error,) = validate_manifest(manifest)
    assert ".resources.limits.cpu: " in error


def test_custom_resource_wrong_type_and_all_errors() -> None:
    manifest = volcano_job()
    manifest["spec"]["minAvailable"] = "3"
    manifest["spec"]["tasks"][0]["replicas"] = None
    manifest["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["image"] = 7
    errors = validate_manifest(manifest)
    assert [e.split(": ")[1] for e in errors] == [
        "$.spec.minAvailable",
        "$.spec.tasks[0].replicas",
        "$.spec.tasks[1].template.spec.containers[0].image",
    ], errors


def test_custom_resource_root_metadata_is_object_meta() -> None:
    manifest = pytorch_job()
    manifest["metadata"]["labels"] = {"n": 1}
    manifest["metadata"]["ownerReferences"] = [{"kind": "ConfigMap", "name": "x"}]
    manifest["metadata"]["lables"] = {}
    errors = validate_manifest(manifest)
    assert len(errors) == 4, errors  # label type, apiVersion and uid missing, the typo
    assert any("'lables' was unexpected" in e for e in errors)
    assert any("'uid' is a required property" in e for e in errors)


def test_duplicate_list_map_keys_fail_in_custom_resources_only() -> None:
    # A CRD's `x-kubernetes-list-type: map` makes the API server refuse duplicate keys; for core
    # objects duplicate env names are only a warning.
    manifest = mpi_job()
    env = pod_template_of("MPIJob", manifest)["spec"]["containers"][0]["env"]
    env.append(copy.deepcopy(env[0]))
    (error,) = validate_manifest(manifest)
    assert error.endswith(".env[1]: duplicate entry for key {'name': 'KUBETRAIN_ROLE'} (same as item 0)")

    job = indexed_job()
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    env.append(copy.deepcopy(env[0]))
    assert validate_manifest(job) == []


def test_expected_custom_resources_are_loaded() -> None:
    kinds = set(known_kinds())
    for expected in [
        ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        ("batch.volcano.sh/v1alpha1", "Job"),
        ("scheduling.volcano.sh/v1beta1", "PodGroup"),
        ("kubeflow.org/v1", "PyTorchJob"),
        ("kubeflow.org/v1", "TFJob"),
        ("kubeflow.org/v1", "MPIJob"),
        ("kueue.x-k8s.io/v1beta2", "LocalQueue"),
    ]:
        assert expected in kinds


def test_validators_are_cached() -> None:
    assert _validator("batch/v1", "Job") is _validator("batch/v1", "Job")
    assert _validator("kubeflow.org/v1", "PyTorchJob") is _validator("kubeflow.org/v1", "PyTorchJob")


@pytest.mark.parametrize("kind", ["JobSet", "Job", "PyTorchJob", "LocalQueue"])
def test_converted_crd_schemas_are_valid_json_schema(kind: str) -> None:
    for (group, version, crd_kind), schema in _crd_index().items():
        if crd_kind == kind:
            Draft202012Validator.check_schema(_crd_to_jsonschema(schema))
            assert _validator(f"{group}/{version}", kind) is not None


# --------------------------------------------------------------------------------------------------
# The CRD → JSON Schema conversion, on the extensions the copied CRDs happen not to use


def crd_validator(open_api_v3: Manifest) -> Draft202012Validator:
    return Draft202012Validator(_crd_to_jsonschema(open_api_v3), registry=_registry())


def messages(validator: Draft202012Validator, instance: Any) -> list[str]:
    return [e.message for e in validator.iter_errors(instance)]


def test_conversion_closes_objects_with_properties() -> None:
    converted = _convert({"type": "object", "properties": {"a": {"type": "string"}}}, structural=True)
    assert converted["additionalProperties"] is False
    kept = _convert({"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
                    structural=True)
    assert kept["additionalProperties"] == {"type": "string"}


def test_conversion_leaves_junctor_branches_open() -> None:
    converted = _convert(
        {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
         "anyOf": [{"properties": {"a": {"minLength": 1}}}, {"required": ["b"]}]},
        structural=True,
    )
    assert "additionalProperties" not in converted["anyOf"][0]


def test_preserve_unknown_fields_allows_anything_there() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                             "properties": {"n": {"type": "integer"}}},
                    "closed": {"type": "object"},
                },
            }
        },
    }
    v = crd_validator(schema)
    assert messages(v, {"spec": {"free": {"n": 1, "anything": {"deep": [1]}}}}) == []
    assert len(messages(v, {"spec": {"free": {"n": "x"}}})) == 1
    # An object with no properties and no preserve marker is pruned to {} by the API server.
    assert len(messages(v, {"spec": {"closed": {"x": 1}}})) == 1


def test_int_or_string_and_nullable() -> None:
    schema = {
        "type": "object",
        "properties": {
            "port": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True},
            "note": {"type": "string", "nullable": True, "enum": ["a", "b"]},
            "count": {"type": "integer"},
        },
    }
    v = crd_validator(schema)
    assert messages(v, {"port": 80, "note": None}) == []
    assert messages(v, {"port": "http", "note": "a"}) == []
    assert len(messages(v, {"port": 1.5})) == 1
    assert len(messages(v, {"port": None})) == 1
    assert len(messages(v, {"note": "c"})) == 1
    assert len(messages(v, {"count": None})) == 1


def test_embedded_resource_gets_type_meta_and_object_meta() -> None:
    schema = {
        "type": "object",
        "properties": {
            "template": {
                "type": "object",
                "x-kubernetes-embedded-resource": True,
                "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            },
        },
    }
    v = crd_validator(schema)
    ok = {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
                       "spec": {"containers": []}}}
    assert messages(v, ok) == []
    assert len(messages(v, {"template": {"metadata": {"labels": {"a": 1}}}})) == 1
    assert len(messages(v, {"template": {"status": {}}})) == 1


def test_cel_rules_are_skipped() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}},
              "x-kubernetes-validations": [{"rule": "self.n > 10", "message": "n too small"}]}
    assert messages(crd_validator(schema), {"n": 1}) == []
