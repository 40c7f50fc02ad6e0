"""Loading foreign job files and the errors about them, as a user meets them: every error names the field the user
wrote, on its line, in the words of the kind they wrote."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kubetrain.foreign.loader import load_job_file
from kubetrain.jobspec import SpecError
from tests.support.helpers import EXAMPLES, cli

FOREIGN = EXAMPLES / "foreign"


def with_typo(example: str, after: str, typo: str, folder: Path) -> tuple[Path, int]:
    """`example` copied into `folder` (beside the examples, so its relative paths still resolve) with the line
    `typo` added after the first line that starts with `after`, at that line's indent; the file and the typo's
    line number."""
    lines = (FOREIGN / example).read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith(after))
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())].replace("-", " ")
    lines.insert(at + 1, indent + typo)
    path = folder / example
    path.write_text("\n".join(lines) + "\n")
    return path, at + 2


# -- item 3: a typo inside a pod template of any kind --------------------------------------------------------


@pytest.mark.parametrize(
    ("example", "container", "kind"),
    [
        ("pytorchjob.yaml", "spec.pytorchReplicaSpecs.Master.template.spec.containers[0]", "PyTorchJob"),
        ("tfjob.yaml", "spec.tfReplicaSpecs.Chief.template.spec.containers[0]", "TFJob"),
        ("mpijob.yaml", "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0]", "MPIJob"),
        ("jobset.yaml", "spec.replicatedJobs[0].template.spec.template.spec.containers[0]", "JobSet"),
        ("volcano-job.yaml", "spec.tasks[0].template.spec.containers[0]", "Job"),
        ("deepspeedjob.yaml", "spec.worker.template.spec.containers[0]", "DeepSpeedJob"),
    ],
)
def test_a_typo_in_a_container_is_named_at_its_own_path_and_line(
    example: str, container: str, kind: str, tmp_path: Path
) -> None:
    path, line = with_typo(example, "image:", "envv: []", tmp_path)
    with pytest.raises(SpecError) as caught:
        load_job_file(path)
    (error,) = caught.value.errors
    assert (str(error.file), error.line) == (str(path), line)
    assert caught.value.paths == [f"{container}.envv"]
    assert error.message == f"is not a field of a {kind}"
    assert error.hint == "did you mean 'env'?"


def test_a_typo_deep_in_a_probe_gets_the_probes_own_field_names(tmp_path: Path) -> None:
    lines = (FOREIGN / "pytorchjob.yaml").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("image:"))
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())].replace("-", " ")
    lines[at + 1 : at + 1] = [f"{indent}livenessProbe:", f"{indent}  initialDelaySecond: 5"]
    path = tmp_path / "pytorchjob.yaml"
    path.write_text("\n".join(lines) + "\n")
    done = cli("validate", path)
    assert done.returncode == 2
    assert (
        f"{path}:{at + 3}: spec.pytorchReplicaSpecs.Master.template.spec.containers[0].livenessProbe."
        "initialDelaySecond: is not a field of a PyTorchJob\n    hint: did you mean 'initialDelaySeconds'?"
    ) in done.stderr


def test_the_shipped_kitchen_sinks_have_no_field_the_pod_template_check_calls_a_typo() -> None:
    # what the API accepts in a pod template (init containers, probes, volumes, ...) is no typo
    for name in ("pytorchjob-kitchen-sink.yaml", "jobset-kitchen-sink.yaml", "volcano-job-kitchen-sink.yaml"):
        load_job_file(FOREIGN / name)


# -- item 7: errors about the converted job name the source field and line -----------------------------------

DS_TWO_RUN_FORMS = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: DeepSpeedJob
metadata: {name: ds-two}
spec:
  config:
    run: {python: [train_ds.py], module: [foo.bar]}
  worker:
    replicas: 1
    template: {spec: {containers: [{name: worker, image: foo}]}}
"""


def test_a_rule_over_several_source_fields_names_the_part_they_share(tmp_path: Path) -> None:
    path = tmp_path / "ds-two.yaml"
    path.write_text(DS_TWO_RUN_FORMS)
    done = cli("validate", path)
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"error: {path}:6: spec.config.run: set exactly one of python, module, exec, customCommand, entrypoint "
        "(got python, module) (as TrainJob spec.run)"
    )


def test_a_flavors_refusal_names_the_source_field(tmp_path: Path) -> None:
    done = cli("render", "--flavor", "job", FOREIGN / "deepspeedjob-kitchen-sink.yaml")
    assert done.returncode == 2
    line = next(
        i
        for i, text in enumerate((FOREIGN / "deepspeedjob-kitchen-sink.yaml").read_text().splitlines(), 1)
        if text.lstrip().startswith("cleanUpPolicy:")
    )
    where = f"{FOREIGN / 'deepspeedjob-kitchen-sink.yaml'}:{line}"
    assert f"error: {where}: spec.runPolicy.cleanUpPolicy: cleanPodPolicy All: the job flavor cannot" in done.stderr
    assert "(as TrainJob spec.runPolicy.cleanPodPolicy)" in done.stderr


