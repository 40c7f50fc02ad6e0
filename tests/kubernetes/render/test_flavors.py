"""Every example × every flavor that can express it: schema-valid objects (core kinds against the pinned
Kubernetes schemas, custom resources against the upstream CRDs), and the layout each flavor promises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.backends.kubernetes.render import (
    FLAVORS,
    Rendered,
    render_manifests,
    to_json,
    to_yaml,
)
from kubetrain.contract.naming import is_dns1035_label, is_dns_label
from kubetrain.jobspec import DistributedConfig, SpecError, TrainJob, load_file
from tests.support.helpers import make_job
from tests.support.kubelet import IMAGE, main_container, pod_specs, pod_templates
from tests.support.manifest_schemas import assert_valid, validate_manifest
from tests.support.render import render

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*/job.yaml"))

# all-fields shows in comments the fields no flavor expresses (docs/parity.md), so it renders for jobset;
# these put them back, as the example had them.
UNSUPPORTED_EVERYWHERE: list[str] = []
REFUSED_EVERYWHERE = ["spec.scheduling.preemptionLimit=2", "spec.mounts[10]=type=s3,bucket=datasets,dst=/s3",
                      "spec.roles.worker.resources.gpuLimit=1"]


def load_example(path: Path, overrides: list[str] | None = None) -> TrainJob:
    job = load_file(path, overrides=overrides or [])
    if job.spec.image is None and not any(r.image for r in (job.spec.roles or {}).values()):
        job = load_file(path, overrides=[*(overrides or []), f"spec.image={IMAGE}"])  # e.g. the MPI example
    return job


def flavors_for(job: TrainJob) -> list[str]:
    """The flavors that run the job's framework (the kubeflow flavor has a kind per framework, none for generic)."""
    if job.spec.framework.value == "generic":
        return [name for name, f in FLAVORS.items() if f.features.every_framework]
    return list(FLAVORS)


CASES = [(p, f) for p in EXAMPLE_FILES if p.parent.name != "all-fields" for f in flavors_for(load_example(p))]


def test_there_are_examples() -> None:
    assert {p.parent.name for p in EXAMPLE_FILES} >= {"pytorch-ddp", "tensorflow-multiworker", "mpi-allreduce",
                                                       "all-fields"}


@pytest.mark.parametrize(("path", "flavor"), CASES, ids=[f"{p.parent.name}-{f}" for p, f in CASES])
def test_example_renders_valid_manifests(path: Path, flavor: str) -> None:
    job = load_example(path)
    rendered = render_manifests(job, flavor)
    assert_valid(rendered.objects)
    assert_semantics(job, rendered)
    assert list(yaml.safe_load_all(to_yaml(rendered.objects))) == rendered.objects


ALL_FIELDS_ERRORS = {
    "job": {"spec.scheduling.minAvailable"},
    "jobset": set(),
    "volcano": {"spec.runPolicy.activeDeadlineSeconds"},
    "kubeflow": {"spec.exitCodes"},
}


