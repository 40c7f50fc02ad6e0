"""A podTemplate under kubetrain's pod, on every flavor: schema-valid manifests, the documented precedence
(kubetrain's on top, lists by their merge keys, the main container first), kubetrain's security defaults where
the template says nothing, and a loud warning, with the field's path, for each default it relaxes."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.backends.kubernetes.render import FLAVORS, Rendered, render_manifests
from kubetrain.cli.main import main
from kubetrain.contract.labels import RESERVED_LABELS
from kubetrain.jobspec import SpecError
from tests.support.helpers import make_job
from tests.support.kubelet import IMAGE, pod_templates
from tests.support.manifest_schemas import assert_valid

TEMPLATE: dict[str, Any] = {
    "metadata": {
        "labels": {"team": "vision", "tier": "template"},
        "annotations": {"example.com/owner": "ml"},
    },
    "spec": {
        "imagePullSecrets": [{"name": "registry"}],
        "priorityClassName": "from-template",
        "hostAliases": [{"ip": "10.0.0.5", "hostnames": ["datasets.internal"]}],
        "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        "initContainers": [{"name": "fetch", "image": "busybox:1", "command": ["sh", "-c", "echo fetched"]}],
        "containers": [
            {"name": "logger", "image": "registry.example.com/logger:1", "args": ["--follow"]},
            {
                "name": "main",
                "image": "registry.example.com/ignored:0",
                "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]}, "periodSeconds": 5},
                "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 1"]}}},
                "env": [{"name": "SHARED", "value": "template"}, {"name": "TEMPLATE_ONLY", "value": "t"}],
                "ports": [{"name": "metrics", "containerPort": 9090}, {"containerPort": 6006, "name": "template-tb"}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "scratch", "mountPath": "/scratch"}],
                "resources": {"requests": {"memory": "1Gi"}, "limits": {"example.com/fpga": 1}},
            },
        ],
        "volumes": [
            {"name": "data", "csi": {"driver": "datasets.csi.example.com", "readOnly": True}},
            {
                "name": "scratch",
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
                    }
                },
            },
        ],
    },
}

SPEC: dict[str, Any] = {
    "framework": "pytorch",
    "replicas": 2,
    "run": {"python": ["train.py"]},
    "env": {"SHARED": "job"},
    "ports": [{"container": 6006, "name": "tensorboard"}],
    "mounts": [{"type": "emptyDir", "dst": "/scratch"}],
    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "resources": {"cpu": 2},
    "labels": {"tier": "job"},
    "podTemplate": TEMPLATE,
}


def rendered(spec: dict[str, Any], flavor: str = "job") -> Rendered:
    result = render_manifests(make_job(spec, "demo", image=IMAGE), flavor)
    assert_valid(result.objects)
    return result


def worker(result: Rendered) -> dict[str, Any]:
    return pod_templates(result.objects)["worker"]


def by(items: list[dict[str, Any]], key: str) -> dict[Any, dict[str, Any]]:
    return {item[key]: item for item in items}


@pytest.mark.parametrize("flavor", FLAVORS)
def test_every_flavor_renders_the_template_valid_and_kept(flavor: str) -> None:
    result = rendered(SPEC, flavor)
    pod = worker(result)
    spec = pod["spec"]
    assert spec["imagePullSecrets"] == [{"name": "registry"}]
    assert spec["hostAliases"] == TEMPLATE["spec"]["hostAliases"]
    assert [c["name"] for c in spec["initContainers"]] == ["fetch"]
    main_container, *others = spec["containers"]
    # The main container comes first, under the flavor's name (the training operator looks for its own).
    assert main_container["name"] == ("pytorch" if flavor == "kubeflow" else "main")
    assert [c["name"] for c in others] == ["logger"]
    assert main_container["readinessProbe"] == TEMPLATE["spec"]["containers"][1]["readinessProbe"]
    assert main_container["lifecycle"] == TEMPLATE["spec"]["containers"][1]["lifecycle"]
    volumes = by(spec["volumes"], "name")
    assert volumes["data"]["csi"]["driver"] == "datasets.csi.example.com"
    assert pod["metadata"]["labels"]["team"] == "vision"
    assert pod["metadata"]["annotations"]["example.com/owner"] == "ml"


def test_kubetrains_values_win_and_lists_merge_by_their_keys() -> None:
    pod = worker(rendered(SPEC))
    spec = pod["spec"]
    main_container = spec["containers"][0]
    assert pod["metadata"]["labels"]["tier"] == "job"  # the job's label keys win
    assert pod["metadata"]["labels"]["kubetrain.dev/job"] == "demo"
    assert main_container["image"] == IMAGE  # the job's image over the template's
    assert main_container["args"] == ["python", "train.py"]
    env = by(main_container["env"], "name")
    assert env["SHARED"]["value"] == "job"  # by name, the job's wins
    assert env["TEMPLATE_ONLY"]["value"] == "t"
    ports = by(main_container["ports"], "containerPort")
    assert ports[9090]["name"] == "metrics"
    assert ports[6006]["name"] == "tensorboard"  # by containerPort: kubetrain's item wins
    assert ports[29500]["name"] == "kubetrain"
    mounts = by(main_container["volumeMounts"], "mountPath")
    assert mounts["/data"]["name"] == "data"
    assert mounts["/scratch"]["name"] != "scratch"  # by mountPath: the job's emptyDir mount wins
    assert main_container["resources"]["requests"] == {"memory": "1Gi", "cpu": "2"}
    assert main_container["resources"]["limits"]["example.com/fpga"] == 1
    assert [t["key"] for t in spec["tolerations"]] == ["spot", "gpu"]  # appended
    assert spec["priorityClassName"] == "from-template"  # kubetrain sets none
    with_priority = worker(rendered({**SPEC, "scheduling": {"priorityClass": "high"}}))
    assert with_priority["spec"]["priorityClassName"] == "high"


def test_a_volume_of_the_same_name_is_kubetrains() -> None:
    template = copy.deepcopy(TEMPLATE)
    template["spec"]["volumes"].append({"name": "kubetrain-shm", "hostPath": {"path": "/dev/shm"}})
    spec = worker(rendered({**SPEC, "podTemplate": template, "resources": {"shm": "1Gi"}}))["spec"]
    names = [v["name"] for v in spec["volumes"]]
    shm = [v for v in spec["volumes"] if "emptyDir" in v and v["emptyDir"].get("medium") == "Memory"]
    assert len(names) == len(set(names))
    assert shm, "kubetrain's shared-memory volume is rendered"
    assert not any("hostPath" in v and v["name"] == shm[0]["name"] for v in spec["volumes"])


def test_the_template_gives_image_command_args_env_and_working_dir_when_the_job_does_not() -> None:
    template = {
        "spec": {
            "containers": [
                {
                    "name": "trainer",
                    "image": "registry.example.com/t:2",
                    "command": ["python", "-m", "pkg.train"],
                    "args": ["--lr", "0.1"],
                    "workingDir": "/workspace",
                    "env": [{"name": "A", "value": "1"}],
                }
            ]
        }
    }
    job = make_job({"framework": "pytorch", "replicas": 2, "podTemplate": template}, "demo", image=IMAGE)
    job = job.model_copy(update={"spec": job.spec.model_copy(update={"image": None})})
    result = render_manifests(job, "job")
    assert_valid(result.objects)
    (main_container,) = worker(result)["spec"]["containers"]
    assert main_container["image"] == "registry.example.com/t:2"
    assert main_container["args"] == ["python", "-m", "pkg.train", "--lr", "0.1"]
    assert main_container["workingDir"] == "/workspace"
    assert by(main_container["env"], "name")["A"]["value"] == "1"
    assert main_container["command"][:2] == ["/bin/sh", "-c"]  # kubetrain's start-up script runs the program
    assert not any("not used" in w for w in result.warnings)


def test_a_job_run_replaces_the_template_command_and_says_so() -> None:
    template = {"spec": {"containers": [{"name": "main", "command": ["python", "other.py"]}]}}
    result = rendered({**SPEC, "podTemplate": template})
    assert worker(result)["spec"]["containers"][0]["args"] == ["python", "train.py"]
    assert any(
        w.startswith("spec.podTemplate.spec.containers[0]: its command and args are not used: spec.run")
        for w in result.warnings
    ), result.warnings


def test_security_defaults_apply_to_every_container_the_template_leaves_open() -> None:
    spec = worker(rendered(SPEC))["spec"]
    locked = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    for container in [*spec["initContainers"], *spec["containers"]]:
        assert container["securityContext"] == locked, container["name"]
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False


@pytest.mark.parametrize("key", RESERVED_LABELS)
def test_a_template_gives_none_of_kubetrains_labels_as_the_job_may_not(key: str) -> None:
    """One rule, one message: refused in the template when loaded, as the render refuses it in `labels`."""
    with pytest.raises(SpecError) as in_template:
        make_job({**SPEC, "podTemplate": {"metadata": {"labels": {key: "x"}}}}, "demo", image=IMAGE)
    with pytest.raises(SpecError) as in_labels:
        render_manifests(make_job({**SPEC, "labels": {key: "x"}}, "demo", image=IMAGE), "job")
    (template_error,) = in_template.value.errors
    (labels_error,) = in_labels.value.errors
    assert template_error.path == ("spec", "podTemplate", "metadata", "labels", key)
    assert labels_error.path == ("spec", "labels", key)
    assert template_error.message == labels_error.message


# -- port names ------------------------------------------------------------------------------------------

# The port name kubetrain gives the framework's port: the training operator finds its port by its own name.
FRAMEWORK_PORT_NAME = {"kubeflow": "pytorchjob-port"}


def main_ports(result: Rendered) -> dict[int, dict[str, Any]]:
    ports = worker(result)["spec"]["containers"][0]["ports"]
    names = [p["name"] for p in ports if "name" in p]
    assert len(names) == len(set(names)), f"the API server refuses a container with two ports of one name: {ports}"
    return by(ports, "containerPort")


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_template_port_named_as_kubetrains_is_renamed_with_its_references(flavor: str) -> None:
    """A template written for any flavor: the port named as this flavor's framework port (on another number)
    is renamed, and its probe follows it; the name only another flavor uses is kept."""
    ours = FRAMEWORK_PORT_NAME.get(flavor, "kubetrain")
    other = "kubetrain" if ours != "kubetrain" else "pytorchjob-port"
    template = {
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "ports": [{"name": ours, "containerPort": 8080}, {"name": other, "containerPort": 8081}],
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": ours}},
                    "livenessProbe": {"tcpSocket": {"port": other}},
                }
            ]
        }
    }
    result = rendered({**SPEC, "podTemplate": template}, flavor)
    ports = main_ports(result)
    assert ports[29500]["name"] == ours  # kubetrain's name stays on the framework's port
    assert ports[8080]["name"] == "port-8080"
    assert ports[8081]["name"] == other
    main_container = worker(result)["spec"]["containers"][0]
    assert main_container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "port-8080"}
    assert main_container["livenessProbe"]["tcpSocket"] == {"port": other}


def test_a_template_port_named_as_a_job_port_is_renamed_to_a_free_name() -> None:
    template = {
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "ports": [
                        {"name": "tensorboard", "containerPort": 7007},
                        {"name": "port-7007", "containerPort": 7008},
                    ],
                    "lifecycle": {"preStop": {"httpGet": {"path": "/drain", "port": "tensorboard"}}},
                }
            ]
        }
    }
    result = rendered({**SPEC, "podTemplate": template})  # the job's port 6006 is named tensorboard
    ports = main_ports(result)
    assert ports[6006]["name"] == "tensorboard"
    assert ports[7007]["name"] == "port-7007-2"
    assert ports[7008]["name"] == "port-7007"
    lifecycle = worker(result)["spec"]["containers"][0]["lifecycle"]
    assert lifecycle["preStop"]["httpGet"]["port"] == "port-7007-2"


def test_a_reference_to_a_template_port_kubetrain_replaces_follows_kubetrains_name() -> None:
    """The same number is the same port: kubetrain's item replaces the template's, and the template's probe,
    which named the port its own way, now names it kubetrain's way."""
    template = {
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "ports": [{"name": "rendezvous", "containerPort": 29500}],
                    "startupProbe": {"tcpSocket": {"port": "rendezvous"}},
                }
            ]
        }
    }
    result = rendered({**SPEC, "podTemplate": template})
    assert main_ports(result)[29500]["name"] == "kubetrain"
    assert worker(result)["spec"]["containers"][0]["startupProbe"] == {"tcpSocket": {"port": "kubetrain"}}


