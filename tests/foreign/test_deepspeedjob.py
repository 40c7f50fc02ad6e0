"""T9k DeepSpeedJob files as kubetrain jobs: converted field by field, rendered for every flavor that can
express them (manifests valid against the upstream schemas), run here as a real distributed job."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import kubetrain
from kubetrain.backends.kubernetes.flavors import flavors_that
from kubetrain.contract.choices import FLAVORS
from kubetrain.foreign.loader import load_job_documents, load_job_file
from kubetrain.jobspec import SpecError
from tests.support.helpers import EXAMPLES, assert_ddp_in_step, no_process_left_behind, run_job  # noqa: F401
from tests.support.kubelet import containers_of
from tests.support.manifest_schemas import assert_valid

FOREIGN = EXAMPLES / "foreign"
EXAMPLE = FOREIGN / "deepspeedjob.yaml"
KITCHEN_SINK = FOREIGN / "deepspeedjob-kitchen-sink.yaml"


def test_the_example_converts_with_every_field_mapped() -> None:
    job, conversion = load_job_file(EXAMPLE)
    assert conversion is not None and conversion.kind == "DeepSpeedJob"
    assert not conversion.refused()
    # the one approximation: kubetrain names the container it renders itself (`main`), not `worker`
    assert [n.source for n in conversion.approximated()] == ["spec.worker.template.spec.containers[0].name"]
    spec = job.spec
    assert (spec.framework.value, spec.replicas, spec.procs_per_replica, spec.local_rank) == ("deepspeed", 2, 1, True)
    assert spec.run is not None and spec.run.python == ["train_ds.py", "--steps", "20"]
    assert (spec.restart_policy, spec.run_policy.backoff_limit, spec.run_policy.clean_pod_policy) == (
        "OnFailure",
        2,
        "Running",
    )
    assert spec.image == "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
    assert spec.requests == {"cpu": "1", "memory": "2Gi"} and spec.limits == {"cpu": "2", "memory": "4Gi"}
    assert job.base_dir == str(FOREIGN)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_the_example_renders_valid_manifests_for_every_flavor_that_can_express_it(flavor: str) -> None:
    job, _ = load_job_file(EXAMPLE)
    if flavor not in flavors_that(lambda f: f.deadline):  # runPolicy.activeDeadlineSeconds
        with pytest.raises(SpecError, match="activeDeadlineSeconds: a deadline for the whole job"):
            kubetrain.render(job, flavor)
        return
    objects = kubetrain.render(job, flavor)
    assert_valid(objects)
    containers = containers_of(objects)
    assert containers and {c["image"] for c in containers} == {job.spec.image}
    for c in containers:
        assert {"name": "DS_EXAMPLE", "value": "from-the-template"} in c["env"]
        assert c["resources"]["limits"]["memory"] == "4Gi"


@pytest.mark.slow
def test_the_example_runs_here_as_a_distributed_job() -> None:
    """2 workers through torch.distributed (gloo), each with the template's env and `--local_rank`."""
    job, _ = load_job_file(EXAMPLE, overrides=['spec.config.run.python=[train_ds.py,--steps,"5"]'])
    logs = assert_ddp_in_step(run_job(job, FOREIGN), "worker-0", "worker-1")
    lines = logs["worker-0"] + logs["worker-1"]
    assert "rank 0/2 local_rank 0" in lines and "rank 1/2 local_rank 0" in lines
    assert lines.count("env DS_EXAMPLE=from-the-template") == 2