@pytest.mark.parametrize("flavor", FLAVORS)
def test_all_fields_fails_naming_exactly_what_the_flavor_cannot_express(flavor: str) -> None:
    path = EXAMPLES / "all-fields" / "job.yaml"
    with pytest.raises(SpecError) as info:
        render(load_example(path, REFUSED_EVERYWHERE), flavor)
    everywhere = {"spec.scheduling.preemptionLimit", "spec.mounts[10]", "spec.roles.worker.resources.gpuLimit"}
    assert set(info.value.paths) == everywhere | ALL_FIELDS_ERRORS[flavor]
    text = str(info.value)
    assert "spec.mounts[10]: an s3 mount" in text and "no Kubernetes flavor can express it" in text
    # Without what no flavor expresses, each flavor refuses only its own gaps, naming the ones that can.
    if not ALL_FIELDS_ERRORS[flavor]:
        render(load_example(path, UNSUPPORTED_EVERYWHERE), flavor)
        return
    with pytest.raises(SpecError) as info:
        render(load_example(path, UNSUPPORTED_EVERYWHERE), flavor)
    assert set(info.value.paths) == ALL_FIELDS_ERRORS[flavor]
    assert f"the {flavor} flavor cannot express it" in str(info.value)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_all_fields_renders_once_trimmed_to_the_flavor(flavor: str) -> None:
    trim = {
        "job": ["spec.scheduling.minAvailable=null", "spec.scheduling.gang=null"],
        "jobset": ["spec.scheduling.minAvailable=null"],
        "volcano": ["spec.runPolicy.activeDeadlineSeconds=null"],
        "kubeflow": ["spec.exitCodes=null"],
    }[flavor]
    job = load_example(EXAMPLES / "all-fields" / "job.yaml", UNSUPPORTED_EVERYWHERE + trim)
    if flavor == "jobset":
        assert job.spec.scheduling.queue  # the base template names a queue: Kueue gangs the JobSet
    rendered = render_manifests(job, flavor)
    assert_valid(rendered.objects)
    assert_semantics(job, rendered)
    assert any("PRIVILEGED" in w for w in rendered.warnings)  # device mounts
    for spec in pod_specs(rendered.objects):
        container = spec["containers"][0]
        assert container["securityContext"]["privileged"] is True
        assert spec["initContainers"][0]["image"].startswith("registry.k8s.io/git-sync/")
        assert {"name": "NCCL_DEBUG", "value": "WARN"} in container["env"]


def assert_semantics(job: TrainJob, rendered: Rendered) -> None:
    """What the schemas cannot check: names, labels, counts, the root, the replica layout."""
    objects = rendered.objects
    names = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert len(set(names)) == len(names), names
    for obj in objects:
        meta = obj["metadata"]
        assert is_dns_label(meta["name"]), meta["name"]
        if obj["kind"] == "Service":
            assert is_dns1035_label(meta["name"])
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "kubetrain"
        assert meta["labels"]["kubetrain.dev/job"] == job.name
        assert "ownerReferences" not in meta  # set by the submitter, once the root has a uid
        assert meta.get("namespace") == job.metadata.namespace
    templates = pod_templates(objects)
    counts = job.spec.role_replicas()
    assert set(counts) <= set(templates)
    for role, template in templates.items():
        labels = template["metadata"]["labels"]
        assert labels["kubetrain.dev/job"] == job.name and labels["kubetrain.dev/role"] == role
        container = main_container(template)
        assert container["image"]
        assert container["command"][:2] == ["/bin/sh", "-c"] and container["command"][3] == "kubetrain"
        assert container["securityContext"]["allowPrivilegeEscalation"] in (False, True)
        assert template["spec"]["securityContext"]["seccompProfile"]["type"]
        mpi_launcher = rendered.flavor == "kubeflow" and container["name"] == "mpi" and role == "launcher"
        assert template["spec"]["automountServiceAccountToken"] is (bool(job.spec.service_account) or mpi_launcher)
    assert rendered.topology is not None
    for role in counts:
        host = rendered.topology.host(role, counts[role] - 1)
        assert all(is_dns_label(part) for part in host.split(".")), host


