"""Golden manifests for a few examples, reviewed by eye once: a change in the rendered YAML shows as a diff.

Regenerate after an intended change with `KUBETRAIN_UPDATE_GOLDEN=1 pytest tests/kubernetes/render/test_golden.py`,
then review `git diff tests/golden/render`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from kubetrain.backends.kubernetes.render import to_yaml
from kubetrain.jobspec import load_file
from tests.support.manifest_schemas import assert_valid
from tests.support.render import render

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "render"
IMAGE = "registry.example.com/mpi4py:1"

CASES = [
    ("pytorch-ddp", "job"),
    ("tensorflow-multiworker", "jobset"),
    ("mpi-allreduce", "volcano"),
    ("pytorch-ddp", "kubeflow"),
    ("deepspeed", "jobset"),
]


@pytest.mark.parametrize(("example", "flavor"), CASES, ids=[f"{e}-{f}" for e, f in CASES])
def test_golden(example: str, flavor: str) -> None:
    # The MPI example leaves the image to the user (`--set spec.image=...`); the golden file pins one.
    overrides = [f"spec.image={IMAGE}"] if example == "mpi-allreduce" else []
    objects = render(load_file(ROOT / "examples" / example / "job.yaml", overrides=overrides), flavor)
    text = to_yaml(objects)
    path = GOLDEN / f"{example}-{flavor}.yaml"
    if os.environ.get("KUBETRAIN_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    golden = path.read_text(encoding="utf-8")
    assert text == golden, f"{path.name} differs; if intended, regenerate (see this module's docstring)"
    # The file is what `kubectl apply -f` reads: it parses back to exactly the objects, which are valid.
    assert list(yaml.safe_load_all(golden)) == objects
    assert_valid(objects)
