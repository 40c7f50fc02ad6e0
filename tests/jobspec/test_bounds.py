"""Hostile or absurd job files end in one clear error with the file, never a traceback or a hang."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.jobspec import SpecError, load_file, load_text
from kubetrain.jobspec.load import MAX_FILE_BYTES
from kubetrain.jobspec.yaml_source import MAX_DEPTH

HEAD = "apiVersion: kubetrain.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: deep}\n"


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 500, 5000])
def test_deep_nesting_is_an_error_not_a_recursion_error(depth: int) -> None:
    text = HEAD + "spec:\n  run: {exec: " + "[" * depth + "x" + "]" * depth + "}\n"
    with pytest.raises(SpecError, match=f"nested too deeply \\(more than {MAX_DEPTH} levels\\)"):
        load_text(text, source="deep.yaml")


def test_a_recursive_anchor_is_an_error() -> None:
    text = HEAD + "spec:\n  run: {python: &a [x.py, *a]}\n"
    with pytest.raises(SpecError, match="recursive anchor") as info:
        load_text(text, source="loop.yaml")
    assert "loop.yaml:5" in str(info.value)


def test_an_endless_file_is_read_only_up_to_the_bound() -> None:
    with pytest.raises(SpecError, match=f"too large for a job file \\(over {MAX_FILE_BYTES >> 20} MiB\\)"):
        load_file("/dev/zero")


def test_a_large_file_is_refused_with_its_name(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text(HEAD + "# " + "x" * MAX_FILE_BYTES + "\n")
    with pytest.raises(SpecError, match=r"big\.yaml.*too large"):
        load_file(big)


def test_ordinary_nesting_and_anchors_still_load() -> None:
    text = HEAD + "spec:\n  run: {exec: &cmd [echo, hi]}\n  env: {A: x}\n"
    job = load_text(text)
    assert job.spec.run is not None and job.spec.run.exec == ["echo", "hi"]
