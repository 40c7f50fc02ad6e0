"""Run:ai TrainingWorkload files as kubetrain jobs: the {value: ...} wrappers unwrapped field by field, a
`usage: Template` workload as a base, rendered for every flavor that can express them, run here."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import kubetrain
from kubetrain.backends.kubernetes.flavors import flavors_that
from kubetrain.contract.choices import FLAVORS
from kubetrain.foreign.loader import load_job_documents, load_job_file
from kubetrain.foreign.runai import COLLECTIONS, PLAIN, SCALARS
from kubetrain.jobspec import SpecError
from kubetrain.status import JobPhase
from tests.support.helpers import EXAMPLES, log_lines, no_process_left_behind, run_job  # noqa: F401
from tests.support.manifest_schemas import assert_valid

FOREIGN = EXAMPLES / "foreign"
EXAMPLE = FOREIGN / "trainingworkload.yaml"
KITCHEN_SINK = FOREIGN / "trainingworkload-kitchen-sink.yaml"
SEED_FIELDS = set(SCALARS) | set(COLLECTIONS) | set(PLAIN)


def test_the_converter_knows_every_field_of_the_seed() -> None:
    # A copy of Run:ai's field reference (the seed kubetrain answers to), kept with the tests.
    seed = Path(__file__).resolve().parents[1] / "data" / "seeds" / "004-runai-trainingworkload-spec.txt"
    lines = seed.read_text().splitlines()
    listed = {
        line.split()[0]
        for line in lines[lines.index("FIELDS:") + 1 :]
        if line.endswith(("<Object>", "<string>")) and len(line.split()) == 2
    }
    assert listed == SEED_FIELDS


def test_the_example_merges_its_template_and_converts() -> None:
    job, conversion = load_job_file(EXAMPLE)
    assert conversion is not None
    spec = job.spec
    assert spec.image == "python:3.11-slim" and spec.image_pull_policy == "IfNotPresent"  # from the template
    assert {v.name: v.value for v in spec.env or []} == {"TEAM": "vision", "GREETING": "hello-from-runai"}
    assert spec.resources is not None and spec.resources.shm is True and spec.resources.cpu == "0.5"
    assert spec.scheduling.node_pools == ["a100", "default"]
    # completions and parallelism 2: two runs that must each succeed, both at once (seed 004's meaning)
    assert spec.trials is not None and (spec.trials.completions, spec.trials.parallelism) == (2, 2)
    assert spec.run is not None and spec.run.exec == ["python", "train_runai.py", "--steps", "5"]
    template_note = next(n for n in conversion.notes if n.source == "spec.image.value")
    assert template_note.file == str(FOREIGN / "trainingworkload-template.yaml") and template_note.line == 9
    assert not conversion.approximated()


def test_a_base_that_is_not_a_template_is_refused(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(
        "apiVersion: run.ai/v2alpha1\nkind: TrainingWorkload\nmetadata: {name: b}\nspec: {usage: Submit}\n"
    )
    (tmp_path / "w.yaml").write_text(
        "apiVersion: run.ai/v2alpha1\nkind: TrainingWorkload\nmetadata: {name: w}\n"
        "spec:\n  baseWorkload: base.yaml\n  command: {value: python x.py}\n"
    )
    with pytest.raises(SpecError, match="without usage: Template") as info:
        load_job_file(tmp_path / "w.yaml")
    assert info.value.errors[0].line == 5


@pytest.mark.parametrize("flavor", FLAVORS)
def test_the_example_renders_valid_manifests_for_every_flavor_that_can_express_it(flavor: str) -> None:
    job, _ = load_job_file(EXAMPLE)
    if flavor not in flavors_that(lambda f: f.every_framework and f.trials):
        # independent runs of a generic job: an Indexed Job's completions and parallelism (the job flavor)
        with pytest.raises(SpecError, match=r"spec\.trials: independent runs"):
            kubetrain.render(job, flavor)
        return
    objects = kubetrain.render(job, flavor)
    assert_valid(objects)
    text = repr(objects)
    assert "hello-from-runai" in text and "python:3.11-slim" in text


def test_the_example_runs_here() -> None:
    job, _ = load_job_file(EXAMPLE)
    status = run_job(job, FOREIGN)
    logs = log_lines(status.job_id)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    assert logs["worker-0"][0] == "replica 0/2 team=vision greeting=hello-from-runai"
    assert logs["worker-1"][0] == "replica 1/2 team=vision greeting=hello-from-runai"


def test_every_field_of_the_kitchen_sink_is_accounted_for() -> None:
    (job, conversion), (mig_job, mig) = load_job_documents(KITCHEN_SINK)
    assert conversion is not None and mig is not None
    notes = conversion.notes + mig.notes
    seen = {n.source.split(".")[1] for n in notes if n.source.startswith("spec.")}
    assert seen == SEED_FIELDS  # every field of the seed, each noted
    refused = {n.source for n in conversion.refused()}
    assert refused == {
        "spec.completions",
        "spec.parallelism",
        "spec.createHomeDir",
        "spec.exposedUrls",
        "spec.ingressUrl",
        "spec.mountPropagation",
        "spec.namePrefix",
        "spec.userId",
        "spec.username",
    }
    assert {n.source for n in conversion.approximated()} == {"spec.podAffinity.value"}
    spec = job.spec
    assert spec.base is None and spec.scheduling.priority_class == "research"  # baseWorkload → spec.base, resolved
    assert spec.resources is not None and (spec.resources.gpu, spec.resources.gpu_sharing) == (0.5, "runai")
    assert spec.security is not None and spec.security.supplemental_groups == [3000, 3001]
    assert spec.security.capabilities == ["IPC_LOCK", "SYS_PTRACE"] and spec.security.run_as_uid == 1000
    assert [m.type for m in spec.mounts or []] == ["volume", "nfs", "s3", "gitSync", "bind"]
    assert spec.ports is not None and spec.ports[0].service_type == "NodePort"
    assert spec.tolerations is not None and spec.tolerations[0].toleration_seconds == 60
    assert spec.scheduling.node_pools == ["a100", "h100", "legacy"]
    assert mig_job.spec.resources is not None and mig_job.spec.resources.mig_profile == "1g.5gb"


def test_a_typo_inside_a_wrapper_gets_a_did_you_mean_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(
        textwrap.dedent("""\
        apiVersion: run.ai/v2alpha1
        kind: TrainingWorkload
        metadata: {name: w}
        spec:
          command: {value: python x.py}
          backofLimit: {value: 2}
          environment: {items: {A: {valeu: "1"}}}
        """)
    )
    with pytest.raises(SpecError) as info:
        load_job_file(path)
    assert [(e.path[-1], e.line, e.hint) for e in info.value.errors] == [
        ("backofLimit", 6, "did you mean 'backoffLimit'?"),
        ("valeu", 7, "did you mean 'value'?"),
    ]
