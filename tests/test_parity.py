"""The parity contract (`kubetrain.parity`, docs/parity.md) holds: every field of the JSON Schema
has a row, and every row says what the code does. For each row, its sample job is rendered for every
flavor and dry-run on the local backend, and compared with its baseline: a refused cell must be refused at
the row's path, an honoured one must change what would run (or, `same`, must not), an approximated one
must warn, naming the field; an ignored one must change nothing and say nothing. The same again with the
setting given to a role. Also `kubetrain validate --backend`, and render reporting every problem at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest

import kubetrain.backends.local.gpus as gpus
import kubetrain.backends.local.prepare as local_prepare
from kubetrain import parity
from kubetrain.backends.kubernetes.flavors import FLAVORS
from kubetrain.backends.kubernetes.manifests.errors import flavors_phrase
from kubetrain.backends.kubernetes.render import render_manifests
from kubetrain.cli.main import main
from kubetrain.contract.features import FEATURES, Features
from kubetrain.jobspec import ReplicaSettings, SpecError, TrainJob, from_dict
from kubetrain.jobspec.schema import full_json_schema
from kubetrain.parity import BACKENDS, DELETE, IGNORED, KUBERNETES, REFUSED, ROWS, VERDICTS, Cell, Row
from kubetrain.parity.markdown import REGENERATE, counts, markdown
from kubetrain.parity.table import build_rows
from tests.support.parity import Observation, able_flavors, discrepancies, observe, schema_fields

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "parity.md"
SHARED = {f.alias or name for name, f in ReplicaSettings.model_fields.items()}
"""What a role may set as the job does (`spec.roles.<role>.image` is the field `spec.image`)."""


NOT_IN_THE_TABLE = {"kueue_queue", "exclusive_jobs"}
"""`Features` no cell depends on: the queue is honoured either way (Kueue's or the engine's own), and exclusive
placement is an annotation, which the table does not list. Any other field must decide some cells."""

GPUS = 8
"""The local verdicts hold on a machine with the GPUs a sample asks for (with fewer, the job is refused)."""


@pytest.fixture(autouse=True, scope="module")
def fixed_machine() -> Iterator[None]:
    """The local dry run takes ports free right now, and this machine's GPUs: fixed ones make dry runs
    comparable, and the verdicts the same on every machine."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(local_prepare, "free_ports", lambda count: list(range(41000, 41000 + count)))
        mp.setattr(gpus, "discover_gpus",
                   lambda **_: gpus.GpuInventory(tuple(gpus.Gpu(i, uuid=f"GPU-{i}") for i in range(GPUS)), "test"))
        yield


_SEEN: dict[str, Observation] = {}


def job_of(document: dict[str, Any], files: dict[str, str], folder: Path) -> TrainJob:
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return from_dict(document, base_dir=folder)


def seen(document: dict[str, Any], files: dict[str, str], backend: str, folder: Path) -> Observation:
    """`backend`'s verdict on a job document, once per document (baselines are shared by many rows)."""
    key = json.dumps([document, files, backend], sort_keys=True)
    if key not in _SEEN:
        _SEEN[key] = observe(job_of(document, files, folder), backend)
    return _SEEN[key]


def check(row: Row, folder: Path) -> list[str]:
    sample, baseline = parity.sample_document(row), parity.baseline_document(row)
    out = []
    for backend in BACKENDS:
        found = discrepancies(row, backend, seen(sample, dict(row.files), backend, folder),
                              seen(baseline, dict(row.files), backend, folder))
        out += [f"{row.key} on {backend} ({row.cell(backend).verdict}): {d}" for d in found]
    return out


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("parity")


# -- the table covers the schema ----------------------------------------------------------------------------


