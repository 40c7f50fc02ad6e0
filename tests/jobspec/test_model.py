"""The job model in Python: Kale's DistributedConfig (client models or dicts), role merging, and the
pure views the planner relies on."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import V1Affinity, V1EnvVar, V1NodeAffinity, V1Toleration

from kubetrain.jobspec import (
    ROLES,
    DistributedConfig,
    Framework,
    ReplicaSettings,
    Resources,
    RunPolicy,
    SpecError,
    TrainJob,
    from_dict,
    load_text,
)

# -- Kale's DistributedConfig: the two snippets, verbatim --------------------------------------------------


def check_first_snippet(config: DistributedConfig) -> None:
    assert isinstance(config.env, list) and len(config.env) == 1
    assert isinstance(config.env[0], V1EnvVar)
    assert (config.env[0].name, config.env[0].value) == ("ENV1", "VALUE1")
    assert config.labels == {"significant-label": "a-value"}
    assert isinstance(config.run_policy, RunPolicy)
    assert config.run_policy.clean_pod_policy == "All"
    assert config.run_policy.backoff_limit is None


def test_first_snippet_with_kubetrain_run_policy() -> None:
    V1RunPolicy = RunPolicy  # the name the snippet uses
    config = DistributedConfig(
        env=[V1EnvVar(name="ENV1", value="VALUE1")],
        labels={"significant-label": "a-value"},
        run_policy=V1RunPolicy(clean_pod_policy="All"),
    )
    check_first_snippet(config)


def test_first_snippet_with_run_policy_as_dict() -> None:
    config = DistributedConfig(
        env=[V1EnvVar(name="ENV1", value="VALUE1")],
        labels={"significant-label": "a-value"},
        run_policy={"clean_pod_policy": "All"},
    )
    check_first_snippet(config)
    camel = DistributedConfig(run_policy={"cleanPodPolicy": "All", "backoffLimit": 2})
    assert camel.run_policy is not None
    assert (camel.run_policy.clean_pod_policy, camel.run_policy.backoff_limit) == ("All", 2)


def test_first_snippet_with_kubeflow_training_sdk() -> None:
    # Kubeflow's training SDK names the class KubeflowOrgV1RunPolicy (V1RunPolicy in releases before 1.7).
    from kubeflow.training import KubeflowOrgV1RunPolicy as V1RunPolicy

    config = DistributedConfig(
        env=[V1EnvVar(name="ENV1", value="VALUE1")],
        labels={"significant-label": "a-value"},
        run_policy=V1RunPolicy(clean_pod_policy="All"),
    )
    check_first_snippet(config)
    full = DistributedConfig(
        run_policy=V1RunPolicy(clean_pod_policy="Running", backoff_limit=3, active_deadline_seconds=60, suspend=True)
    )
    assert full.run_policy == RunPolicy(
        clean_pod_policy="Running", backoff_limit=3, active_deadline_seconds=60, suspend=True
    )


def test_kubeflow_scheduling_policy_is_refused_with_a_pointer() -> None:
    from kubeflow.training import KubeflowOrgV1RunPolicy, KubeflowOrgV1SchedulingPolicy

    policy = KubeflowOrgV1RunPolicy(scheduling_policy=KubeflowOrgV1SchedulingPolicy(queue="q"))
    with pytest.raises(SpecError, match=r"spec\.scheduling") as info:
        DistributedConfig(run_policy=policy)
    assert info.value.paths == ["run_policy.schedulingPolicy"]


def test_second_snippet_dict_env_becomes_a_client_model() -> None:
    complex_env = {"name": "MY_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    config = DistributedConfig(
        env=[V1EnvVar(name="ENV2", value="VALUE2"), complex_env],
        limits={"cpu": "100m", "memory": "1Gi"},
        node_selector={"node-id": "1234"},
    )
    assert isinstance(config.env[1], V1EnvVar)
    assert config.env[1].name == "MY_POD_IP"
    assert config.env[1].value_from.field_ref.field_path == "status.podIP"
    assert config.env[0].name == "ENV2" and config.env[0].value == "VALUE2"
    assert config.limits == {"cpu": "100m", "memory": "1Gi"}
    assert config.node_selector == {"node-id": "1234"}


def test_client_models_and_dicts_are_interchangeable() -> None:
    as_models = DistributedConfig(
        tolerations=[V1Toleration(key="gpu", operator="Exists", effect="NoSchedule")],
        affinity=V1Affinity(node_affinity=V1NodeAffinity()),
    )
    as_camel = DistributedConfig(
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}], affinity={"nodeAffinity": {}}
    )
    as_snake = DistributedConfig(
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}], affinity={"node_affinity": {}}
    )
    for config in (as_models, as_camel, as_snake):
        assert isinstance(config.tolerations[0], V1Toleration)
        assert config.tolerations[0].key == "gpu"
        assert isinstance(config.affinity, V1Affinity)
        assert isinstance(config.affinity.node_affinity, V1NodeAffinity)
    assert as_models.tolerations == as_camel.tolerations == as_snake.tolerations


def test_env_and_env_from_accept_every_form() -> None:
    config = DistributedConfig(
        env={"A": "1", "B": 2, "C": True, "D": {"valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}},
        env_from=[{"configMapRef": {"name": "cm"}}, {"secret_ref": {"name": "sec"}, "prefix": "S_"}],
        requests={"cpu": 1, "example.com/fpga": "2"},
        annotations={"example.com/note": "x"},
    )
    assert [(v.name, v.value) for v in config.env[:3]] == [("A", "1"), ("B", "2"), ("C", "true")]
    assert config.env[3].value_from.secret_key_ref.key == "k"
    assert config.env_from[0].config_map_ref.name == "cm"
    assert (config.env_from[1].secret_ref.name, config.env_from[1].prefix) == ("sec", "S_")
    assert config.requests == {"cpu": "1", "example.com/fpga": "2"}


@pytest.mark.parametrize(
    ("kwargs", "fragments"),
    [
        ({"env": [{"name": "A", "valu": "b"}]}, ["[0].valu", "did you mean 'value'?"]),
        ({"tolerations": [{"key": "a", "operater": "Exists"}]}, ["[0].operater", "did you mean 'operator'?"]),
        ({"limits": {"cpu": "lots"}}, ["lots is not a Kubernetes quantity"]),
        ({"labels": {"bad key": "x"}}, ["not a valid label key"]),
        ({"env": {"1A": "x"}}, ["not a valid environment variable name"]),
        ({"run_policy": {"cleanPodPolicy": "Sometimes"}}, ["cleanPodPolicy", "'All'"]),
        ({"node_selctor": {"a": "b"}}, ["node_selctor"]),
    ],
)
def test_distributed_config_refuses_bad_values(kwargs: dict[str, Any], fragments: list[str]) -> None:
    with pytest.raises(SpecError) as info:
        DistributedConfig(**kwargs)
    for fragment in fragments:
        assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "path", "message", "hint"),
    [
        ({"limits": {"nvidia.com/gpu": 0.5}}, 'limits."nvidia.com/gpu"', "must be a whole number",
         "resources.gpu below 1"),
        ({"requests": {"cpu": "lots"}}, "requests.cpu", "not a Kubernetes quantity", None),
        ({"env": 5}, "env", "must be a list", None),
        ({"run_policy": {"backoff_limit": -1}}, "run_policy.backoff_limit", "greater than or equal to 0", None),
        ({"node_selctor": {"a": "b"}}, "node_selctor", "unknown field", "did you mean 'node_selector'?"),
        ({"nodeSelctor": {"a": "b"}}, "nodeSelctor", "unknown field", "did you mean 'nodeSelector'?"),
        ({"tolerations": [{"key": "a", "tolerationSeconds": "soon"}]}, "tolerations[0].tolerationSeconds",
         "must be of type integer", None),
    ],
)
def test_distributed_config_raises_spec_errors_with_paths_and_hints(
    kwargs: dict[str, Any], path: str, message: str, hint: str | None
) -> None:
    """Built directly in Python, as Kale does: the same SpecError a job file gets, never pydantic's report."""
    with pytest.raises(SpecError) as info:
        DistributedConfig(**kwargs)
    error = info.value
    assert isinstance(error, ValueError)  # what callers written for pydantic's ValidationError catch
    assert error.paths == [path]
    [field] = error.errors
    assert message in field.message
    if hint is not None:
        assert field.hint is not None and hint in field.hint
    shown = str(error)
    assert shown.startswith(f"{path}: ")
    assert "pydantic" not in shown and "validation error for" not in shown