def test_a_sidecar_port_keeps_its_name() -> None:
    """The API server refuses two ports of one name in one container; in another container the template's
    port is left as written (the main container comes first, so a lookup by name finds kubetrain's)."""
    template = {
        "spec": {
            "containers": [
                {"name": "main"},
                {
                    "name": "proxy",
                    "image": "registry.example.com/proxy:1",
                    "ports": [{"name": "kubetrain", "containerPort": 8080}],
                },
            ]
        }
    }
    _, proxy = worker(rendered({**SPEC, "podTemplate": template}))["spec"]["containers"]
    assert proxy["ports"] == [{"name": "kubetrain", "containerPort": 8080}]


RELAXING: dict[str, Any] = {
    "spec": {
        "hostNetwork": True,
        "securityContext": {"runAsUser": 0, "seccompProfile": {"type": "Unconfined"}},
        "volumes": [{"name": "sock", "hostPath": {"path": "/var/run/docker.sock"}}],
        "containers": [
            {
                "name": "main",
                "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}},
                "volumeMounts": [{"name": "sock", "mountPath": "/var/run/docker.sock"}],
            },
            {"name": "debugger", "image": "busybox:1", "securityContext": {"privileged": True}},
        ],
    }
}


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_relaxing_template_is_honoured_and_warned_loudly(flavor: str) -> None:
    result = rendered({**SPEC, "podTemplate": RELAXING}, flavor)
    spec = worker(result)["spec"]
    assert spec["hostNetwork"] is True
    assert spec["securityContext"]["runAsUser"] == 0
    assert spec["securityContext"]["seccompProfile"] == {"type": "Unconfined"}
    main_container, debugger = spec["containers"]
    # Kubernetes refuses CAP_SYS_ADMIN or privileged without escalation: the template asked for both.
    assert main_container["securityContext"] == {
        "allowPrivilegeEscalation": True,
        "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]},
    }
    assert debugger["securityContext"]["privileged"] is True
    assert debugger["securityContext"]["allowPrivilegeEscalation"] is True
    relaxed = sorted(w.split(":")[0] for w in result.warnings if "RELAXES kubetrain's security defaults" in w)
    assert relaxed == sorted(
        [
            "spec.podTemplate.spec.hostNetwork",
            "spec.podTemplate.spec.securityContext.runAsUser",
            "spec.podTemplate.spec.securityContext.seccompProfile.type",
            "spec.podTemplate.spec.volumes[0].hostPath",
            "spec.podTemplate.spec.containers[0].securityContext.capabilities.add",
            "spec.podTemplate.spec.containers[1].securityContext.privileged",
        ]
    )