def test_every_field_of_the_schema_has_a_row() -> None:
    fields = schema_fields(full_json_schema())
    assert len(fields) > 100
    rows = {r.field for r in ROWS}
    missing = [f for f in fields if f not in rows]
    assert not missing, (
        f"fields without a row in kubetrain/parity/table.py: {missing}. Decide what each backend "
        "does with them (render every flavor, dry-run the local backend), add the rows, then regenerate the "
        f"docs: {REGENERATE}")
    stale = sorted(rows - set(fields))
    assert not stale, f"rows for fields the schema does not have: {stale}"


def test_rows_are_well_formed() -> None:
    assert ("local", *FLAVORS) == parity.BACKENDS
    keys = [r.key for r in ROWS]
    assert len(keys) == len(set(keys)), [k for k in keys if keys.count(k) > 1]
    for r in ROWS:
        assert set(r.cells) == set(BACKENDS), r.key
        assert r.section, r.key
        for backend, cell in r.cells.items():
            assert cell.verdict in VERDICTS, (r.key, backend)
            assert not (cell.same and cell.verdict != parity.HONOURED), (r.key, backend)
            if cell.verdict in (parity.APPROXIMATED, IGNORED):
                assert cell.note, f"{r.key} on {backend}: say how it is approximated, or why it is ignored"


def test_no_flavor_drops_a_field_silently() -> None:
    assert not [(r.key, f) for r in ROWS for f in KUBERNETES if r.cell(f).verdict == IGNORED]


def test_unchecked_cells_are_few() -> None:
    """Cells a dry run cannot show (what happens after the job ends, or only in the store): each is
    checked by its own test, named in the cell."""
    unchecked = [(r.key, b) for r in ROWS for b in BACKENDS if r.cell(b).unchecked]
    assert len(unchecked) <= 4, unchecked


def test_every_row_has_a_sample_the_schema_accepts(folder: Path) -> None:
    for r in ROWS:
        job_of(parity.sample_document(r), dict(r.files), folder)
        job_of(parity.baseline_document(r), dict(r.files), folder)


# -- the cells a flavor's Features record decides ---------------------------------------------------------------


def columns(rows: list[Row], flavor: str) -> dict[str, Cell]:
    return {r.key: r.cell(flavor) for r in rows}


def verdicts(rows: list[Row], flavor: str) -> dict[str, str]:
    return {r.key: r.cell(flavor).verdict for r in rows}


def test_the_table_is_built_from_the_flavors_records() -> None:
    assert [r.cells for r in build_rows(FEATURES)] == [r.cells for r in ROWS]


@pytest.mark.parametrize("name", [f.name for f in fields(Features) if f.name not in NOT_IN_THE_TABLE])
def test_changing_a_features_record_changes_the_table(name: str) -> None:
    """Each fact a record holds is said once: flip it on a flavor, and that flavor's cells change; no other
    flavor's verdicts do (their refusals name the flavors able, which may now include it)."""
    changed_somewhere = False
    for flavor, record in FEATURES.items():
        value = getattr(record, name)
        flipped: Any = not value if isinstance(value, bool) else tuple(
            p for p in ("All", "Running", "None") if p not in value)
        rows = build_rows({**FEATURES, flavor: replace(record, **{name: flipped})})
        changed_somewhere |= columns(rows, flavor) != columns(ROWS, flavor)
        for other in BACKENDS:
            if other != flavor:
                assert verdicts(rows, other) == verdicts(ROWS, other), (name, flavor, other)
    assert changed_somewhere, f"no cell of the table follows Features.{name}: derive its cells (parity/derived.py)"


def test_a_flavor_that_gains_a_feature_is_honoured_and_named_as_able() -> None:
    rows = build_rows({**FEATURES, "volcano": replace(FEATURES["volcano"], suspend=True)})
    suspend = next(r for r in rows if r.key == "spec.runPolicy.suspend")
    assert suspend.cell("volcano").verdict == parity.HONOURED
    job = replace(FEATURES["job"], trials=False)
    trials = next(r for r in build_rows({**FEATURES, "job": job}) if r.key == "spec.trials.completions")
    assert {trials.cell(f).verdict for f in KUBERNETES} == {REFUSED}
    assert trials.cell("job").note.endswith("no flavor can")
    deadline = parity.row_of("spec.runPolicy.activeDeadlineSeconds")
    assert deadline.cell("volcano").note.endswith("use the job, jobset or kubeflow flavor")


