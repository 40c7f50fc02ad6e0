"""Foreign job files as a user meets them on the command line:
files of several documents, `--set` on a foreign file, stdin, relaxation warnings said once, Run:ai base
workloads found by name, and `convert` comments that say what they mean."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.support.helpers import EXAMPLES, cli

FOREIGN = EXAMPLES / "foreign"
RUN_FORMS = FOREIGN / "deepspeedjob-run-forms.yaml"  # two DeepSpeedJobs: ds-custom, ds-exec


# -- files of several documents --------------------------------------------------------------------------


def test_convert_json_of_several_documents_is_one_json_list() -> None:
    done = cli("convert", "-o", "json", RUN_FORMS)
    assert done.returncode == 0, done.stderr
    jobs = json.loads(done.stdout)  # one document: json.loads fails on two objects back to back
    assert [job["metadata"]["name"] for job in jobs] == ["ds-custom", "ds-exec"]
    assert all(job["kind"] == "TrainJob" for job in jobs)


def test_render_takes_every_document_of_a_file() -> None:
    done = cli("render", RUN_FORMS)
    assert done.returncode == 0, done.stderr
    objects = [o for o in yaml.safe_load_all(done.stdout) if o]
    services = {o["metadata"]["name"] for o in objects if o["kind"] == "Service"}
    assert services == {"ds-custom", "ds-exec"}  # one per job: both documents rendered


def test_run_refuses_several_documents_naming_them_and_picks_one_with_document() -> None:
    refused = cli("run", RUN_FORMS, "--dry-run")
    assert refused.returncode == 2
    assert "holds 2 jobs (1 ds-custom, 2 ds-exec)" in refused.stderr
    assert "--document N" in refused.stderr
    picked = cli("run", RUN_FORMS, "--document", "2", "--dry-run", "-o", "json")
    assert picked.returncode == 0, picked.stderr
    assert json.loads(picked.stdout)["name"] == "ds-exec"
    missing = cli("run", RUN_FORMS, "--document", "3", "--dry-run")
    assert missing.returncode == 2 and "has no document 3: it holds 2" in missing.stderr


# -- a pod template's security relaxations: said once, where they matter -----------------------------------------

RELAXING = """\
apiVersion: kubetrain.dev/v1alpha1
kind: TrainJob
metadata: {name: relaxed}
spec:
  framework: pytorch
  replicas: 2
  image: python:3.11
  run: {python: [-c, "print('hi')"]}
  podTemplate:
    spec:
      hostNetwork: true
      containers:
        - name: main
          securityContext: {privileged: true}
