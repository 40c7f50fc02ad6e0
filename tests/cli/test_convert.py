"""`kubetrain convert|validate|render|run FILE` with foreign job files, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from kubetrain.foreign.loader import load_job_file
from kubetrain.jobspec import load_text
from tests.support.helpers import EXAMPLES, cli

FOREIGN = EXAMPLES / "foreign"


def test_convert_prints_a_trainjob_that_loads_back_equal_with_each_source_named() -> None:
    for name in ("deepspeedjob.yaml", "trainingworkload.yaml", "deepspeedjob-kitchen-sink.yaml"):
        done = cli("convert", FOREIGN / name)
        assert done.returncode == 0, done.stderr
        job, _ = load_job_file(FOREIGN / name)
        assert load_text(done.stdout, base_dir=FOREIGN) == job, name
    out = cli("convert", FOREIGN / "deepspeedjob.yaml").stdout
    assert (
        "image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime  # from spec.worker.template.spec.containers[0].image"
        in out
    )
    assert "procsPerReplica: 1  # from spec.config.slotsPerWorker" in out


def test_convert_lists_what_it_did_not_convert_at_the_end_and_on_stderr() -> None:
    done = cli("convert", FOREIGN / "deepspeedjob-kitchen-sink.yaml")
    assert done.returncode == 0
    tail = done.stdout[done.stdout.index("# not converted:") :]
    assert "#   line 14: spec.scheduler.t9kScheduler.priority: a numeric scheduler priority has no home" in tail
    assert (
        "deepspeedjob-kitchen-sink.yaml:14: DeepSpeedJob spec.scheduler.t9kScheduler.priority: ignored" in done.stderr
    )


def test_strict_exits_2_naming_each_field() -> None:
    done = cli("convert", "--strict", FOREIGN / "deepspeedjob-kitchen-sink.yaml")
    assert done.returncode == 2 and done.stdout == ""
    assert "spec.runMode.debug.replicaSpecs: DeepSpeedJob field not mapped" in done.stderr
    assert cli("convert", "--strict", FOREIGN / "deepspeedjob.yaml").returncode == 0


def test_convert_json() -> None:
    done = cli("convert", "-o", "json", FOREIGN / "trainingworkload.yaml")
    assert done.returncode == 0
    job, _ = load_job_file(FOREIGN / "trainingworkload.yaml")
    assert json.loads(done.stdout) == job.to_dict()


def test_validate_and_render_take_the_foreign_file_as_is(tmp_path: Path) -> None:
    done = cli("validate", FOREIGN / "trainingworkload.yaml")
    assert done.returncode == 0
    assert "valid TrainingWorkload (as a TrainJob) mnist-runai" in done.stdout + done.stderr
    sink = cli("validate", FOREIGN / "trainingworkload-kitchen-sink.yaml")
    assert sink.returncode == 0
    assert "trainingworkload-kitchen-sink.yaml:25: TrainingWorkload spec.createHomeDir: ignored" in sink.stderr
    rendered = cli("render", "--flavor", "jobset", FOREIGN / "deepspeedjob.yaml")
    assert rendered.returncode == 0, rendered.stderr
    (root, *_rest) = list(yaml.safe_load_all(rendered.stdout))
    assert root["kind"] == "JobSet" and root["metadata"]["name"] == "bert-ds"


def test_a_typo_in_a_foreign_file_is_one_line_with_the_kinds_names(tmp_path: Path) -> None:
    path = tmp_path / "ds.yaml"
    path.write_text((FOREIGN / "deepspeedjob.yaml").read_text().replace("slotsPerWorker", "slotPerWorker"))
    done = cli("validate", path)
    assert done.returncode == 2
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "slotPerWorker" in text)
    assert f"{path}:{line}: spec.config.slotPerWorker: is not a field of a DeepSpeedJob" in done.stderr
    assert "did you mean 'slotsPerWorker'?" in done.stderr


def test_explain_a_foreign_file_says_where_each_field_goes() -> None:
    done = cli("explain", FOREIGN / "deepspeedjob-kitchen-sink.yaml")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "DeepSpeedJob ds-kitchen-sink → TrainJob:"
    row = next(line.split() for line in lines if "spec.config.slotsPerWorker" in line)
    assert row == ["spec.config.slotsPerWorker", "mapped", "spec.procsPerReplica"]
    assert any(line.split()[:3] == ["spec.scheduler.t9kScheduler.priority", "refused", "-"] for line in lines)