def test_job_flavor_layout() -> None:
    job = make_job({"framework": "pytorch", "roles": {"master": {}, "worker": {"replicas": 4}},
                    "run": {"python": ["train.py"]}}, name="2024-run", image=IMAGE)
    objects = render(job, "job", "ml")
    assert [(o["kind"], o["metadata"]["name"]) for o in objects][:3] == [
        ("Job", "2024-run-master"), ("Service", objects[1]["metadata"]["name"]), ("Job", "2024-run-worker")]
    service = objects[1]
    # A Service name must start with a letter: "2024-run" becomes a hashed DNS-1035 label.
    assert is_dns1035_label(service["metadata"]["name"]) and service["metadata"]["name"] != "2024-run"
    assert service["spec"] == {"clusterIP": "None", "publishNotReadyAddresses": True,
                               "selector": {"kubetrain.dev/job": "2024-run"}}
    worker = objects[2]
    assert worker["spec"]["completionMode"] == "Indexed"
    assert worker["spec"]["completions"] == worker["spec"]["parallelism"] == 4
    assert worker["spec"]["template"]["spec"]["subdomain"] == service["metadata"]["name"]
    env = {e["name"]: e.get("value") for e in main_container(worker["spec"]["template"])["env"]}
    assert env["MASTER_ADDR"] == f"2024-run-master-0.{service['metadata']['name']}"
    assert all(o["metadata"]["namespace"] == "ml" for o in objects)


def test_long_names_are_shortened_with_a_hash_so_every_hostname_fits() -> None:
    long = "a" * 63
    job = make_job({"framework": "generic", "roles": {"r" * 40: {"replicas": 100_000}},
                    "run": {"exec": ["x"]}}, name=long, image=IMAGE)
    for flavor in ("job", "jobset", "volcano"):
        rendered = render_manifests(job, flavor)
        assert rendered.topology is not None
        hostname = rendered.topology.host("r" * 40, 99_999).split(".")[0]
        assert is_dns_label(hostname), hostname  # ≤ 63 characters even for the last of 100,000 replicas
        root = rendered.root["metadata"]["name"]
        assert root != long and is_dns_label(root)
        assert rendered.root["metadata"]["labels"]["kubetrain.dev/job"] == long  # the label keeps the name
    other = make_job({"framework": "generic", "roles": {"r" * 40: {}}, "run": {"exec": ["x"]}},
                     name="a" * 62 + "b", image=IMAGE)
    assert render(other, "job")[0]["metadata"]["name"] != render(job, "job")[0]["metadata"]["name"]


def test_jobset_flavor_layout() -> None:
    job = make_job({"framework": "tensorflow", "roles": {"chief": {}, "worker": {"replicas": 3}},
                    "run": {"python": ["t.py"]}, "restartPolicy": "OnFailure", "runPolicy": {"backoffLimit": 2},
                    "scheduling": {"queue": "team-a", "gang": True}}, "demo", image=IMAGE)
    (jobset,) = render(job, "jobset")
    spec = jobset["spec"]
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True, "subdomain": "demo"}
    assert [r["name"] for r in spec["replicatedJobs"]] == ["chief", "worker"]
    assert spec["failurePolicy"] == {"maxRestarts": 2}
    for rjob in spec["replicatedJobs"]:
        assert rjob["replicas"] == 1 and rjob["template"]["spec"]["backoffLimit"] == 0
    script = main_container(spec["replicatedJobs"][1]["template"]["spec"]["template"])["command"][2]
    assert "kt_addrs demo-worker-0- .demo:2222 3" in script


