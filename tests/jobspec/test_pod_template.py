"""`podTemplate`: a PodTemplateSpec accepted as written, its shape checked with field paths and did-you-means,
a role's replacing the job's, and its main container completing what the job leaves unset (the program,
image, env, workingDir) for every backend."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from kubetrain.cli.main import main
from kubetrain.jobspec import SpecError, TrainJob, from_dict, load_text
from kubetrain.jobspec.pod_template import MAIN_CONTAINER_NAMES, main_container_index, relaxations
from kubetrain.plan import plan, settings_for
from tests.support.helpers import make_job

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"team": "vision"}, "annotations": {"example.com/owner": "ml"}},
    "spec": {
        "imagePullSecrets": [{"name": "registry"}],
        "containers": [
            {
                "name": "trainer",
                "image": "registry.example.com/train:1",
                "command": ["python", "train.py"],
                "args": ["--steps", 5],
                "env": [{"name": "FROM_TEMPLATE", "value": "t"}, {"name": "SHARED", "value": "template"}],
                "workingDir": "/workspace",
            },
            {"name": "sidecar", "image": "registry.example.com/side:1"},
        ],
    },
}


def job(spec: dict[str, Any]) -> TrainJob:
    return make_job(spec, "demo")


def errors_of(template: Any, **spec: Any) -> SpecError:
    with pytest.raises(SpecError) as info:
        job({"replicas": 1, "run": {"python": ["train.py"]}, "podTemplate": template, **spec})
    return info.value


def test_a_template_is_kept_as_written() -> None:
    loaded = job({"replicas": 2, "podTemplate": TEMPLATE})
    written = loaded.to_dict()["spec"]["podTemplate"]
    assert written["spec"]["imagePullSecrets"] == [{"name": "registry"}]
    assert written["spec"]["containers"][0]["args"] == ["--steps", 5]
    assert from_dict(loaded.to_dict()) == loaded


def test_a_pod_spec_at_the_top_is_refused_with_the_hint_to_wrap_it() -> None:
    text = """\
apiVersion: kubetrain.dev/v1alpha1
kind: TrainJob
metadata: {name: demo}
spec:
  replicas: 1
  run: {python: [train.py]}
  podTemplate:
    containers: [{name: main, image: x}]
"""
    with pytest.raises(SpecError) as info:
        load_text(text, source="job.yaml")
    (error,) = info.value.errors
    assert error.path == ("spec", "podTemplate", "containers")
    assert error.line == 8
    assert "pod spec field" in error.message
    assert "under `spec:`" in (error.hint or "")


@pytest.mark.parametrize(
    ("template", "path", "hint"),
    [
        ({"metdata": {}}, "spec.podTemplate.metdata", "did you mean 'metadata'?"),
        (
            {"spec": {"imagePullSecret": []}},
            "spec.podTemplate.spec.imagePullSecret",
            "did you mean 'imagePullSecrets'?",
        ),
        (
            {"spec": {"containers": [{"name": "a", "livenesProbe": {}}]}},
            "spec.podTemplate.spec.containers[0].livenesProbe",
            "did you mean 'livenessProbe'?",
        ),
        ({"metadata": {"name": "mine"}}, "spec.podTemplate.metadata.name", "only labels and annotations"),
    ],
)
def test_unknown_fields_get_a_did_you_mean(template: dict[str, Any], path: str, hint: str) -> None:
    error = errors_of(template)
    assert error.paths == [path]
    assert error.errors[0].hint == hint


def test_types_of_what_kubetrain_merges_are_checked_all_at_once() -> None:
    error = errors_of(
        {
            "metadata": {"labels": {"team": "not a label value!"}},
            "spec": {
                "hostNetwork": "yes",
                "volumes": [{"name": "data", "emptyDir": {}}, {"name": "data", "emptyDir": {}}],
                "tolerations": {"key": "gpu"},
                "containers": [
                    {"image": "x"},
                    {
                        "name": "b",
                        "command": "python train.py",
                        "env": [{"name": "1BAD", "value": "x"}],
                        "ports": [{"containerPort": "80"}],
                    },
                ],
            },
        }
    )
    assert set(error.paths) == {
        "spec.podTemplate.metadata.labels.team",
        "spec.podTemplate.spec.hostNetwork",
        "spec.podTemplate.spec.volumes[1].name",
        "spec.podTemplate.spec.tolerations",
        "spec.podTemplate.spec.containers[0].name",
        "spec.podTemplate.spec.containers[1].command",
        "spec.podTemplate.spec.containers[1].env[0].name",
        "spec.podTemplate.spec.containers[1].ports[0].containerPort",
    }


def test_container_names_are_unique_across_init_and_app_containers() -> None:
    error = errors_of({"spec": {"initContainers": [{"name": "fetch"}], "containers": [{"name": "fetch"}]}})
    assert error.paths == ["spec.podTemplate.spec.containers[0].name"]


def test_kubetrains_own_label_and_annotation_keys_are_refused_where_written() -> None:
    """The job, role and replica-index keys select and order the job's pods (an annotation is read as the
    index too): a template's metadata merges under kubetrain's, so one given there is refused at load, with
    its path and line, at the job's level and a role's, all at once."""
    text = """\