def test_distributed_config_names_the_field_of_a_kubeflow_run_policy() -> None:
    from kubeflow.training import KubeflowOrgV1RunPolicy

    with pytest.raises(SpecError) as info:
        DistributedConfig(run_policy=KubeflowOrgV1RunPolicy(backoff_limit=-1))
    assert info.value.paths == ["run_policy.backoff_limit"]


def test_distributed_config_reports_every_problem_at_once() -> None:
    with pytest.raises(SpecError) as info:
        DistributedConfig(limits={"example.com/fpga": "500m", "cpu": "1"}, labels={"a": "b c"}, env={"1A": "x"})
    assert sorted(info.value.paths) == ["env[0].name", "labels.a", 'limits."example.com/fpga"']


def job_text(spec: str) -> str:
    return f"apiVersion: kubetrain.dev/v1alpha1\nkind: TrainJob\nmetadata: {{name: demo}}\nspec:\n{spec}"


def test_with_config_applies_to_every_replica() -> None:
    job = load_text(job_text("""\
  framework: tensorflow
  run: {python: [train.py]}
  env: {ENV1: from-job, KEEP: job}
  labels: {team: vision}
  tolerations: [{key: a, operator: Exists}]
  runPolicy: {backoffLimit: 2, cleanPodPolicy: None}
  roles:
    worker: {replicas: 2}
    ps: {replicas: 1, env: {ROLE: ps}}
"""))
    config = DistributedConfig(
        env=[V1EnvVar(name="ENV1", value="VALUE1")],
        labels={"significant-label": "a-value"},
        tolerations=[{"key": "b", "operator": "Exists"}],
        node_selector={"node-id": "1234"},
        run_policy=RunPolicy(clean_pod_policy="All"),
    )
    configured = job.with_config(config)
    assert configured is not job and job.spec.node_selector is None  # the original is unchanged
    spec = configured.spec
    assert [(v.name, v.value) for v in spec.env] == [("ENV1", "VALUE1"), ("KEEP", "job")]
    assert spec.labels == {"team": "vision", "significant-label": "a-value"}
    assert [t.key for t in spec.tolerations] == ["a", "b"]
    assert spec.node_selector == {"node-id": "1234"}
    assert (spec.run_policy.clean_pod_policy, spec.run_policy.backoff_limit) == ("All", 2)
    ps = spec.role_settings("ps")
    assert {v.name: v.value for v in ps.env} == {"ENV1": "VALUE1", "KEEP": "job", "ROLE": "ps"}
    assert ps.node_selector == {"node-id": "1234"}
    assert configured.to_dict()["spec"]["nodeSelector"] == {"node-id": "1234"}


