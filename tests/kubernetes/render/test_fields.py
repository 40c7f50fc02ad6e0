"""Field by field: what each part of the spec becomes, and the refusals (field path + flavors that can)."""

from __future__ import annotations

from typing import Any

import pytest
from kube_emulator.validation import check_pod_spec

from kubetrain.backends.kubernetes.render import FLAVORS, render_manifests
from kubetrain.jobspec import DistributedConfig, SpecError
from tests.support.helpers import make_job
from tests.support.kubelet import IMAGE, main_container, pod_specs, pod_templates
from tests.support.manifest_schemas import assert_valid
from tests.support.render import render

Manifest = dict[str, Any]


def job_with(flavor: str = "job", **spec: Any) -> list[Manifest]:
    base: dict[str, Any] = {"framework": "generic", "roles": {"worker": {"replicas": 2}},
                            "run": {"exec": ["./train"]}}
    objects = render(make_job({**base, **spec}, image=IMAGE), flavor)
    assert_valid(objects)
    return objects


def worker(objects: list[Manifest]) -> Manifest:
    return pod_templates(objects)["worker"]


def refusal(flavor: str, **spec: Any) -> SpecError:
    base: dict[str, Any] = {"framework": "generic", "roles": {"worker": {"replicas": 2}},
                            "run": {"exec": ["./train"]}}
    with pytest.raises(SpecError) as info:
        render(make_job({**base, **spec}, image=IMAGE), flavor)
    return info.value


# -- resources -------------------------------------------------------------------------------------------


def test_cpu_memory_gpu_and_extended_resources() -> None:
    c = main_container(worker(job_with(resources={
        "cpu": 4, "cpuLimit": "8", "memory": "16Gi", "memoryLimit": "20Gi", "gpu": 2,
        "extendedResources": {"rdma/hca": 1}}, requests={"example.com/x": "1"},
        limits={"memory": "24Gi", "example.com/x": "1"})))
    assert c["resources"] == {
        "requests": {"cpu": "4", "memory": "16Gi", "example.com/x": "1"},
        "limits": {"cpu": "8", "memory": "24Gi", "nvidia.com/gpu": "2", "rdma/hca": "1", "example.com/x": "1"},
    }


def test_mig_profile_is_its_own_resource() -> None:
    c = main_container(worker(job_with(resources={"migProfile": "3g.20gb"})))
    assert c["resources"]["limits"] == {"nvidia.com/mig-3g.20gb": "1"}