apiVersion: kubetrain.dev/v1alpha1
kind: TrainJob
metadata: {name: demo}
spec:
  framework: pytorch
  run: {python: [train.py]}
  podTemplate:
    metadata:
      labels: {team: vision, kubetrain.dev/job: other}
  roles:
    master: {}
    worker:
      replicas: 2
      podTemplate:
        metadata:
          labels: {app.kubernetes.io/managed-by: me}
          annotations: {example.com/owner: ml, kubetrain.dev/replica-index: "3"}
"""
    with pytest.raises(SpecError) as info:
        load_text(text, source="job.yaml")
    found = {(e.line, e.path, e.message) for e in info.value.errors}
    refused = "is set by kubetrain and cannot be given"
    assert found == {
        (9, ("spec", "podTemplate", "metadata", "labels", "kubetrain.dev/job"), refused),
        (16, ("spec", "roles", "worker", "podTemplate", "metadata", "labels", "app.kubernetes.io/managed-by"), refused),
        (
            17,
            ("spec", "roles", "worker", "podTemplate", "metadata", "annotations", "kubetrain.dev/replica-index"),
            refused,
        ),
    }
    assert all("use a key of your own" in (e.hint or "") for e in info.value.errors)


def test_other_keys_of_kubetrains_domain_are_a_templates_own() -> None:
    """As in `metadata.labels`: only the keys kubetrain sets are refused, not the whole domain."""
    template = {"metadata": {"labels": {"kubetrain.dev/team": "vision"}, "annotations": {"kubetrain.dev/owner": "ml"}}}
    loaded = job({"replicas": 1, "run": {"python": ["train.py"]}, "podTemplate": template})
    assert loaded.spec.pod_template["metadata"] == template["metadata"]


def test_a_client_model_is_taken_as_its_api_form() -> None:
    model = client.V1PodTemplateSpec(
        spec=client.V1PodSpec(
            containers=[client.V1Container(name="main", image="x", command=["python", "t.py"])],
            image_pull_secrets=[client.V1LocalObjectReference(name="registry")],
        )
    )
    loaded = job({"replicas": 1, "podTemplate": model})
    assert loaded.spec.pod_template["spec"]["imagePullSecrets"] == [{"name": "registry"}]
    assert plan(loaded).processes[0].argv == ("python", "t.py")


def test_a_role_template_replaces_the_jobs() -> None:
    role_template = {"spec": {"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["data"]}]}}
    loaded = job(
        {
            "framework": "pytorch",
            "run": {"python": ["train.py"]},
            "podTemplate": TEMPLATE,
            "roles": {"master": {}, "worker": {"replicas": 2, "podTemplate": role_template}},
        }
    )
    assert settings_for(loaded.spec, "worker").pod_template == role_template
    assert settings_for(loaded.spec, "master").pod_template == TEMPLATE


def test_the_template_command_and_args_are_the_program() -> None:
    loaded = job({"replicas": 2, "podTemplate": TEMPLATE})
    the_plan = plan(loaded)
    assert [p.argv for p in the_plan.processes] == [("python", "train.py", "--steps", "5")] * 2
    settings = the_plan.settings["worker"]
    assert settings.image == "registry.example.com/train:1"
    assert settings.working_dir == "/workspace"


def test_the_jobs_own_settings_come_first() -> None:
    loaded = job(
        {
            "replicas": 1,
            "run": {"python": ["mine.py"]},
            "image": "mine:1",
            "workingDir": "/mine",
            "env": {"SHARED": "job", "OWN": "$(FROM_TEMPLATE)-job"},
            "podTemplate": TEMPLATE,
        }
    )
    the_plan = plan(loaded)
    assert the_plan.processes[0].argv[1:] == ("mine.py",)
    settings = the_plan.settings["worker"]
    assert (settings.image, settings.working_dir) == ("mine:1", "/mine")
    # The template's env under the job's: its own names first (so the job's may refer to them), the job's win.
    assert [(v.name, v.value) for v in settings.env] == [
        ("FROM_TEMPLATE", "t"),
        ("SHARED", "job"),
        ("OWN", "$(FROM_TEMPLATE)-job"),
    ]


def test_nothing_to_run_unless_the_main_container_has_a_command() -> None:
    with pytest.raises(SpecError) as info:
        job({"replicas": 1, "podTemplate": {"spec": {"containers": [{"name": "main", "args": ["--steps", "5"]}]}}})
    assert info.value.paths == ["spec.run"]
    assert "args but no command" in info.value.errors[0].message
    with pytest.raises(SpecError) as info:
        job({"framework": "pytorch", "roles": {"master": {"podTemplate": TEMPLATE}, "worker": {}}})
    assert info.value.paths == ["spec.roles.worker.run"]


def test_the_main_container_is_the_one_kubetrain_names_else_the_first() -> None:
    containers = [{"name": "sidecar"}, {"name": "pytorch"}, {"name": "other"}]
    assert main_container_index({"spec": {"containers": containers}}) == 1
    assert main_container_index({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}) == 0
    assert main_container_index({"spec": {}}) is None


def test_main_container_names_cover_every_training_operator_container() -> None:
    from kubetrain.contract.frameworks import RECORDS

    operator_names = {s.kubeflow.container for s in RECORDS.values() if s.kubeflow is not None}
    assert operator_names | {"main"} == set(MAIN_CONTAINER_NAMES)


def test_relaxations_name_each_field_path() -> None:
    found = dict(
        relaxations(
            {
                "spec": {
                    "hostPID": True,
                    "securityContext": {"seccompProfile": {"type": "Unconfined"}},
                    "volumes": [{"name": "docker", "hostPath": {"path": "/var/run/docker.sock"}}],
                    "initContainers": [{"name": "i", "securityContext": {"runAsUser": 0}}],
                    "containers": [
                        {
                            "name": "m",
                            "securityContext": {
                                "allowPrivilegeEscalation": True,
                                "capabilities": {"add": ["NET_ADMIN"]},
                            },
                        }
                    ],
                }
            }
        )
    )
    assert set(found) == {
        ("spec", "hostPID"),
        ("spec", "securityContext", "seccompProfile", "type"),
        ("spec", "volumes", 0, "hostPath"),
        ("spec", "initContainers", 0, "securityContext", "runAsUser"),
        ("spec", "containers", 0, "securityContext", "allowPrivilegeEscalation"),
        ("spec", "containers", 0, "securityContext", "capabilities", "add"),
    }
    assert "/var/run/docker.sock" in found[("spec", "volumes", 0, "hostPath")]
    assert not list(relaxations({"spec": {"hostNetwork": False, "securityContext": {"runAsUser": 1000}}}))


def test_explain_says_the_precedence(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "spec.podTemplate"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "FIELD: spec.podTemplate <V1PodTemplateSpec>" in text
    assert "the template is the base and kubetrain's pod goes on top" in text
    assert "kubetrain's keys win" in text and "A role's replaces the job's" in text
    assert "is warned with its path" in text