# -- role merging --------------------------------------------------------------------------------------------

TF_JOB = job_text("""\
  framework: tensorflow
  run: {python: [train.py]}
  image: job:1
  env:
    - {name: A, value: job-a}
    - {name: B, value: job-b}
  labels: {team: vision, tier: gold}
  tolerations: [{key: job, operator: Exists}]
  mounts: ['type=volume,src=data,dst=/data']
  resources: {cpu: 2, memory: 4Gi, shm: 1Gi}
  security: {runAsUid: 1000, capabilities: [IPC_LOCK]}
  roles:
    chief: {replicas: 1}
    worker: {replicas: 2, image: worker:1}
    ps:
      replicas: 2
      run: {python: [ps.py]}
      env: {B: ps-b, C: ps-c}
      labels: {tier: silver, role: ps}
      tolerations: [{key: ps, operator: Exists}]
      mounts: ['type=bind,src=/ps,dst=/ps']
      resources: {memory: 8Gi}
      security: {runAsUid: 2000}
""")


def test_role_settings_merge_env_by_name() -> None:
    ps = load_text(TF_JOB).spec.role_settings("ps")
    assert [(v.name, v.value) for v in ps.env] == [("A", "job-a"), ("B", "ps-b"), ("C", "ps-c")]


def test_role_settings_merge_maps_append_lists_replace_scalars() -> None:
    ps = load_text(TF_JOB).spec.role_settings("ps")
    assert ps.labels == {"team": "vision", "tier": "silver", "role": "ps"}
    assert [t.key for t in ps.tolerations] == ["job", "ps"]
    assert [m.dst for m in ps.mounts] == ["/data", "/ps"]
    assert ps.image == "job:1"
    assert ps.run is not None and ps.run.python == ["ps.py"]