@pytest.mark.parametrize(("flavor", "expected"), [
    ("job", {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "50", "nvidia.com/gpumem": "8192"}),
    ("volcano", {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-cores": "50", "volcano.sh/vgpu-memory": "8192"}),
])
def test_hami_fraction_and_memory(flavor: str, expected: dict[str, str]) -> None:
    c = main_container(worker(job_with(flavor, resources={"gpu": 0.5, "gpuMemory": "8Gi", "gpuSharing": "hami"})))
    assert c["resources"]["limits"] == expected


def test_runai_fraction_is_annotations_and_its_scheduler() -> None:
    template = worker(job_with(resources={"gpu": 0.25, "gpuLimit": 0.8, "gpuSharing": "runai"}))
    assert template["metadata"]["annotations"] == {"gpu-fraction": "0.25", "gpu-fraction-limit": "0.8"}
    assert template["spec"]["schedulerName"] == "runai-scheduler"
    assert "resources" not in main_container(template)
    memory = worker(job_with(resources={"gpu": 2, "gpuMemory": "10Gi", "gpuSharing": "runai"},
                             scheduling={"schedulerName": "kai-scheduler"}))
    assert memory["metadata"]["annotations"] == {"gpu-memory": "10240", "gpu-fraction-num-devices": "2"}
    assert memory["spec"]["schedulerName"] == "kai-scheduler"  # the spec's scheduler wins


def test_aliyun_shares_by_memory() -> None:
    c = main_container(worker(job_with(resources={"gpu": 0.3, "gpuMemory": "3500Mi", "gpuSharing": "aliyun"})))
    assert c["resources"]["limits"] == {"aliyun.com/gpu-mem": "4", "aliyun.com/gpu-core.percentage": "30"}


@pytest.mark.parametrize(("resources", "flavor", "path", "words"), [
    ({"gpu": 1, "gpuLimit": 2}, "job", "spec.resources.gpuLimit", "cannot be overcommitted"),
    ({"gpu": 0.5, "gpuLimit": 1, "gpuSharing": "hami"}, "job", "spec.resources.gpuLimit", "HAMi"),
    ({"gpu": 0.5, "gpuMemory": "1Gi", "gpuSharing": "runai"}, "job", "spec.resources.gpuMemory", "not both"),
    ({"gpu": 0.5, "gpuSharing": "runai"}, "volcano", "spec.resources.gpuSharing",
     "flavors that can express it: job, jobset, kubeflow"),
    ({"gpu": 0.5, "gpuMemory": "1Gi", "gpuSharing": "aliyun"}, "volcano", "spec.resources.gpuSharing",
     "flavors that can express it: job, jobset, kubeflow"),
    ({"gpu": 0.5, "gpuSharing": "aliyun"}, "job", "spec.resources.gpuMemory", "give gpuMemory"),
    ({"capabilities": {"bad key!": "x"}}, "job", 'spec.resources.capabilities."bad key!"', "node label"),
])
def test_gpu_requests_a_flavor_cannot_express(resources: dict[str, Any], flavor: str, path: str,
                                             words: str) -> None:
    error = refusal(flavor, resources=resources)
    assert error.paths == [path]
    assert words in str(error)


def test_a_limit_below_its_request_is_refused_after_merging() -> None:
    error = refusal("job", resources={"cpu": 4}, limits={"cpu": "2"})
    assert error.paths == ["spec.limits.cpu"]


# Extended resources and huge pages cannot be overcommitted: the API server wants a limit whenever there is a
# request, and the two equal. Checked on the merged container (job, role, `resources`), named where written.
@pytest.mark.parametrize(("spec", "path", "words", "hint"), [
    ({"requests": {"example.com/x": 1}}, 'spec.requests."example.com/x"', "has no limit", "as a limit"),
    ({"requests": {"nvidia.com/gpu": 1}, "resources": {"gpu": 2}}, 'spec.requests."nvidia.com/gpu"',
     "request 1 differs from the limit 2", "only the limit"),
    ({"requests": {"example.com/x": 1}, "roles": {"worker": {"replicas": 2, "limits": {"example.com/x": 2}}}},
     'spec.requests."example.com/x"', "cannot be overcommitted", None),
    ({"limits": {"example.com/x": 2}, "roles": {"worker": {"replicas": 2, "requests": {"example.com/x": 1}}}},
     'spec.roles.worker.requests."example.com/x"', "differs from the limit 2", None),
    ({"requests": {"rdma/hca": 2}, "resources": {"extendedResources": {"rdma/hca": 1}}}, 'spec.requests."rdma/hca"',
     "differs from the limit 1", None),
    ({"requests": {"hugepages-2Mi": "2Mi", "memory": "1Gi"}, "limits": {"hugepages-2Mi": "4Mi"}},
     "spec.requests.hugepages-2Mi", "huge pages cannot be overcommitted", None),
    ({"limits": {"hugepages-2Mi": "4Mi"}}, "spec.limits.hugepages-2Mi", "need a cpu or memory", "resources.memory"),
])
def test_extended_resources_and_huge_pages_need_a_limit_equal_to_the_request(
    spec: dict[str, Any], path: str, words: str, hint: str | None
) -> None:
    for flavor in FLAVORS:
        error = refusal(flavor, **{"framework": "pytorch", **spec})
        assert error.paths == [path], flavor
        assert words in error.errors[0].message
        if hint is not None:
            assert error.errors[0].hint is not None and hint in error.errors[0].hint


def test_a_fraction_assigned_after_validation_is_still_refused() -> None:
    """Python objects are not revalidated on assignment; the renderer checks what it is about to write."""
    job = make_job({"framework": "generic", "roles": {"worker": {"replicas": 2}}, "run": {"exec": ["./train"]}},
                   image=IMAGE)
    assert job.spec.roles is not None
    job.spec.roles["worker"].limits = {"nvidia.com/gpu": "0.5"}
    with pytest.raises(SpecError) as info:
        render(job, "job")
    assert info.value.paths == ['spec.roles.worker.limits."nvidia.com/gpu"']
    [error] = info.value.errors
    assert "must be a whole number" in error.message and "'0.5'" in error.message
    assert error.hint is not None and "resources.gpuSharing" in error.hint


def test_a_distributed_config_cannot_overcommit_an_extended_resource() -> None:
    job = make_job({"framework": "generic", "replicas": 2, "run": {"exec": ["./train"]},
                    "resources": {"gpu": 2}}, image=IMAGE)
    with pytest.raises(SpecError) as info:
        render(job, "job", config=DistributedConfig(requests={"nvidia.com/gpu": 1}))
    assert info.value.paths == ['spec.requests."nvidia.com/gpu"']
    c = main_container(worker(render(job, "job", config=DistributedConfig(requests={"nvidia.com/gpu": 2}))))
    assert c["resources"] == {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}


# The same containers, judged by kubetrain and by the API emulator (testing/kube-emulator): kubetrain refuses
# exactly what the server would, so `render` never hands the cluster a manifest it rejects for its resources.
AGREEMENT = [
    ({"limits": {"nvidia.com/gpu": 1}}, True),
    ({"requests": {"nvidia.com/gpu": 4}, "limits": {"nvidia.com/gpu": 4}}, True),
    ({"requests": {"cpu": "0.5", "example.kubernetes.io/x": "0.5"}, "limits": {"cpu": "1.5"}}, True),
    ({"limits": {"example.com/x": "2000m", "hugepages-2Mi": "4Mi", "memory": "1Gi"}}, True),
    ({"requests": {"hugepages-1Gi": "2Gi", "cpu": 1}, "limits": {"hugepages-1Gi": "2Gi"}}, True),
    ({"limits": {"nvidia.com/gpu": 0.5}}, False),
    ({"limits": {"nvidia.com/mig-1g.5gb": "1.5"}}, False),
    ({"requests": {"example.com/x": "500m"}, "limits": {"example.com/x": "500m"}}, False),
    ({"requests": {"example.com/x": 1}}, False),
    ({"requests": {"example.com/x": 1}, "limits": {"example.com/x": 2}}, False),
    ({"limits": {"hugepages-2Mi": "3Mi", "memory": "1Gi"}}, False),
    ({"requests": {"hugepages-2Mi": "2Mi", "memory": "1Gi"}, "limits": {"hugepages-2Mi": "4Mi"}}, False),
    ({"limits": {"hugepages-2Mi": "4Mi"}}, False),
    ({"requests": {"cpu": 2}, "limits": {"cpu": 1}}, False),
]


@pytest.mark.parametrize(("raw", "accepted"), AGREEMENT)
def test_render_and_the_api_emulator_agree_on_container_resources(raw: dict[str, Any], accepted: bool) -> None:
    base: dict[str, Any] = {"framework": "generic", "replicas": 2, "run": {"exec": ["./train"]}}
    try:
        objects: list[Manifest] | None = render(make_job({**base, **raw}, image=IMAGE), "job")
    except SpecError:
        objects = None
    assert (objects is not None) == accepted
    if objects is not None:
        assert_valid(objects)
        for spec in pod_specs(objects):
            assert check_pod_spec(spec, "spec") == []
    else:
        resources = {k: {n: str(v) for n, v in values.items()} for k, values in raw.items()}
        containers = [{"name": "c", "image": "i", "resources": resources}]
        assert check_pod_spec({"containers": containers}, "spec") != []


def test_shm_capabilities_and_node_type_shape_the_pod() -> None:
    template = worker(job_with(resources={"shm": "16Gi",
                                          "capabilities": {"node.kubernetes.io/instance-type": "p4d.24xlarge"}},
                               nodeSelector={"zone": "a"}, scheduling={"nodeType": "big"}))
    spec = template["spec"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}} in spec["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in main_container(template)["volumeMounts"]
    assert spec["nodeSelector"] == {"zone": "a", "node.kubernetes.io/instance-type": "p4d.24xlarge",
                                    "kubetrain.dev/node-type": "big"}
    unlimited = worker(job_with(resources={"shm": True}))
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in unlimited["spec"]["volumes"]
    clash = refusal("job", nodeSelector={"kubetrain.dev/node-type": "small"}, scheduling={"nodeType": "big"})
    assert clash.paths == ['spec.nodeSelector."kubetrain.dev/node-type"']


# -- mounts ----------------------------------------------------------------------------------------------


def test_every_mount_type_but_s3() -> None:
    template = worker(job_with(mounts=[
        "type=bind,src=/mnt/cache,dst=/cache",
        "type=volume,src=data,dst=/data,readonly",
        {"type": "volume", "src": "ckpt", "dst": "/ckpt", "subPath": "run1"},
        {"type": "nfs", "server": "nfs.local", "path": "/export", "dst": "/nfs", "readonly": True},
        {"type": "emptyDir", "dst": "/scratch", "medium": "Memory", "sizeLimit": "1Gi"},
        {"type": "configMap", "name": "cfg", "dst": "/etc/cfg", "items": {"a.yaml": "a.yaml"}, "defaultMode": 0o444},
        {"type": "secret", "name": "keys", "dst": "/etc/keys", "defaultMode": 0o400},
        {"type": "gitSync", "repository": "https://example.com/r.git", "revision": "abc123", "dst": "/code",
         "passwordSecret": "git"},
    ]))
    spec = template["spec"]
    volumes = {v["name"]: {k: x for k, x in v.items() if k != "name"} for v in spec["volumes"]}
    assert volumes == {
        "mount-0": {"hostPath": {"path": "/mnt/cache"}},
        "mount-1": {"persistentVolumeClaim": {"claimName": "data", "readOnly": True}},
        "mount-2": {"persistentVolumeClaim": {"claimName": "ckpt"}},
        "mount-3": {"nfs": {"server": "nfs.local", "path": "/export", "readOnly": True}},
        "mount-4": {"emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
        "mount-5": {"configMap": {"name": "cfg", "items": [{"key": "a.yaml", "path": "a.yaml"}], "defaultMode": 292}},
        "mount-6": {"secret": {"secretName": "keys", "defaultMode": 256}},
        "mount-7": {"emptyDir": {}},
    }
    mounts = {m["mountPath"]: m for m in main_container(template)["volumeMounts"]}
    assert mounts["/data"]["readOnly"] is True and mounts["/ckpt"]["subPath"] == "run1"
    assert mounts["/code"] == {"name": "mount-7", "mountPath": "/code", "subPath": "checkout"}
    (git,) = spec["initContainers"]
    assert git["args"][:2] == ["--repo=https://example.com/r.git", "--ref=abc123"]
    assert git["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "git", "key": "password"}
    assert "privileged" not in main_container(template)["securityContext"]


def test_device_mounts_make_the_pod_privileged_and_say_so() -> None:
    rendered = render_manifests(make_job({"framework": "generic", "replicas": 1, "run": {"exec": ["x"]},
                                          "mounts": ["type=device,src=/dev/fuse"]}, image=IMAGE))
    c = main_container(pod_templates(rendered.objects)["worker"])
    assert c["securityContext"] == {"privileged": True, "allowPrivilegeEscalation": True}
    assert {"name": "mount-0", "mountPath": "/dev/fuse"} in c["volumeMounts"]
    assert rendered.warnings == ["role worker: pods run PRIVILEGED (device /dev/fuse (spec.mounts[0])): full "
                                 "access to the host, privilege escalation allowed"]


def test_s3_and_clashing_mount_paths_are_refused() -> None:
    error = refusal("jobset", mounts=["type=s3,bucket=b,dst=/b", "type=bind,src=/x,dst=/dev/shm"],
                    resources={"shm": True})
    assert error.paths == ["spec.mounts[0]", "spec.mounts[1]"]
    assert "no Kubernetes flavor can express it" in str(error) and "already uses" in str(error)


def test_role_mounts_are_reported_at_the_role() -> None:
    error = refusal("job", mounts=["type=bind,src=/a,dst=/a"],
                    roles={"worker": {"replicas": 2, "mounts": ["type=bind,src=/b,dst=/a"]}})
    assert error.paths == ["spec.roles.worker.mounts[0]"]


# -- security --------------------------------------------------------------------------------------------


def test_secure_by_default() -> None:
    spec = worker(job_with())["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert spec["containers"][0]["securityContext"] == {"allowPrivilegeEscalation": False,
                                                        "capabilities": {"drop": ["ALL"]}}


def test_security_fields() -> None:
    spec = worker(job_with(security={
        "runAsUid": 1000, "runAsGid": 100, "runAsNonRoot": True, "supplementalGroups": [5],
        "capabilities": ["IPC_LOCK"], "seccompProfileType": "Localhost", "seccompLocalhostProfile": "p.json",
        "readOnlyRootFilesystem": True, "hostIpc": True, "hostNetwork": True}, serviceAccount="trainer"))["spec"]
    assert spec["securityContext"] == {"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"},
                                       "runAsUser": 1000, "runAsGroup": 100, "runAsNonRoot": True,
                                       "supplementalGroups": [5]}
    assert spec["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]},
        "readOnlyRootFilesystem": True}
    assert spec["hostIPC"] is True and spec["hostNetwork"] is True
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["serviceAccountName"] == "trainer" and spec["automountServiceAccountToken"] is True


def test_run_as_user_takes_the_submitters_ids_and_sys_admin_needs_escalation() -> None:
    job = make_job({"framework": "generic", "replicas": 1, "run": {"exec": ["x"]},
                    "security": {"runAsUser": True, "capabilities": ["SYS_ADMIN"]}}, image=IMAGE)
    rendered = render_manifests(job, uid=1234, gid=99, api_access=True)
    spec = pod_specs(rendered.objects)[0]
    assert spec["securityContext"]["runAsUser"] == 1234 and spec["securityContext"]["runAsGroup"] == 99
    assert spec["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is True
    assert spec["automountServiceAccountToken"] is True  # api_access: the resolver reads the API
    assert any("SYS_ADMIN" in w for w in rendered.warnings)


# -- container -------------------------------------------------------------------------------------------


def test_container_fields() -> None:
    c = main_container(worker(job_with(imagePullPolicy="Always", workingDir="/work", tty=True, stdin=True,
                                       envFrom=[{"secretRef": {"name": "s"}, "prefix": "S_"}])))
    assert c["imagePullPolicy"] == "Always" and c["workingDir"] == "/work"
    assert c["tty"] is True and c["stdin"] is True
    assert c["envFrom"] == [{"secretRef": {"name": "s"}, "prefix": "S_"}]
    assert c["args"] == ["./train"]


def test_image_is_required_for_each_role() -> None:
    error = refusal("job", image=None, roles={"a": {"image": "x:1"}, "b": {}})
    assert error.paths == ["spec.image"]
    assert "spec.roles.<role>.image" in str(error)


def test_several_processes_per_pod_are_refused_for_jax() -> None:
    with pytest.raises(SpecError) as info:
        render(make_job({"framework": "jax", "replicas": 2, "procsPerReplica": 2, "run": {"python": ["t.py"]}},
                        image=IMAGE))
    assert info.value.paths == ["spec.procsPerReplica"]
    # torch-based frameworks run one torchrun per pod instead.
    torch = render(make_job({"framework": "pytorch", "replicas": 2, "procsPerReplica": 2,
                             "run": {"python": ["t.py"]}}, image=IMAGE))
    assert main_container(pod_templates(torch)["worker"])["args"][:3] == ["python", "-m", "torch.distributed.run"]


def test_user_labels_cannot_redefine_kubetrains() -> None:
    error = refusal("job", labels={"kubetrain.dev/role": "x"})
    assert error.paths == ['spec.labels."kubetrain.dev/role"']
    with pytest.raises(SpecError) as info:
        render(make_job({"framework": "generic", "replicas": 1, "run": {"exec": ["x"]}},
                        labels={"app.kubernetes.io/managed-by": "helm"}, image=IMAGE))
    assert info.value.paths == ['metadata.labels."app.kubernetes.io/managed-by"']


def test_index_label_only_where_the_index_is_known() -> None:
    templates = pod_templates(render(make_job({"framework": "pytorch", "roles": {"master": {}, "worker": {
        "replicas": 2}}, "run": {"python": ["t.py"]}}, image=IMAGE)))
    assert templates["master"]["metadata"]["labels"]["kubetrain.dev/replica-index"] == "0"
    assert "kubetrain.dev/replica-index" not in templates["worker"]["metadata"]["labels"]


# -- scheduling ------------------------------------------------------------------------------------------


def test_node_pools_are_ordered_preferences_beside_the_users_affinity() -> None:
    spec = worker(job_with(
        scheduling={"nodePools": ["a100", "v100", "t4"], "priorityClass": "high", "schedulerName": "custom"},
        affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "z", "operator": "Exists"}]}}]}},
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]))["spec"]
    preferred = spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [(p["weight"], p["preference"]["matchExpressions"][0].get("values")) for p in preferred] == [
        (5, None), (100, ["a100"]), (99, ["v100"]), (98, ["t4"])]
    assert preferred[1]["preference"]["matchExpressions"][0]["key"] == "kubetrain.dev/node-pool"
    assert spec["priorityClassName"] == "high" and spec["schedulerName"] == "custom"
    assert spec["tolerations"] == [{"effect": "NoSchedule", "key": "gpu", "operator": "Exists"}]