def test_the_jobs_security_stands_over_the_template_and_is_not_warned() -> None:
    template = {
        "spec": {
            "securityContext": {"runAsUser": 0},
            "containers": [{"name": "main", "securityContext": {"allowPrivilegeEscalation": True}}],
        }
    }
    result = rendered(
        {**SPEC, "podTemplate": template, "security": {"runAsUid": 1000, "allowPrivilegeEscalation": False}}
    )
    spec = worker(result)["spec"]
    assert spec["securityContext"]["runAsUser"] == 1000
    assert spec["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False
    assert not [w for w in result.warnings if "RELAXES" in w]


def test_a_roles_template_is_warned_at_the_roles_path() -> None:
    spec = {
        "framework": "pytorch",
        "run": {"python": ["train.py"]},
        "roles": {"master": {}, "worker": {"replicas": 2, "podTemplate": {"spec": {"hostPID": True}}}},
    }
    result = rendered(spec)
    templates = pod_templates(result.objects)
    assert templates["worker"]["spec"]["hostPID"] is True
    assert "hostPID" not in templates["master"]["spec"]
    assert any(
        w.startswith("spec.roles.worker.podTemplate.spec.hostPID: RELAXES") for w in result.warnings
    ), result.warnings


def test_render_and_validate_print_the_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.yaml"
    document = {
        "apiVersion": "kubetrain.dev/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "demo"},
        "spec": {**SPEC, "image": IMAGE, "podTemplate": {"spec": {"hostIPC": True}}},
    }
    path.write_text(yaml.safe_dump(document))
    expected = "spec.podTemplate.spec.hostIPC: RELAXES kubetrain's security defaults"
    assert main(["render", str(path)]) == 0
    rendered_out = capsys.readouterr()
    assert expected in rendered_out.err
    assert "hostIPC: true" in rendered_out.out
    assert main(["validate", str(path), "--backend", "kubernetes", "--flavor", "jobset"]) == 0
    assert expected in capsys.readouterr().err  # kubetrain's own messages go to stderr