def test_role_settings_merge_resources_field_by_field() -> None:
    ps = load_text(TF_JOB).spec.role_settings("ps")
    assert ps.resources is not None
    assert (ps.resources.cpu, ps.resources.memory, ps.resources.shm) == ("2", "8Gi", "1Gi")
    assert ps.security is not None
    assert (ps.security.run_as_uid, ps.security.capabilities) == (2000, ["IPC_LOCK"])


def test_role_without_overrides_gets_the_jobs_settings() -> None:
    spec = load_text(TF_JOB).spec
    chief = spec.role_settings("chief")
    assert chief.image == "job:1" and chief.labels == {"team": "vision", "tier": "gold"}
    assert [(v.name, v.value) for v in chief.env] == [("A", "job-a"), ("B", "job-b")]
    assert chief.run is not None and chief.run.python == ["train.py"]
    assert spec.role_settings("worker").image == "worker:1"
    with pytest.raises(KeyError):
        spec.role_settings("evaluator")


def test_role_settings_of_the_shorthand_form() -> None:
    spec = load_text(job_text("  run: {python: [a.py]}\n  replicas: 3\n  image: x:1\n")).spec
    worker = spec.role_settings("worker")
    assert isinstance(worker, ReplicaSettings)
    assert worker.image == "x:1" and worker.run is not None and worker.run.python == ["a.py"]


def test_role_settings_do_not_change_the_job() -> None:
    spec = load_text(TF_JOB).spec
    spec.role_settings("ps")
    assert [(v.name, v.value) for v in spec.env] == [("A", "job-a"), ("B", "job-b")]
    assert spec.labels == {"team": "vision", "tier": "gold"}
    assert [t.key for t in spec.tolerations] == ["job"]


def test_roles_are_ordered_by_framework() -> None:
    spec = load_text(job_text("""\
  framework: tensorflow
  run: {python: [a.py]}
  roles: {ps: {replicas: 2}, evaluator: {}, worker: {replicas: 3}, chief: {}}
""")).spec
    assert list(spec.role_replicas().items()) == [("chief", 1), ("worker", 3), ("ps", 2), ("evaluator", 1)]


def test_generic_roles_keep_their_written_order() -> None:
    spec = load_text(job_text("  run: {python: [a.py]}\n  roles: {server: {}, client: {replicas: 3}}\n")).spec
    assert list(spec.role_replicas().items()) == [("server", 1), ("client", 3)]


@pytest.mark.parametrize(
    ("framework", "roles"),
    [
        (Framework.PYTORCH, ("master", "worker")),
        (Framework.TENSORFLOW, ("chief", "worker", "ps", "evaluator")),
        (Framework.DEEPSPEED, ("launcher", "worker")),
        (Framework.MPI, ("launcher", "worker")),
        (Framework.JAX, ("worker",)),
    ],
)
def test_every_framework_role_is_accepted(framework: Framework, roles: tuple[str, ...]) -> None:
    assert ROLES[framework] == roles
    data = {"metadata": {"name": "demo"}, "spec": {"framework": framework.value, "run": {"python": ["a.py"]},
                                                   "roles": {r: {} for r in roles}}}
    assert tuple(from_dict(data).spec.role_replicas()) == roles


# -- field types ---------------------------------------------------------------------------------------------


