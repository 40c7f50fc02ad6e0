"""The same job run two ways: every foreign example given to kubetrain as it is, and the TrainJob that
`kubetrain convert` prints for it, render the same manifests on every flavor (the same containers, env,
resources and policies, to the byte), or are refused by the same flavors with the same message; and both
plan the same local processes. What a user reads in the conversion is what runs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import kubetrain
from kubetrain.backends.local.backend import LocalBackend
from kubetrain.contract.choices import FLAVORS
from kubetrain.foreign.commented_yaml import commented_yaml
from kubetrain.foreign.loader import load_job_documents
from kubetrain.jobspec import SpecError, TrainJob, load_file
from tests.support.helpers import EXAMPLES

SOURCES = sorted(
    p for p in (EXAMPLES / "foreign").glob("*.yaml") if p.name != "trainingworkload-template.yaml"  # a base only
)
CASES = [(p, n) for p in SOURCES for n in range(len(load_job_documents(p)))]
"""Each document of each example (a file may hold several)."""


def both(source: Path, document: int, tmp_path: Path) -> tuple[TrainJob, TrainJob]:
    """The job read from `source` as it is, and the job read back from the conversion `kubetrain convert`
    prints for it, written into the source's folder so that relative paths resolve alike."""
    job, conversion = load_job_documents(source)[document]
    assert conversion is not None, f"{source.name} is read as a foreign kind"
    printed = source.parent / f".converted-{source.stem}-{document}-{tmp_path.name}.yaml"
    printed.write_text(commented_yaml(conversion))
    try:
        return job, load_file(printed)
    finally:
        printed.unlink()


def case_id(case: tuple[Path, int]) -> str:
    return f"{case[0].stem}-{case[1] + 1}"


def ports_numbered(plan: str) -> str:
    """The plan with its ports named by order of appearance: a local plan binds free ports of the moment."""
    ports = dict.fromkeys(re.findall(r"127\.0\.0\.1:(\d+)", plan))
    for n, port in enumerate(ports):
        plan = re.sub(rf"\b{port}\b", f"<port {n}>", plan)
    return plan


def rendered(job: TrainJob, flavor: str) -> Any:
    try:
        return kubetrain.render(job, flavor)
    except SpecError as exc:
        return f"refused: {exc}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_a_file_and_its_conversion_render_the_same_manifests_on_every_flavor(
    case: tuple[Path, int], tmp_path: Path
) -> None:
    as_is, converted = both(*case, tmp_path)
    assert converted.to_dict() == as_is.to_dict()
    for flavor in FLAVORS:
        assert json.dumps(rendered(converted, flavor), sort_keys=True) == json.dumps(
            rendered(as_is, flavor), sort_keys=True
        ), flavor


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_a_file_and_its_conversion_plan_the_same_local_processes(case: tuple[Path, int], tmp_path: Path) -> None:
    as_is, converted = both(*case, tmp_path)
    backend = LocalBackend()
    try:
        plans = []
        for job in (as_is, converted):
            try:
                result = backend.run(job, dry_run="client")
                plans.append(ports_numbered(json.dumps(result.plan, sort_keys=True, default=str)))
            except kubetrain.KubetrainError as exc:
                plans.append(f"refused: {exc}")
        assert plans[0] == plans[1]
    finally:
        backend.close()