RUNAI_MOUNTS = """\
apiVersion: run.ai/v2alpha1
kind: TrainingWorkload
metadata: {name: mounts}
spec:
  image: {value: "python:3.11-slim"}
  command: {value: "python train_runai.py"}
  nfs: {items: {share: {value: {server: nfs.example.com, path: /exports/data, mountPath: /nfs, readOnly: true}}}}
  pvcs: {items: {data: {value: {claimName: data, path: /data, existingPvc: true}}}}
  s3: {items: {bucket: {value: {bucket: my-bucket, path: /s3, url: "https://s3.example.com"}}}}
"""


def test_a_refused_list_item_is_traced_to_the_source_item_it_came_from(tmp_path: Path) -> None:
    # the s3 mount is the converted job's spec.mounts[i]: which source field it was is read from the item itself
    path = tmp_path / "mounts.yaml"
    path.write_text(RUNAI_MOUNTS)
    for verb in (["render", "--flavor", "job"], ["validate", "--backend", "kubernetes", "--flavor", "job"]):
        done = cli(*verb, path)
        assert done.returncode == 2, done.stderr
        assert f"{path}:9: spec.s3.items.bucket.value: an s3 mount: the job flavor cannot express it" in done.stderr
        assert "(as TrainJob spec.mounts[" in done.stderr


def test_a_local_refusal_names_the_containers_command(tmp_path: Path) -> None:
    path = tmp_path / "pj.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            apiVersion: kubeflow.org/v1
            kind: PyTorchJob
            metadata: {name: missing-script}
            spec:
              pytorchReplicaSpecs:
                Master:
                  replicas: 1
                  template:
                    spec:
                      containers:
                        - name: pytorch
                          image: pytorch/pytorch
                          command: [python, no_such_train.py]
            """
        )
    )
    done = cli("run", path)
    assert done.returncode == 2
    assert (
        f"error: {path}:13: spec.pytorchReplicaSpecs.Master.template.spec.containers[0].command: script "
        "no_such_train.py not found"
    ) in done.stderr
    assert "(as TrainJob spec.roles.master.run.python[0])" in done.stderr


# -- items 11, 14, 19, 21: files that are not what kubetrain reads; help -------------------------------------


@pytest.mark.parametrize(
    ("header", "says"),
    [
        ("apiVersion: kubeflow.org/v1\nkind: PytorchJob", "did you mean kind: PyTorchJob (kubeflow.org/v1)?"),
        ("apiVersion: apps/v1\nkind: Deployment", "kubetrain reads TrainJob (kubetrain.dev/v1alpha1) and: "),
    ],
)
def test_a_kind_kubetrain_does_not_read_is_named_with_the_kinds_it_does(header: str, says: str, tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(f"{header}\nmetadata: {{name: x}}\nspec: {{}}\n")
    for verb in ("validate", "convert"):
        done = cli(verb, path)
        assert done.returncode == 2
        assert f"{path}:2: kind: not a kind kubetrain reads: " in done.stderr
        assert says in done.stderr
        assert "PyTorchJob (kubeflow.org/v1)" in done.stderr and "must be TrainJob" not in done.stderr


def test_another_systems_trainjob_is_told_apart_from_kubetrains(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\nspec: {}\n")
    done = cli("validate", path)
    assert done.returncode == 2
    assert (
        f"{path}:1: apiVersion: must be kubetrain.dev/v1alpha1: trainer.kubeflow.org/v1alpha1 TrainJob is not a kind "
        "kubetrain reads"
    ) in done.stderr
    assert "kubetrain reads TrainJob (kubetrain.dev/v1alpha1) and: DeepSpeedJob" in done.stderr


def test_converting_a_trainjob_says_it_needs_none() -> None:
    import kubetrain

    with pytest.raises(SpecError, match="is a TrainJob already: it needs no conversion"):
        kubetrain.convert({"apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": {"name": "x"}})


def test_foreign_fields_under_a_trainjob_header_say_to_fix_the_header(tmp_path: Path) -> None:
    text = (FOREIGN / "deepspeedjob.yaml").read_text()
    text = text.replace("apiVersion: batch.tensorstack.dev/v1beta1", "apiVersion: kubetrain.dev/v1alpha1")
    path = tmp_path / "ds.yaml"
    path.write_text(text.replace("kind: DeepSpeedJob", "kind: TrainJob"))
    done = cli("convert", path)
    assert done.returncode == 2
    assert "hint: fix the header first: write apiVersion: batch.tensorstack.dev/v1beta1 and kind: DeepSpeedJob" in (
        done.stderr
    )


def test_explain_of_a_missing_file_says_no_such_file(tmp_path: Path) -> None:
    done = cli("explain", tmp_path / "deepspeedjob.yml")
    assert done.returncode == 2
    assert f"error: {tmp_path / 'deepspeedjob.yml'}: no such file" in done.stderr
    assert cli("explain", "spec.resources.gpu").returncode == 0


def test_help_says_job_files_may_be_foreign_kinds() -> None:
    for verb in ("run", "validate"):
        out = " ".join(cli(verb, "--help").stdout.split())
        assert "foreign kind" in out and "DeepSpeedJob" in out, verb