def test_mount_strings_become_objects() -> None:
    spec = load_text(job_text("""\
  run: {python: [a.py]}
  mounts:
    - type=bind,src=/data,dst=/data,readonly
    - type=volume,source=datasets,target=/ds,ro
    - type=device,src=/dev/fuse
    - type=bind, src=/x , dst=/y, readonly=false
""")).spec
    bind, volume, device, spaced = spec.mounts
    assert (bind.type, bind.src, bind.dst, bind.readonly) == ("bind", "/data", "/data", True)
    assert (volume.type, volume.src, volume.dst, volume.readonly) == ("volume", "datasets", "/ds", True)
    assert (device.type, device.src, device.dst, device.perm) == ("device", "/dev/fuse", None, "rwm")
    assert (spaced.src, spaced.dst, spaced.readonly) == ("/x", "/y", False)


def test_whole_extended_resources_and_gpu_fractions_are_accepted() -> None:
    """Only raw quantities of extended resources must be whole: native resources may be fractions, and a
    share of a GPU is expressed by resources.gpu with a GPU-sharing scheduler."""
    spec = load_text(job_text("""\
  run: {python: [a.py]}
  requests: {cpu: "0.5", memory: 1.5Gi, example.kubernetes.io/x: "0.5", nvidia.com/gpu: "1.0"}
  limits: {nvidia.com/gpu: 1, hugepages-2Mi: 4Mi, example.com/fpga: 2000m}
  resources: {gpu: 0.25, gpuSharing: runai, extendedResources: {rdma/hca: 1}}
""")).spec
    assert spec.limits == {"nvidia.com/gpu": "1", "hugepages-2Mi": "4Mi", "example.com/fpga": "2000m"}
    assert spec.resources is not None and spec.resources.gpu == 0.25
    for name, value in (("nvidia.com/gpu", "0.5"), ("example.com/fpga", "1500m"), ("hugepages-1Gi", "1.5Gi")):
        with pytest.raises(SpecError) as info:
            load_text(job_text(f"  run: {{python: [a.py]}}\n  limits: {{{name}: {value}, memory: 1Gi}}\n"))
        assert info.value.paths == [f'spec.limits."{name}"' if "/" in name else f"spec.limits.{name}"]


def test_quantities_are_kept_as_written() -> None:
    resources = Resources(cpu=2, memory="16Gi", cpu_limit="2500m", extended_resources={"rdma/hca": 1})
    assert (resources.cpu, resources.memory, resources.cpu_limit) == ("2", "16Gi", "2500m")
    assert resources.extended_resources == {"rdma/hca": "1"}


@pytest.mark.parametrize(
    ("fields", "gpus"),
    [
        ({}, 0),
        ({"gpu": 2}, 2),
        ({"gpu": 0.5, "gpu_sharing": "hami"}, 0.5),
        ({"gpu_memory": "8Gi", "gpu_sharing": "runai"}, 0),
        ({"mig_profile": "1g.5gb"}, 1),
        ({"mig_profile": "3g.20gb", "gpu": 2}, 2),
    ],
)
def test_gpu_forms(fields: dict[str, Any], gpus: float) -> None:
    assert Resources(**fields).gpu_count() == gpus


def test_procs_per_replica_auto() -> None:
    spec = load_text(job_text("  run: {python: [a.py]}\n  procsPerReplica: auto\n  resources: {gpu: 4}\n")).spec
    assert spec.procs_per_replica == "auto"


def test_spec_error_is_a_value_error_with_paths() -> None:
    with pytest.raises(ValueError) as info:
        from_dict({"metadata": {"name": "Demo"}, "spec": {"replicas": 0}})
    assert isinstance(info.value, SpecError)
    assert sorted(info.value.paths) == ["metadata.name", "spec.replicas"]


def test_train_job_in_python() -> None:
    job = TrainJob(metadata={"name": "demo"}, spec={"framework": "pytorch", "run": {"python": ["a.py"]}, "replicas": 2})
    assert job == load_text(job_text("  framework: pytorch\n  run: {python: [a.py]}\n  replicas: 2\n"))