"""


def test_validate_kubernetes_says_each_relaxation_once_naming_the_flavors(tmp_path: Path) -> None:
    path = tmp_path / "relaxed.yaml"
    path.write_text(RELAXING)
    done = cli("validate", path, "--backend", "kubernetes")
    assert done.returncode == 0, done.stderr
    out = done.stdout + done.stderr
    assert out.count("spec.podTemplate.spec.hostNetwork: RELAXES") == 1
    assert out.count("securityContext.privileged: RELAXES") == 1
    assert f"{path}: flavors job, jobset, volcano, kubeflow each give 2 warnings:" in out


def test_validate_without_backend_says_the_template_relaxes_security(tmp_path: Path) -> None:
    path = tmp_path / "relaxed.yaml"
    path.write_text(RELAXING)
    done = cli("validate", path)
    assert done.returncode == 0, done.stderr
    assert (
        "warning: spec.podTemplate.spec.hostNetwork: RELAXES kubetrain's security defaults on "
        "Kubernetes: the host's network" in done.stderr
    )
    assert "securityContext.privileged: RELAXES" in done.stderr


def test_a_local_run_says_once_the_templates_security_is_not_used(tmp_path: Path) -> None:
    path = tmp_path / "relaxed.yaml"
    path.write_text(RELAXING)
    done = cli("run", path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("not used locally: the pod template's security settings") == 1
    assert (
        "(spec.podTemplate.spec.hostNetwork, spec.podTemplate.spec.containers[0].securityContext.privileged)"
        in done.stderr
    )
    assert "RELAXES" not in done.stderr


# -- `convert` comments --------------------------------------------------------------------------------------------


def test_convert_names_every_source_of_a_value_without_cutting_and_never_none(tmp_path: Path) -> None:
    done = cli("convert", FOREIGN / "pytorchjob-kitchen-sink.yaml")
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout and "→ None" not in done.stdout and " None:" not in done.stdout
    # an approximated field that went nowhere of its own is listed with its reason alone
    assert "spec.runPolicy.managedBy: the operator's default" in done.stdout
    lines = done.stdout.splitlines()
    # each carried part of a pod template names its own source, in full, above the item it became
    worker = "# from spec.pytorchReplicaSpecs.Worker.template.spec."
    sidecar = next(i for i, line in enumerate(lines) if line.strip() == "- name: metrics-exporter")
    assert lines[sidecar - 1].strip() == f"{worker}containers[1]"
    volume = next(i for i, line in enumerate(lines) if line.strip() == "- name: data" and "volumes:" in lines[i - 2])
    assert lines[volume - 1].strip() == f"{worker}volumes[0]"
    assert all(len(line) < 170 for line in lines if line.lstrip().startswith("#"))
    # the comments are comments: the output still loads back as the same job
    from kubetrain.foreign.loader import load_job_file
    from kubetrain.jobspec import load_text

    job, _ = load_job_file(FOREIGN / "pytorchjob-kitchen-sink.yaml")
    assert load_text(done.stdout, base_dir=FOREIGN) == job


# -- --set on a foreign file: the kind's own paths ----------------------------------------------------------------


def test_set_on_a_foreign_file_takes_the_kinds_own_paths() -> None:
    done = cli("validate", FOREIGN / "deepspeedjob.yaml", "--set", "spec.worker.replicas=3")
    assert done.returncode == 0, done.stderr
    assert "valid DeepSpeedJob (as a TrainJob) bert-ds (deepspeed, 3 replicas: worker×3)" in done.stdout + done.stderr
    refused = cli("validate", FOREIGN / "deepspeedjob.yaml", "--set", "spec.replicas=3")
    assert refused.returncode == 2
    assert "--set spec.replicas=3: spec.replicas: is not a field of a DeepSpeedJob" in refused.stderr
    assert "--set takes the DeepSpeedJob's own paths" in refused.stderr


# -- `-` reads stdin ------------------------------------------------------------------------------------------------


def test_dash_reads_the_job_from_stdin_for_every_verb(tmp_path: Path) -> None:
    text = (FOREIGN / "deepspeedjob.yaml").read_text()
    converted = cli("convert", "-", stdin=text)
    assert converted.returncode == 0, converted.stderr
    assert "# converted by kubetrain from DeepSpeedJob (batch.tensorstack.dev/v1beta1) <stdin>" in converted.stdout
    assert cli("convert", FOREIGN / "deepspeedjob.yaml").stdout.split("\n", 1)[1] == converted.stdout.split("\n", 1)[1]
    validated = cli("validate", "-", stdin=text)
    assert validated.returncode == 0 and "<stdin>: valid DeepSpeedJob (as a TrainJob) bert-ds" in validated.stderr
    rendered = cli("render", "-", stdin=text)
    assert rendered.returncode == 0, rendered.stderr
    assert {o["kind"] for o in yaml.safe_load_all(rendered.stdout) if o} >= {"Job", "Service"}
    # relative paths resolve against the current folder: the plan runs train_ds.py from where kubetrain was started
    planned = cli("run", "-", "--dry-run", "-o", "json", stdin=text, cwd=FOREIGN)
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["cwd"] == str(FOREIGN)


def test_errors_in_stdin_name_it_with_their_lines(tmp_path: Path) -> None:
    text = "apiVersion: kubetrain.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\nspec: {bogus: 1}\n"
    done = cli("validate", "-", stdin=text)
    assert done.returncode == 2
    assert "<stdin>:4: spec.bogus: unknown field" in done.stderr


# -- Run:ai baseWorkload by the template's name ----------------------------------------------------------------------

WORKLOAD = """\
apiVersion: run.ai/v2alpha1
kind: TrainingWorkload
metadata: {name: mnist}
spec:
  baseWorkload: team-defaults
  command: {value: python train.py}
  parallelism: {value: 2}
  completions: {value: 2}
"""
TEMPLATE = """\
apiVersion: run.ai/v2alpha1
kind: TrainingWorkload
metadata: {name: team-defaults}
spec:
  usage: Template
  image: {value: pytorch/pytorch:2.5.1}
  environment: {items: {FROM_BASE: {value: "yes"}}}
"""


def test_a_runai_base_workload_is_found_by_its_name_beside_the_file_or_in_templates(tmp_path: Path) -> None:
    from kubetrain.foreign.loader import load_job_file

    (tmp_path / "job.yaml").write_text(WORKLOAD)
    for where in (tmp_path / "defaults.yaml", tmp_path / "templates" / "any-name.yml"):
        where.parent.mkdir(exist_ok=True)
        where.write_text(TEMPLATE)
        job, conversion = load_job_file(tmp_path / "job.yaml")
        assert job.spec.image == "pytorch/pytorch:2.5.1"
        assert {e.name: e.value for e in job.spec.env}["FROM_BASE"] == "yes"
        assert (
            conversion is not None
            and conversion.notes[0].reason == "the template 'team-defaults' merged under this workload"
        )
        where.unlink()
    (tmp_path / "a.yaml").write_text(TEMPLATE)
    (tmp_path / "b.yaml").write_text(TEMPLATE)
    done = cli("validate", tmp_path / "job.yaml")
    assert done.returncode == 2
    assert (
        f"{tmp_path / 'job.yaml'}:5: spec.baseWorkload: several TrainingWorkload templates are named 'team-defaults'"
        in done.stderr
    )
