"""The machinery every foreign kind shares: nothing dropped silently, typos answered with the kind's own
names, pod templates split into typed settings plus a carried remainder, errors pointing at the SOURCE."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from kubetrain.foreign import convert, kind_of
from kubetrain.foreign.loader import load_job_file
from kubetrain.foreign.template_split import split_pod_template
from kubetrain.foreign.typos import unknown_fields
from kubetrain.foreign.walker import ANY_KEY, SourceWalker
from kubetrain.jobspec import JobSpec, SpecError, from_dict, load_file
from kubetrain.jobspec.foreign_names import FOREIGN_NAMES
from kubetrain.jobspec.yaml_source import parse_yaml


def located(text: str, source: str = "job.yaml"):  # type: ignore[no-untyped-def]
    return parse_yaml(textwrap.dedent(text), source)[0]


def test_every_leaf_nothing_took_is_reported_refused_with_its_line() -> None:
    doc = located("""\
        a: 1
        b:
          c: 2
          d: {e: 3}
        f: []
        g: {}
        """)
    w = SourceWalker(doc)
    assert w.take("a", "spec.a") == 1
    assert w.approx("b.c", "spec.c", "close enough") == 2
    w.refuse("missing", "never noted: absent")
    notes = {n.source: n for n in w.notes()}
    assert set(notes) == {"a", "b.c", "b.d"}  # empty blocks say nothing
    assert (notes["a"].verdict, notes["a"].target, notes["a"].line) == ("mapped", "spec.a", 1)
    assert (notes["b.c"].verdict, notes["b.c"].reason) == ("approximated", "close enough")
    assert (notes["b.d"].verdict, notes["b.d"].reason, notes["b.d"].line) == (
        "refused",
        "not supported by kubetrain",
        4,
    )


def test_the_first_decision_about_a_field_stands() -> None:
    w = SourceWalker({"a": {"b": 1}})
    w.take("a", "spec.x")
    w.refuse("a.b", "too late")
    assert [(n.source, n.verdict) for n in w.notes()] == [("a", "mapped")]


def test_typos_get_a_did_you_mean_from_the_kinds_own_fields_with_the_line() -> None:
    doc = located("""\
        spec:
          worker:
            replicas: 2
            replcas: 3
          roles:
            anything: {replicas: 1, replica: 2}
        """)
    tree = {"spec": {"worker": {"replicas": None}, "roles": {ANY_KEY: {"replicas": None}}}}
    errors = unknown_fields(doc.data, tree, lines=doc, kind="DeepSpeedJob")
    assert [(e.path, e.line, e.hint) for e in errors] == [
        (("spec", "worker", "replcas"), 4, "did you mean 'replicas'?"),
        (("spec", "roles", "anything", "replica"), 6, "did you mean 'replicas'?"),
    ]
    assert "is not a field of a DeepSpeedJob" in errors[0].message


TEMPLATE = """\
    template:
      metadata:
        labels: {team: nlp}
        name: ignored
      spec:
        imagePullSecrets: [{name: registry}]
        schedulerName: volcano
        priorityClassName: high
        nodeSelector: {disk: ssd}
        hostIPC: true
        securityContext: {runAsUser: 1000, fsGroup: 2000}
        containers:
          - name: sidecar
            image: busybox
            volumeMounts: [{name: shared, mountPath: /shared}]
          - name: main
            image: pytorch:2
            imagePullPolicy: IfNotPresent
            command: [python]
            args: [train.py, --lr, "0.1"]
            workingDir: /work
            env: [{name: A, value: "1"}]
            resources: {requests: {cpu: "1"}, limits: {cpu: "2", nvidia.com/gpu: 1}}
            ports: [{containerPort: 8080, name: http}, {containerPort: 9090, hostPort: 9090}]
            livenessProbe: {tcpSocket: {port: 8080}}
            securityContext:
              capabilities: {drop: [ALL], add: [IPC_LOCK]}
              seccompProfile: {type: RuntimeDefault}
            volumeMounts:
              - {name: data, mountPath: /data, readOnly: true}
              - {name: dshm, mountPath: /dev/shm}
              - {name: cfg, mountPath: /etc/cfg}
              - {name: shared, mountPath: /shared}
              - {name: certs, mountPath: /certs}
        volumes:
          - {name: data, persistentVolumeClaim: {claimName: datasets}}
          - {name: dshm, emptyDir: {medium: Memory, sizeLimit: 2Gi}}
          - {name: cfg, configMap: {name: app-config}}
          - {name: shared, emptyDir: {}}
          - {name: certs, csi: {driver: secrets.example.com}}
    """


def test_a_pod_template_splits_into_typed_settings_and_a_carried_remainder() -> None:
    doc = located(TEMPLATE)
    w = SourceWalker(doc)
    settings, rest = split_pod_template(w, "template", role_target="spec.roles.worker", main_container="main")
    assert settings == {
        "labels": {"team": "nlp"},
        "nodeSelector": {"disk": "ssd"},
        "scheduling": {"schedulerName": "volcano", "priorityClass": "high"},
        "image": "pytorch:2",
        "imagePullPolicy": "IfNotPresent",
        "workingDir": "/work",
        "env": [{"name": "A", "value": "1"}],
        "run": {"exec": ["python", "train.py", "--lr", "0.1"]},
        "requests": {"cpu": "1"},
        "limits": {"cpu": "2", "nvidia.com/gpu": 1},
        "ports": [{"container": 8080, "name": "http"}],
        "mounts": [
            {"type": "volume", "src": "datasets", "dst": "/data", "readonly": True},
            {"type": "configMap", "name": "app-config", "dst": "/etc/cfg", "items": {}},
        ],
        "resources": {"shm": "2Gi"},
        "security": {
            "runAsUid": 1000,
            "hostIpc": True,
            "capabilities": ["IPC_LOCK"],
            "seccompProfileType": "RuntimeDefault",
        },
    }
    # What kubetrain does not type is carried: the main container first (by its name), sidecars, the volumes
    # only they use or kubetrain does not model, pod-level fields.
    assert rest == {
        "spec": {
            "imagePullSecrets": [{"name": "registry"}],
            "securityContext": {"fsGroup": 2000},
            "containers": [
                {
                    "name": "main",
                    "ports": [{"containerPort": 9090, "hostPort": 9090}],
                    "livenessProbe": {"tcpSocket": {"port": 8080}},
                    "volumeMounts": [
                        {"name": "shared", "mountPath": "/shared"},
                        {"name": "certs", "mountPath": "/certs"},
                    ],
                },
                {"name": "sidecar", "image": "busybox", "volumeMounts": [{"name": "shared", "mountPath": "/shared"}]},
            ],
            "volumes": [
                {"name": "shared", "emptyDir": {}},
                {"name": "certs", "csi": {"driver": "secrets.example.com"}},
            ],
        }
    }
    notes = {n.source: n for n in w.notes()}
    assert notes["template.metadata.name"].verdict == "refused"
    # each carried part noted at its own place in the carried template (a sidecar after the main container):
    # what is said of it is said at its line
    assert notes["template.spec.imagePullSecrets"].target == "spec.roles.worker.podTemplate.spec.imagePullSecrets"
    assert notes["template.spec.containers[0]"].target == "spec.roles.worker.podTemplate.spec.containers[1]"
    assert notes["template.spec.containers[1].image"].target == "spec.roles.worker.image"
    assert not [n for n in w.notes() if n.verdict == "refused" and n.source != "template.metadata.name"]


def test_the_split_loads_as_a_trainjob_role() -> None:
    w = SourceWalker(located(TEMPLATE))
    settings, rest = split_pod_template(w, "template", role_target="spec.roles.worker", main_container="main")
    job_level = {key: settings.pop(key) for key in ("scheduling",)}
    job = from_dict(
        {
            "apiVersion": "kubetrain.dev/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "x"},
            "spec": {**job_level, "roles": {"worker": {**settings, "podTemplate": rest}}},
        }
    )
    worker = job.spec.roles["worker"]  # type: ignore[index]
    assert worker.image == "pytorch:2" and worker.pod_template is not None


def test_errors_name_the_source_field_and_line(tmp_path: Path) -> None:
    path = tmp_path / "ds.yaml"
    path.write_text(
        textwrap.dedent("""\
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: DeepSpeedJob
        metadata: {name: ds}
        spec:
          config:
            run: {python: [train.py]}
          worker:
            replicas: 0
        """)
    )
    with pytest.raises(SpecError) as info:
        load_job_file(path)
    (error,) = info.value.errors
    assert (error.path, error.file, error.line) == (("spec", "worker", "replicas"), str(path), 8)
    assert "as TrainJob spec.replicas" in error.message


def test_kind_of_knows_the_kinds_by_group_version_and_kind() -> None:
    assert kind_of({"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "DeepSpeedJob"}) is not None
    assert kind_of({"apiVersion": "run.ai/v2alpha1", "kind": "TrainingWorkload"}) is not None
    assert kind_of({"apiVersion": "batch/v1", "kind": "Job"}) is None  # not Volcano's Job
    with pytest.raises(SpecError, match=re.escape("kubetrain reads DeepSpeedJob at batch.tensorstack.dev/v1beta1")):
        convert({"apiVersion": "batch.tensorstack.dev/v1", "kind": "DeepSpeedJob", "metadata": {"name": "x"}})


def test_a_foreign_file_fed_as_a_trainjob_is_named_for_what_it_is(tmp_path: Path) -> None:
    path = tmp_path / "ds.yaml"
    path.write_text("apiVersion: run.ai/v2alpha1\nkind: TrainingWorkload\nmetadata: {name: x}\nspec: {}\n")
    with pytest.raises(SpecError) as info:
        load_file(path)
    (error,) = info.value.errors
    assert error.line == 2 and "this is a TrainingWorkload" in error.message and "kubetrain convert" in error.message


def test_telltale_fields_under_a_trainjob_header_are_named_not_did_you_meaned(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        textwrap.dedent("""\
        apiVersion: kubetrain.dev/v1alpha1
        kind: TrainJob
        metadata: {name: x}
        spec:
          backoffLimit: {value: 2}
          environment: {items: {A: {value: "1"}}}
          completions: {value: 2}
        """)
    )
    with pytest.raises(SpecError) as info:
        load_file(path)
    (error,) = info.value.errors
    assert "looks like a TrainingWorkload" in error.message and error.line == 6
    assert "kind: TrainingWorkload" in (error.hint or "")


def test_no_telltale_is_a_trainjob_field() -> None:
    spec_fields = {info.alias or name for name, info in JobSpec.model_fields.items()}
    spec_fields |= {JobSpec.model_config["alias_generator"](name) for name in JobSpec.model_fields}  # type: ignore[misc]
    for name in FOREIGN_NAMES:
        assert not name.telltales & spec_fields, name.kind