def test_every_field_of_the_kitchen_sink_is_accounted_for() -> None:
    job, conversion = load_job_file(KITCHEN_SINK)
    assert conversion is not None
    verdicts = {n.source: (n.verdict, n.target) for n in conversion.notes}
    mapped = {source: target for source, (verdict, target) in verdicts.items() if verdict == "mapped"}
    assert mapped == {
        "apiVersion": "apiVersion",
        "kind": "spec.controller.kind",
        "metadata.name": "metadata.name",
        "metadata.namespace": "metadata.namespace",
        "metadata.labels": "metadata.labels",
        "metadata.annotations": "metadata.annotations",
        "spec.scheduler.t9kScheduler.queue": "spec.scheduling.queue",
        "spec.runPolicy.activeDeadlineSeconds": "spec.runPolicy.activeDeadlineSeconds",
        "spec.runPolicy.backoffLimit": "spec.runPolicy.backoffLimit",
        "spec.runPolicy.cleanUpPolicy": "spec.runPolicy.cleanPodPolicy",
        "spec.runMode.debug.enable": None,  # false: it sets nothing, so no comment claims it
        "spec.runMode.pause.enable": "spec.runMode",
        "spec.elastic.enabled": "spec.elastic.enabled",
        "spec.elastic.minReplicas": "spec.elastic.minReplicas",
        "spec.elastic.maxReplicas": "spec.elastic.maxReplicas",
        "spec.elastic.expectedReplicas": "spec.elastic.expectedReplicas",
        "spec.config.slotsPerWorker": "spec.procsPerReplica",
        "spec.config.localRank": "spec.localRank",
        "spec.config.run.module": "spec.run.module",
        "spec.config.otherArgs": "spec.run.otherArgs",
        "spec.worker.replicas": "spec.replicas",
        "spec.worker.restartPolicy": "spec.restartPolicy",
        "spec.worker.template.metadata.labels": "spec.labels",
        "spec.worker.template.spec.imagePullSecrets": "spec.podTemplate.spec.imagePullSecrets",
        "spec.worker.template.spec.containers[0].image": "spec.image",
        "spec.worker.template.spec.containers[0].workingDir": "spec.workingDir",
        "spec.worker.template.spec.containers[0].env": "spec.env",
        "spec.worker.template.spec.containers[0].resources.limits": "spec.limits",
        "spec.worker.template.spec.containers[0].volumeMounts[0]": "spec.mounts[0].dst",
        "spec.worker.template.spec.volumes[0]": "spec.mounts[0]",
    }
    assert {s for s, (v, _) in verdicts.items() if v == "approximated"} == {
        "spec.config.autotune",
        "spec.disableCustomEnv",
        "spec.worker.template.spec.containers[0].name",
    }
    assert {s for s, (v, _) in verdicts.items() if v == "refused"} == {
        "status",
        "spec.scheduler.t9kScheduler.priority",
        "spec.runMode.debug.replicaSpecs",
        "spec.runMode.pause.resumeSpecs",
        "spec.worker.template.spec.restartPolicy",
        "spec.worker.template.spec.containers[0].command",
    }
    spec = job.spec
    assert (spec.run_mode, spec.scheduling.queue, spec.restart_policy) == ("Pause", "gpu-queue", "ExitCode")
    assert spec.run is not None and spec.run.other_args == ["--master_port", "29600", "--autotuning", "tune"]
    assert spec.elastic is not None and (spec.elastic.min_replicas, spec.elastic.max_replicas) == (1, 4)
    assert spec.pod_template is not None and spec.pod_template["spec"]["imagePullSecrets"] == [{"name": "registry"}]
    assert [n.line for n in conversion.notes if n.source == "spec.scheduler.t9kScheduler.priority"] == [14]


def test_a_typo_gets_a_did_you_mean_from_deepspeedjob_fields_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "ds.yaml"
    path.write_text(
        textwrap.dedent("""\
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: DeepSpeedJob
        metadata: {name: ds}
        spec:
          config:
            slotPerWorker: 2
            run: {python: [train.py]}
          worker:
            replicas: 2
            template:
              spec:
                imagePullSecret: [{name: x}]
                containers: [{name: w, image: x}]
        """)
    )
    with pytest.raises(SpecError) as info:
        load_job_file(path)
    found = [(e.path[-1], e.line, e.hint) for e in info.value.errors]
    assert found == [
        ("slotPerWorker", 6, "did you mean 'slotsPerWorker'?"),
        ("imagePullSecret", 12, "did you mean 'imagePullSecrets'?"),
    ]
    assert all(e.file == str(path) and "DeepSpeedJob" in e.message for e in info.value.errors)


def test_strict_refuses_each_field_not_converted_with_its_reason() -> None:
    with pytest.raises(SpecError) as info:
        load_job_file(KITCHEN_SINK, strict=True)
    assert {".".join(map(str, e.path)) for e in info.value.errors} >= {"status", "spec.runMode.debug.replicaSpecs"}
    assert all(e.line and "not mapped" in e.message for e in info.value.errors)
    assert info.value.exit_code == 2


def test_the_run_forms_the_kitchen_sink_cannot_hold() -> None:
    (custom, custom_conv), (exec_job, exec_conv) = load_job_documents(FOREIGN / "deepspeedjob-run-forms.yaml")
    assert custom_conv is not None and exec_conv is not None
    assert custom.spec.run is not None and custom.spec.run.custom_command == (
        "deepspeed --hostfile /etc/ds/hostfile train.py"
    )
    assert custom.spec.run_mode == "Debug" and custom.spec.procs_per_replica == 1
    notes = {n.source: (n.verdict, n.target) for n in custom_conv.notes}
    assert notes["spec.config.localRank"][0] == "refused"  # customCommand replaces it, as in a DeepSpeedJob
    assert notes["spec.runMode.immediate"] == ("mapped", "spec.runMode")
    assert notes["spec.disableCustomEnv"] == ("mapped", "spec.env")
    assert exec_job.spec.run is not None and exec_job.spec.run.exec == ["./train", "--fast"]
    assert {n.source: n.verdict for n in exec_conv.notes}["spec.config.autotune"] == "mapped"
    assert not exec_conv.refused()
    assert [n.source for n in exec_conv.approximated()] == ["spec.worker.template.spec.containers[0].name"]