@pytest.mark.parametrize("flavor", ["job", "jobset", "kubeflow"])
def test_queue_is_kueues_label_where_kueue_admits(flavor: str) -> None:
    objects = render(make_job({"framework": "pytorch", "roles": {"master": {}, "worker": {"replicas": 2}},
                               "run": {"python": ["t.py"]}, "scheduling": {"queue": "team-a"}}, image=IMAGE), flavor)
    workloads = [o for o in objects if o["kind"] not in ("Service", "ConfigMap")]
    assert workloads and all(o["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a" for o in workloads)


def test_gang_scheduling_per_flavor() -> None:
    error = refusal("job", scheduling={"gang": True})
    assert error.paths == ["spec.scheduling.gang"]
    assert "flavors that can express it: jobset, volcano, kubeflow" in str(error)
    error = refusal("jobset", scheduling={"gang": True})
    assert "needs scheduling.queue" in str(error)
    error = refusal("jobset", scheduling={"minAvailable": 1, "queue": "q"})
    assert "flavors that can express it: volcano, kubeflow" in str(error)
    assert job_with("jobset", scheduling={"gang": True, "queue": "q"})
    assert job_with("volcano", scheduling={"minAvailable": 1})[0]["spec"]["minAvailable"] == 1
    assert job_with("volcano", scheduling={"gang": False})[0]["spec"]["minAvailable"] == 1
    assert job_with("volcano")[0]["spec"]["minAvailable"] == 2
    tf = render(make_job({"framework": "tensorflow", "roles": {"worker": {"replicas": 3}}, "run": {"python": ["t"]},
                          "scheduling": {"minAvailable": 2, "queue": "q", "priorityClass": "p"}},
                         image=IMAGE), "kubeflow")
    assert tf[0]["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 2, "queue": "q", "priorityClass": "p"}


# -- policies --------------------------------------------------------------------------------------------


def test_job_flavor_policies() -> None:
    spec = job_with(restartPolicy="ExitCode", exitCodes={"retryable": [75], "permanent": [137]},
                    runPolicy={"backoffLimit": 4, "activeDeadlineSeconds": 60, "ttlSecondsAfterFinished": 30,
                               "cleanPodPolicy": "Running"}, runMode="Pause")[0]["spec"]
    assert spec["backoffLimit"] == 4 and spec["activeDeadlineSeconds"] == 60
    assert spec["ttlSecondsAfterFinished"] == 30 and spec["suspend"] is True
    ignore, exit_codes = spec["podFailurePolicy"]["rules"]
    assert ignore == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert exit_codes["action"] == "FailJob"
    assert exit_codes["onExitCodes"]["values"] == [*range(1, 75), *range(76, 128), 137]
    never = job_with(restartPolicy="Never")[0]["spec"]
    assert never["backoffLimit"] == 0  # restartPolicy Never: no retries
    assert len(never["podFailurePolicy"]["rules"]) == 1
    preempt = job_with(scheduling={"terminateAfterPreemption": True})[0]["spec"]
    assert preempt["podFailurePolicy"]["rules"][0]["action"] == "FailJob"


def test_jobset_policies() -> None:
    spec = job_with("jobset", restartPolicy="ExitCode",
                    runPolicy={"backoffLimit": 2, "ttlSecondsAfterFinished": 9, "suspend": True})[0]["spec"]
    assert spec["failurePolicy"] == {"maxRestarts": 2, "rules": [
        {"name": "PermanentFailure", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}]}
    assert spec["ttlSecondsAfterFinished"] == 9 and spec["suspend"] is True
    inner = spec["replicatedJobs"][0]["template"]["spec"]
    assert inner["podFailurePolicy"]["rules"][1]["onExitCodes"]["values"] == list(range(1, 128))


def test_volcano_policies() -> None:
    spec = job_with("volcano", restartPolicy="ExitCode", exitCodes={"retryable": list(range(2, 128))},
                    runPolicy={"backoffLimit": 5, "ttlSecondsAfterFinished": 7})[0]["spec"]
    assert spec["policies"] == [{"exitCode": 1, "action": "TerminateJob"},
                                {"event": "PodFailed", "action": "RestartJob"},
                                {"event": "PodEvicted", "action": "RestartJob"}]
    assert spec["maxRetry"] == 5 and spec["ttlSecondsAfterFinished"] == 7
    never = job_with("volcano", scheduling={"terminateAfterPreemption": True})[0]["spec"]
    assert never["policies"] == [{"event": "PodFailed", "action": "TerminateJob"},
                                 {"event": "PodEvicted", "action": "TerminateJob"}]


# The restarts a job allows, as each flavor writes them.
RESTARTS = {
    "job": lambda objects: objects[0]["spec"]["backoffLimit"],
    "jobset": lambda objects: objects[0]["spec"]["failurePolicy"]["maxRestarts"],
    "volcano": lambda objects: objects[0]["spec"]["maxRetry"],
    "kubeflow": lambda objects: objects[0]["spec"]["runPolicy"]["backoffLimit"],
}


def pytorch_job(flavor: str, config: DistributedConfig | None = None, **spec: Any) -> list[Manifest]:
    base: dict[str, Any] = {"framework": "pytorch", "replicas": 2, "run": {"python": ["t.py"]}}
    objects = render_manifests(make_job({**base, **spec}, image=IMAGE), flavor, config=config).objects
    assert_valid(objects)
    return objects


def restarts_on_failure(flavor: str, objects: list[Manifest], role: str = "worker") -> bool:
    """Whether a failed pod of `role` leads to a restart (rather than failing the job), as the flavor says it."""
    root = objects[0]
    if flavor == "job":
        job = next(o for o in objects if o["kind"] == "Job" and o["metadata"]["name"].endswith(f"-{role}"))
        return bool(job["spec"]["backoffLimit"])
    if flavor == "jobset":
        failure = root["spec"]["failurePolicy"]
        never = [r for r in failure.get("rules", []) if role in r.get("targetReplicatedJobs", [role])
                 and r["action"] == "FailJobSet" and not r.get("onJobFailureReasons")]
        return bool(failure["maxRestarts"]) and not never
    if flavor == "volcano":
        task = next(t for t in root["spec"]["tasks"] if t["name"] == role)
        for policy in task.get("policies", []) + root["spec"]["policies"]:
            if policy.get("event") == "PodFailed":
                return bool(policy["action"] == "RestartJob")
        return False
    kind = root["spec"]["pytorchReplicaSpecs"][role.capitalize()]
    return kind["restartPolicy"] != "Never" and bool(root["spec"]["runPolicy"]["backoffLimit"])


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_backoff_limit_alone_restarts_on_every_flavor(flavor: str) -> None:
    """runPolicy.backoffLimit without a restartPolicy means OnFailure: never a silent `backoffLimit: 0`."""
    objects = pytorch_job(flavor, runPolicy={"backoffLimit": 2})
    assert RESTARTS[flavor](objects) == 2
    assert restarts_on_failure(flavor, objects)
    # The same from Kale's DistributedConfig(run_policy=V1RunPolicy(backoff_limit=2)).
    configured = pytorch_job(flavor, DistributedConfig(run_policy={"backoff_limit": 2}))
    assert RESTARTS[flavor](configured) == 2 and restarts_on_failure(flavor, configured)


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("policy", ["OnFailure", "ExitCode"])
def test_a_restart_policy_without_backoff_limit_restarts_six_times(flavor: str, policy: str) -> None:
    objects = pytorch_job(flavor, restartPolicy=policy)
    assert RESTARTS[flavor](objects) == 6
    assert restarts_on_failure(flavor, objects)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_nothing_given_restarts_nothing_on_every_flavor(flavor: str) -> None:
    objects = pytorch_job(flavor)
    assert not restarts_on_failure(flavor, objects)
    if flavor != "volcano":  # Volcano's webhook turns maxRetry 0 into 3: render keeps 1, PodFailed terminates
        assert RESTARTS[flavor](objects) == 0


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_roles_restart_policy_is_rendered_where_its_replicas_are(flavor: str) -> None:
    """DeepSpeedJob's worker.restartPolicy: here the master never restarts, the workers do (job's OnFailure)."""
    objects = pytorch_job(flavor, replicas=None, restartPolicy="OnFailure", runPolicy={"backoffLimit": 3},
                          roles={"master": {"restartPolicy": "Never"}, "worker": {"replicas": 2}})
    assert not restarts_on_failure(flavor, objects, "master")
    assert restarts_on_failure(flavor, objects, "worker")
    # And the other way round: a job that never restarts, but its workers do.
    objects = pytorch_job(flavor, replicas=None, restartPolicy="Never",
                          roles={"master": {}, "worker": {"replicas": 2, "restartPolicy": "OnFailure"}})
    assert not restarts_on_failure(flavor, objects, "master")
    assert restarts_on_failure(flavor, objects, "worker")
    assert RESTARTS[flavor](objects) == (0 if flavor == "job" else 6)  # job: the root is the master's Job


def test_a_roles_exit_code_policy_per_flavor() -> None:
    spec: dict[str, Any] = {"replicas": None, "restartPolicy": "OnFailure", "exitCodes": {"permanent": [3]},
                            "roles": {"master": {}, "worker": {"replicas": 2, "restartPolicy": "ExitCode"}}}
    jobs = {o["metadata"]["name"].rsplit("-", 1)[1]: o["spec"] for o in pytorch_job("job", **spec)
            if o["kind"] == "Job"}
    assert len(jobs["master"]["podFailurePolicy"]["rules"]) == 1
    assert jobs["worker"]["podFailurePolicy"]["rules"][1]["onExitCodes"]["values"] == [*range(1, 128)]
    jobset = pytorch_job("jobset", **spec)[0]["spec"]
    assert jobset["failurePolicy"]["rules"] == [
        {"name": "PermanentFailure", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}]
    volcano = pytorch_job("volcano", **spec)[0]["spec"]
    tasks = {t["name"]: t for t in volcano["tasks"]}
    assert "policies" not in tasks["master"]  # the job's policies
    assert tasks["worker"]["policies"][0] == {"exitCode": 1, "action": "TerminateJob"}
    assert tasks["worker"]["policies"][-1] == {"event": "PodFailed", "action": "RestartJob"}
    assert {"exitCode": 3, "action": "TerminateJob"} in tasks["worker"]["policies"]


@pytest.mark.parametrize(("spec", "path", "able"), [
    ({"runMode": "Pause"}, "spec.runMode", "job, jobset, kubeflow"),
    ({"runPolicy": {"suspend": True}}, "spec.runPolicy.suspend", "job, jobset, kubeflow"),
    ({"runPolicy": {"activeDeadlineSeconds": 5}}, "spec.runPolicy.activeDeadlineSeconds", "job, jobset, kubeflow"),
])
def test_volcano_refusals(spec: dict[str, Any], path: str, able: str) -> None:
    error = refusal("volcano", **spec)
    assert error.paths == [path] and f"flavors that can express it: {able}" in str(error)


@pytest.mark.parametrize("flavor", ["job", "jobset", "volcano"])
def test_clean_pod_policy_beyond_running_needs_kubeflow(flavor: str) -> None:
    error = refusal(flavor, runPolicy={"cleanPodPolicy": "All"})
    assert error.paths == ["spec.runPolicy.cleanPodPolicy"]
    assert "only the kubeflow flavor can express it" in str(error)


def test_kubeflow_refusals_and_policies() -> None:
    base = {"framework": "pytorch", "replicas": 2, "run": {"python": ["t.py"]}}
    with pytest.raises(SpecError) as info:
        render(make_job({**base, "restartPolicy": "ExitCode", "exitCodes": {"permanent": [200]},
                         "scheduling": {"terminateAfterPreemption": True}}, image=IMAGE), "kubeflow")
    assert info.value.paths == ["spec.exitCodes", "spec.scheduling.terminateAfterPreemption"]
    objects = render(make_job({**base, "restartPolicy": "OnFailure", "runMode": "Pause",
                               "runPolicy": {"backoffLimit": 1, "activeDeadlineSeconds": 10,
                                             "ttlSecondsAfterFinished": 3, "cleanPodPolicy": "None"},
                               "elastic": {"minReplicas": 1, "maxReplicas": 3}}, image=IMAGE), "kubeflow")
    assert_valid(objects)
    spec = objects[0]["spec"]
    assert spec["runPolicy"] == {"cleanPodPolicy": "None", "ttlSecondsAfterFinished": 3,
                                 "activeDeadlineSeconds": 10, "backoffLimit": 1, "suspend": True}
    assert spec["elasticPolicy"] == {"minReplicas": 1, "maxReplicas": 3, "maxRestarts": 3, "rdzvBackend": "c10d"}
    assert spec["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "OnFailure"


@pytest.mark.parametrize("flavor", FLAVORS)
def test_preemption_limit_is_refused_everywhere(flavor: str) -> None:
    error = refusal(flavor, framework="pytorch", roles=None, replicas=2, scheduling={"preemptionLimit": 1})
    assert error.paths == ["spec.scheduling.preemptionLimit"]
    assert "no Kubernetes flavor can express it" in str(error)


@pytest.mark.parametrize("flavor", ["job", "jobset"])
def test_indexed_jobs_stop_at_a_hundred_thousand_replicas(flavor: str) -> None:
    assert job_with(flavor, roles={"worker": {"replicas": 100_000}})
    error = refusal(flavor, roles={"worker": {"replicas": 100_001}})
    assert error.paths == ["spec.roles.worker.replicas"]
    assert job_with("volcano", roles={"worker": {"replicas": 100_001}})


def test_hosting_replicas_serve_ssh_or_wait_unless_their_role_names_a_program() -> None:
    job = make_job({"framework": "mpi", "replicas": 2, "run": {"python": ["a.py"]}}, image=IMAGE)
    serving = pod_templates(render(job))
    assert main_container(serving["worker"])["args"] == ["/usr/sbin/sshd", "-De", "-f", "/etc/kubetrain/sshd_config"]
    # The training operator's MPIJob v1 reaches its workers with kubectl exec: they wait.
    waiting = pod_templates(render(job, "kubeflow"))
    c = main_container(waiting["worker"])
    assert "args" not in c and "exec sleep 2147483647" in c["command"][2]
    sshd = pod_templates(render(make_job({
        "framework": "mpi", "run": {"python": ["a.py"]},
        "roles": {"launcher": {}, "worker": {"replicas": 2, "run": {"exec": ["/usr/sbin/sshd", "-De"]}}}},
                                         image=IMAGE)))
    assert main_container(sshd["worker"])["args"] == ["/usr/sbin/sshd", "-De"]
    assert main_container(sshd["launcher"])["args"][0] == "mpirun"


def test_elastic_start_size_must_be_the_worker_replicas() -> None:
    spec = {"framework": "pytorch", "replicas": 3, "run": {"python": ["t.py"]}}
    assert render(make_job({**spec, "elastic": {"minReplicas": 2, "maxReplicas": 4, "expectedReplicas": 3}},
                           image=IMAGE))
    with pytest.raises(SpecError) as info:
        render(make_job({**spec, "elastic": {"minReplicas": 2, "maxReplicas": 4, "expectedReplicas": 2}}, image=IMAGE))
    assert info.value.paths == ["spec.elastic.expectedReplicas"]


def worker_count(flavor: str, objects: list[Manifest]) -> int:
    spec = objects[0]["spec"]
    if flavor == "job":
        return int(next(o for o in objects if o["kind"] == "Job")["spec"]["completions"])
    if flavor == "jobset":
        return int(spec["replicatedJobs"][0]["template"]["spec"]["completions"])
    if flavor == "volcano":
        return int(spec["tasks"][0]["replicas"])
    return int(spec["pytorchReplicaSpecs"]["Worker"]["replicas"])


@pytest.mark.parametrize("flavor", FLAVORS)
def test_expected_replicas_alone_is_the_start_size_on_every_flavor(flavor: str) -> None:
    """expectedReplicas given without the worker replicas: the job starts with that many, as it does locally
    (render no longer refuses it)."""
    objects = pytorch_job(flavor, replicas=None, elastic={"minReplicas": 2, "maxReplicas": 6, "expectedReplicas": 4})
    assert worker_count(flavor, objects) == 4
    container = main_container(pod_templates(objects)["worker"])
    assert {"name": "PET_NNODES", "value": "2:6"} in container["env"]
    if flavor == "kubeflow":
        assert objects[0]["spec"]["elasticPolicy"]["minReplicas"] == 2


@pytest.mark.parametrize("flavor", FLAVORS)
def test_elastic_disabled_renders_a_job_that_is_not_elastic(flavor: str) -> None:
    objects = pytorch_job(flavor, elastic={"enabled": False, "minReplicas": 1, "maxReplicas": 8})
    env = {e["name"]: e.get("value") for e in main_container(pod_templates(objects)["worker"])["env"]}
    assert env.get("PET_NNODES") != "1:8" and env.get("PET_RDZV_BACKEND") in (None, "static")
    assert "elasticPolicy" not in objects[0]["spec"]