def test_records_must_be_one_per_flavor_in_order() -> None:
    with pytest.raises(ValueError, match="a record per flavor"):
        build_rows({name: FEATURES[name] for name in reversed(FEATURES)})


# -- the table says what the code does ---------------------------------------------------------------------


@pytest.mark.parametrize("row", ROWS, ids=[r.key for r in ROWS])
def test_the_row_holds_on_every_backend(row: Row, folder: Path) -> None:
    problems = check(row, folder)
    assert not problems, "\n".join([*problems, f"fix the row or the code; then {REGENERATE}"])


def _head(path: str) -> str:
    return path.split(".")[1].split("[")[0] if path.startswith("spec.") else ""


def at_role(row: Row) -> Row | None:
    """The row with its setting given to the worker role instead of the job (None: not a role's setting):
    each setting the sample or baseline touches, as it ends up, moves to the role; the job keeps `BASE`'s.
    A role's cells (`Row.role`) replace the job's."""
    if _head(row.field) not in SHARED:
        return None
    moved = {_head(p) for p in [*row.sample, *(row.baseline or {})]} & SHARED

    def move(assignments: dict[str, Any]) -> dict[str, Any]:
        spec = parity.assign(parity.BASE, assignments)["spec"]
        out = {p: v for p, v in assignments.items() if _head(p) not in moved}
        out.update({"spec.replicas": DELETE, "spec.roles": {"worker": {"replicas": 2}}})
        for head in moved:
            out[f"spec.{head}"] = parity.BASE["spec"].get(head, DELETE)
            if head in spec:
                out[f"spec.roles.worker.{head}"] = spec[head]
        return out

    return replace(row, sample=move(dict(row.sample)), baseline=move(dict(row.baseline or {})),
                   at="spec.roles.worker." + row.path[len("spec."):], cells={**row.cells, **row.role})


ROLE_ROWS = [r for r in map(at_role, ROWS) if r is not None]


def test_most_rows_are_role_settings() -> None:
    assert len(ROLE_ROWS) > len(ROWS) // 2


@pytest.mark.parametrize("row", ROLE_ROWS, ids=[r.key for r in ROLE_ROWS])
def test_a_role_setting_means_the_job_setting(row: Row, folder: Path) -> None:
    problems = check(row, folder)
    assert not problems, "\n".join(problems)


def test_refusals_name_the_flavors_the_table_says_can() -> None:
    """A refusal's "flavors that can express it" (`flavors_phrase`) parses back; the check in
    `discrepancies` relies on it."""
    for able in ((), ("kubeflow",), ("job", "jobset", "volcano")):
        assert able_flavors(f"x: the job flavor cannot express it; {flavors_phrase(able)}") == set(able)
    assert able_flavors("must be a whole number") is None


def test_the_checks_catch_a_wrong_row(folder: Path) -> None:
    """A row that claims the wrong thing fails: a silent drop claimed honoured, a refusal claimed honoured,
    a field that takes effect claimed ignored, a refusal at the wrong path."""
    image = parity.row_of("spec.image")
    assert check(replace(image, cells={**image.cells, "local": parity.ok()}), folder)
    assert check(replace(image, cells={**image.cells, "job": parity.ignored("no")}), folder)
    s3 = parity.row_of("spec.mounts[type=s3]")
    assert check(replace(s3, cells={**s3.cells, "volcano": parity.ok()}), folder)
    assert check(replace(s3, at="spec.mounts[1]"), folder)
    queue = parity.row_of("spec.scheduling.queue")
    assert check(replace(queue, cells={**queue.cells, "local": parity.ok()}), folder)