def test_jobset_starts_a_launcher_after_its_hosts_and_ends_with_it() -> None:
    job = make_job({"framework": "mpi", "replicas": 2, "run": {"python": ["a.py"]}}, "demo", image=IMAGE)
    (jobset, configmap, secret) = render(job, "jobset")
    assert secret["kind"] == "Secret"  # the job's ssh keys (tests/kubernetes/test_mpi_ssh.py)
    jobs = jobset["spec"]["replicatedJobs"]
    assert [j["name"] for j in jobs] == ["worker", "launcher"]
    assert jobs[1]["dependsOn"] == [{"name": "worker", "status": "Ready"}]
    assert jobset["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["launcher"]}
    assert configmap["kind"] == "ConfigMap"
    assert configmap["data"]["hostfile"] == ("demo-worker-0-0.demo slots=1\ndemo-worker-0-1.demo slots=1\n")


def test_volcano_flavor_layout() -> None:
    job = make_job({"framework": "mpi", "replicas": 2, "procsPerReplica": 4, "run": {"python": ["a.py"]},
                    "scheduling": {"queue": "research", "priorityClass": "high"}}, "demo", image=IMAGE)
    (vcjob, configmap, secret) = render(job, "volcano")
    spec = vcjob["spec"]
    assert spec["schedulerName"] == "volcano" and spec["queue"] == "research"
    assert spec["priorityClassName"] == "high"
    assert spec["minAvailable"] == 3  # launcher + 2 workers, gang scheduled
    # kubetrain's own sshd and keys (a Secret), not the ssh plugin's (tests/kubernetes/test_mpi_ssh.py)
    assert spec["plugins"] == {"svc": [], "env": []} and secret["kind"] == "Secret"
    assert "kueue.x-k8s.io/queue-name" not in vcjob["metadata"]["labels"]  # a Volcano queue, not Kueue's
    tasks = {t["name"]: t for t in spec["tasks"]}
    assert tasks["launcher"]["policies"] == [{"event": "TaskCompleted", "action": "CompleteJob"}]
    assert tasks["worker"]["replicas"] == 2 and "policies" not in tasks["worker"]
    assert configmap["data"]["hostfile"] == "demo-worker-0.demo slots=4\ndemo-worker-1.demo slots=4\n"
    for task in spec["tasks"]:
        assert "schedulerName" not in task["template"]["spec"]  # Volcano sets it from the job


@pytest.mark.parametrize(("framework", "kind", "types", "container"), [
    ("pytorch", "PyTorchJob", {"Master", "Worker"}, "pytorch"),
    ("tensorflow", "TFJob", {"Chief", "Worker", "PS"}, "tensorflow"),
    ("mpi", "MPIJob", {"Launcher", "Worker"}, "mpi"),
    ("jax", "JAXJob", {"Worker"}, "jax"),
])
def test_kubeflow_kind_by_framework(framework: str, kind: str, types: set[str], container: str) -> None:
    roles = {"pytorch": {"master": {}, "worker": {"replicas": 2}},
             "tensorflow": {"chief": {}, "worker": {"replicas": 2}, "ps": {}},
             "mpi": {"worker": {"replicas": 2}}, "jax": {"worker": {"replicas": 2}}}[framework]
    job = make_job({"framework": framework, "roles": roles, "run": {"python": ["t.py"]}, "procsPerReplica": 1,
                    "restartPolicy": "ExitCode", "runPolicy": {"backoffLimit": 3, "cleanPodPolicy": "All"}},
                   "demo", image=IMAGE)
    objects = render(job, "kubeflow")
    assert_valid(objects)
    root = objects[0]
    assert root["kind"] == kind and root["apiVersion"] == "kubeflow.org/v1"
    key = next(k for k in root["spec"] if k.endswith("ReplicaSpecs"))
    assert set(root["spec"][key]) == types
    assert root["spec"]["runPolicy"] == {"cleanPodPolicy": "All", "backoffLimit": 3}
    for rspec in root["spec"][key].values():
        assert rspec["restartPolicy"] == "ExitCode"
        c = main_container(rspec["template"])
        assert c["name"] == container
        index = next(e for e in c["env"] if e["name"] == "KUBETRAIN_REPLICA_INDEX")
        assert index["valueFrom"]["fieldRef"]["fieldPath"] == (
            "metadata.labels['training.kubeflow.org/replica-index']")
    if framework == "pytorch":
        ports = main_container(root["spec"][key]["Worker"]["template"])["ports"]
        assert {"name": "pytorchjob-port", "containerPort": 29500, "protocol": "TCP"} in ports
    if framework == "mpi":
        assert root["spec"]["slotsPerWorker"] == 1
        launcher = root["spec"][key]["Launcher"]["template"]["spec"]
        assert launcher["automountServiceAccountToken"] is True  # its kubectl exec needs the token


def test_kubeflow_refuses_what_it_has_no_kind_for() -> None:
    generic = make_job({"framework": "generic", "replicas": 2, "run": {"exec": ["x"]}}, "demo", image=IMAGE)
    with pytest.raises(SpecError, match=r"spec.framework: framework generic: the kubeflow flavor cannot express "
                                        r"it; flavors that can express it: job, jobset, volcano"):
        render(generic, "kubeflow")
    launcher = make_job({"framework": "deepspeed", "roles": {"launcher": {}, "worker": {"replicas": 2}},
                         "run": {"python": ["t.py"]}}, "demo", image=IMAGE)
    # A launcher role reaches other pods only by ssh, which kubetrain's pods do not serve: every flavor
    # refuses it, with the hint to let each worker start its own node.
    for flavor in FLAVORS:
        with pytest.raises(SpecError, match=r"spec.roles.launcher: a DeepSpeed launcher role") as info:
            render(launcher, flavor)
        assert "drop the launcher role" in str(info.value)


def test_root_owns_everything_else() -> None:
    job = make_job({"framework": "mpi", "replicas": 2, "run": {"python": ["a.py"]},
                    "ports": [{"container": 6006, "serviceType": "NodePort", "name": "tb"}]}, "demo", image=IMAGE)
    for flavor in FLAVORS:
        rendered = render_manifests(job, flavor)
        owned = rendered.with_owner("0b3c-uid")
        assert "ownerReferences" not in owned[0]["metadata"]
        assert len(owned) == len(rendered.objects) > 1
        for obj in owned[1:]:
            assert obj["metadata"]["ownerReferences"] == [{
                "apiVersion": rendered.root["apiVersion"], "kind": rendered.root["kind"],
                "name": rendered.root["metadata"]["name"], "uid": "0b3c-uid"}]
        assert_valid(owned)
        assert "ownerReferences" not in rendered.objects[1]["metadata"]  # copies; the render is unchanged
        assert render(job, flavor, owner_uid="0b3c-uid") == owned
    with pytest.raises(ValueError, match="uid"):
        render_manifests(job).with_owner("")


def test_ports_become_services_per_role_and_type() -> None:
    job = make_job({"framework": "generic", "roles": {"board": {}}, "run": {"exec": ["x"]},
                    "ports": [{"container": 6006, "external": 80, "name": "tb"},
                              {"container": 8080, "serviceType": "LoadBalancer"}]}, "demo", image=IMAGE)
    services = [o for o in render(job, "job") if o["kind"] == "Service" and o["spec"].get("type")]
    assert [(s["spec"]["type"], s["spec"]["ports"]) for s in services] == [
        ("ClusterIP", [{"name": "tb", "port": 80, "targetPort": 6006, "protocol": "TCP"}]),
        ("LoadBalancer", [{"port": 8080, "targetPort": 8080, "protocol": "TCP"}]),
    ]
    assert services[0]["spec"]["selector"] == {"kubetrain.dev/job": "demo", "kubetrain.dev/role": "board"}
    ports = main_container(pod_templates(render(job, "job"))["board"])["ports"]
    assert ports == [{"name": "tb", "containerPort": 6006, "protocol": "TCP"},
                     {"containerPort": 8080, "protocol": "TCP"}]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_distributed_config_reaches_every_pod_of_every_role(flavor: str) -> None:
    """Kale's note: the DistributedConfig applies to all replicas, not only the first role's."""
    job = make_job({"framework": "tensorflow", "roles": {"chief": {}, "worker": {"replicas": 2}, "ps": {}},
                    "run": {"python": ["t.py"]}}, "demo", image=IMAGE)
    config = DistributedConfig(
        env={"FROM_CONFIG": "1"},
        env_from=[{"configMapRef": {"name": "shared"}}],
        requests={"cpu": "2"}, limits={"memory": "4Gi"},
        annotations={"example.com/a": "b"}, labels={"team": "ml"},
        node_selector={"pool": "gpu"},
        affinity={"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]}},
        tolerations=[{"key": "gpu", "operator": "Exists"}],
        run_policy={"backoffLimit": 2},
    )
    objects = render(job, flavor, config=config)
    assert_valid(objects)
    templates = pod_templates(objects)
    assert set(templates) == {"chief", "worker", "ps"}
    for template in templates.values():
        spec, container = template["spec"], main_container(template)
        assert {"name": "FROM_CONFIG", "value": "1"} in container["env"]
        assert container["envFrom"] == [{"configMapRef": {"name": "shared"}}]
        assert container["resources"] == {"requests": {"cpu": "2"}, "limits": {"memory": "4Gi"}}
        assert template["metadata"]["annotations"] == {"example.com/a": "b"}
        assert template["metadata"]["labels"]["team"] == "ml"
        assert spec["nodeSelector"] == {"pool": "gpu"}
        assert spec["affinity"]["podAntiAffinity"]
        assert spec["tolerations"] == [{"key": "gpu", "operator": "Exists"}]


def test_render_accepts_a_plan_and_keeps_its_name() -> None:
    from kubetrain.plan import plan

    job = make_job({"framework": "pytorch", "replicas": 2, "run": {"python": ["t.py"]}}, "demo", image=IMAGE)
    local = plan(job, name="renamed")
    objects = render(local, "jobset")
    assert objects[0]["metadata"]["name"] == "renamed"
    env = {e["name"]: e.get("value") for e in pod_specs(objects)[0]["containers"][0]["env"]}
    assert env["MASTER_ADDR"] == "renamed-worker-0-0.renamed"  # the flavor's addresses, not the plan's


def test_name_prefix_gets_a_generated_name() -> None:
    job = TrainJob.model_validate({"metadata": {"namePrefix": "exp-"}, "spec": {
        "image": IMAGE, "replicas": 2, "run": {"python": ["t.py"]}}})
    a, b = render_manifests(job), render_manifests(job)
    assert a.name.startswith("exp-") and len(a.name) == 9 and a.name != b.name
    assert render_manifests(job, name="exp-fixed").root["metadata"]["name"] == "exp-fixed-worker"


def test_render_is_deterministic_and_yaml_and_json_round_trip() -> None:
    job = load_example(EXAMPLES / "tensorflow-multiworker" / "job.yaml")
    import json

    for flavor in FLAVORS:
        first, second = render(job, flavor), render(job, flavor)
        assert first == second
        assert list(yaml.safe_load_all(to_yaml(first))) == first
        assert json.loads(to_json(first))["items"] == first


def test_the_entry_point_returns_objects_and_warnings() -> None:
    job = make_job({"framework": "generic", "replicas": 1, "run": {"exec": ["x"]},
                    "mounts": ["type=device,src=/dev/fuse"]}, "demo", image=IMAGE)
    rendered = render_manifests(job, "job", "ns")
    assert rendered.objects[0]["metadata"]["namespace"] == "ns"
    assert any("PRIVILEGED" in w and "/dev/fuse" in w for w in rendered.warnings)
    with pytest.raises(ValueError, match="unknown flavor"):
        render_manifests(job, "argo")


def test_every_error_is_reported_at_once() -> None:
    job = make_job({"framework": "generic", "run": {"exec": ["x"]}, "image": None,
                    "roles": {"a": {}, "b": {"image": "x:1", "mounts": ["type=s3,bucket=b,dst=/b"]}},
                    "scheduling": {"preemptionLimit": 1}}, "demo", image=IMAGE)
    with pytest.raises(SpecError) as info:
        render(job, "job")
    assert set(info.value.paths) == {"spec.image", "spec.roles.b.mounts[0]", "spec.scheduling.preemptionLimit"}


def _schema_errors(objs: list[dict[str, Any]]) -> list[str]:
    return [e for o in objs for e in validate_manifest(o)]