# -- docs/parity.md ------------------------------------------------------------------------------------------


def test_docs_are_generated_from_the_table() -> None:
    assert DOCS.read_text(encoding="utf-8") == markdown(), (
        f"docs/parity.md is out of date: {REGENERATE}")


def test_docs_are_linked() -> None:
    assert "docs/parity.md" in (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    assert "docs/parity.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_counts() -> None:
    counts_ = counts()
    assert set(counts_) == set(BACKENDS)
    for backend in BACKENDS:
        assert sum(counts_[backend].values()) == len(ROWS)
    assert counts_["job"][REFUSED] >= 1


# -- what a job sets ---------------------------------------------------------------------------------------------


def test_set_fields_name_the_table_fields() -> None:
    doc = {"metadata": {"name": "x", "labels": {"a": "b"}},
           "spec": {"image": "i", "mounts": [{"type": "s3", "bucket": "b", "dst": "/s3"}], "tty": False,
                    "scheduling": {"queue": "q"}, "workingDir": "/w",
                    "ports": [{"container": 1, "name": "p"}],
                    "roles": {"worker": {"replicas": 2, "image": "j", "resources": {"gpu": 1}, "workingDir": "/r"}}}}
    found = {(schema, path) for schema, path, _ in parity.set_fields(doc)}
    assert {("metadata.labels", "metadata.labels"), ("spec.image", "spec.image"),
            ("spec.mounts[type=s3]", "spec.mounts[0]"), ("spec.mounts[type=s3].bucket", "spec.mounts[0].bucket"),
            ("spec.ports[].name", "spec.ports[0].name"), ("spec.image", "spec.roles.worker.image"),
            ("spec.roles.*.replicas", "spec.roles.worker.replicas"),
            ("spec.resources.gpu", "spec.roles.worker.resources.gpu")} <= found
    assert ("metadata.labels.a", "metadata.labels.a") not in found  # a map is one field
    ignored = {path for _, path in parity.rows_for(doc, "local", (IGNORED,))}
    assert ignored == {"spec.image", "spec.roles.worker.image", "spec.scheduling.queue",
                       "spec.ports[0].name"}  # not tty: false asks for nothing; a role's workingDir is used


# -- render: every problem at once -----------------------------------------------------------------------------

ROUNDS = {
    "apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": {"name": "rounds"},
    "spec": {"framework": "generic", "replicas": 2, "run": {"exec": ["./serve"]},
             "mounts": [{"type": "bind", "src": "/a", "dst": "/a"}, {"type": "s3", "bucket": "b", "dst": "/s3"}],
             "resources": {"gpu": 1, "gpuLimit": 2}, "scheduling": {"preemptionLimit": 1},
             "runPolicy": {"cleanPodPolicy": "None"}},
}


@pytest.mark.parametrize("flavor", list(FLAVORS))
def test_render_reports_every_problem_at_once(flavor: str) -> None:
    """No rounds: fixing what one render reports never reveals more problems (kubeflow used to stop at the
    framework it has no kind for, before the pods' problems)."""
    with pytest.raises(SpecError) as caught:
        render_manifests(from_dict(ROUNDS), flavor)
    paths = set(caught.value.paths)
    expected = {"spec.image", "spec.mounts[1]", "spec.resources.gpuLimit", "spec.scheduling.preemptionLimit"}
    expected |= {"spec.framework"} if flavor == "kubeflow" else {"spec.runPolicy.cleanPodPolicy"}
    assert paths == expected
    fixed = json.loads(json.dumps(ROUNDS))
    spec = fixed["spec"]
    spec.update(image="train:1", framework="pytorch" if flavor == "kubeflow" else "generic",
                run={"python": ["t.py"]} if flavor == "kubeflow" else spec["run"])
    spec["mounts"] = spec["mounts"][:1]
    spec["resources"].pop("gpuLimit")
    spec["scheduling"].pop("preemptionLimit")
    if flavor != "kubeflow":
        spec["runPolicy"].pop("cleanPodPolicy")
    render_manifests(from_dict(fixed), flavor)


# -- kubetrain validate --backend ----------------------------------------------------------------------------------


def validate(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    code = main(["validate", *map(str, args)])
    return code, capsys.readouterr().err


ALL_FIELDS = ROOT / "examples" / "all-fields" / "job.yaml"


def test_validate_kubernetes_says_which_flavors_can_run_the_job(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = validate(capsys, ALL_FIELDS, "--backend", "kubernetes")
    assert code == 0, err
    assert "flavors that can run all-fields: jobset" in err
    assert "flavor job refuses all-fields (1 problem):\n  spec.scheduling.minAvailable: gang scheduling" in err
    assert "flavor volcano refuses all-fields (1 problem):\n  spec.runPolicy.activeDeadlineSeconds" in err
    assert "flavor jobset runs all-fields, with 7 warning(s):" in err and "PRIVILEGED" in err
    assert "Secret all-fields-ssh: kubetrain makes the job's ssh key pair when it submits the job" in err
    code, err = validate(capsys, ALL_FIELDS, "--flavor", "volcano")
    assert code == 2 and "spec.runPolicy.activeDeadlineSeconds" in err and "flavor job" not in err
    code, err = validate(capsys, ALL_FIELDS, "--backend", "k8s", "--flavor", "jobset")
    assert code == 0 and "error" not in err


def test_validate_reports_every_refusal_in_one_pass(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "rounds.yaml"
    path.write_text(json.dumps(ROUNDS), encoding="utf-8")
    code, err = validate(capsys, path, "--backend", "kubernetes")
    assert code == 2
    assert "error: " + f"{path}: flavors that can run rounds: none" in err
    assert err.count("spec.mounts[1]: an s3 mount") == len(FLAVORS)
    assert "flavor kubeflow refuses rounds (5 problems)" in err


def test_validate_local_reports_its_warnings_and_what_it_drops(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    job = parity.assign(parity.BASE, {
        "spec.env": [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}],
        "spec.tolerations": [{"key": "gpu", "operator": "Exists"}], "spec.tty": False,
        "spec.roles": {"worker": {"replicas": 2, "image": "other:1"}}, "spec.replicas": DELETE})
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(job), encoding="utf-8")
    code, err = validate(capsys, path, "--backend", "local")
    assert code == 0, err
    assert "the local backend runs parity, with" in err
    assert "env PW (role worker) comes from a Secret/ConfigMap/resource: not set locally" in err
    why = parity.row_of("spec.image").cell("local").note
    assert f"warning: not used locally ({why}): spec.image, spec.roles.worker.image" in err
    assert "spec.tolerations" in err and "spec.tty" not in err  # false asks for nothing
    code, err = validate(capsys, path, "--backend", "local", "--flavor", "job")
    assert code == 2 and "--flavor" in err


def test_validate_local_reports_every_refusal(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    refusing = [r for r in ROWS if r.field.startswith("spec.mounts[") and r.field.endswith("]")
                and r.cell("local").verdict == REFUSED]
    assert refusing  # mounts of what exists only on a cluster
    mounts = [parity.sample_document(r)["spec"]["mounts"][0] for r in refusing]
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(parity.assign(parity.BASE, {"spec.mounts": mounts})), encoding="utf-8")
    code, err = validate(capsys, path, "--backend", "local")
    assert code == 2
    assert f"the local backend refuses parity ({len(mounts)} problems)" in err
    for i in range(len(mounts)):
        assert f"\n  spec.mounts[{i}]: " in err


def test_validate_without_a_backend_checks_the_schema_only(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = validate(capsys, ALL_FIELDS)
    assert code == 0 and "valid TrainJob all-fields" in err and "flavor" not in err
