"""The corpus: job files written in the shapes the upstream projects' own examples use (tests/data/corpus/),
each run locally end to end as a user runs it (`kubetrain run FILE`), and held to what its controller would
give its containers (tests/data/corpus/expected.yaml): world sizes, ranks, variables, files, host names —
or refused before anything starts, or failed, never a wrong run reported as a success.

Table-driven: a new file needs its entry in expected.yaml and nothing here.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from tests.support.helpers import ROOT, cli, no_process_left_behind  # noqa: F401 (fixture)

CORPUS = ROOT / "tests" / "data" / "corpus"
EXPECTED: dict[str, dict[str, Any]] = yaml.safe_load((CORPUS / "expected.yaml").read_text())
FILES = sorted(p.name for p in CORPUS.glob("*.yaml") if p.name != "expected.yaml")
RUN_TIMEOUT = 150.0
"""Seconds a corpus job may take end to end (a few torch processes on a loaded 2-core machine)."""


def test_every_file_has_an_expectation() -> None:
    assert set(FILES) == set(EXPECTED), "each corpus file needs its entry in expected.yaml (and only those)"


def no_traceback_of_kubetrain(result: Any) -> None:
    """kubetrain itself raised nothing; a replica's own output (`[role-i] ...`: torchrun logs a traceback when
    an agent leaves its exit barrier after the store's host has gone) is the program's."""
    for stream in (result.stdout, result.stderr):
        assert not [line for line in stream.splitlines() if "Traceback" in line and not line.startswith("[")], stream


def reports_of(stdout: str) -> list[dict[str, Any]]:
    """The `CORPUS {...}` lines the stand-in scripts printed, whatever replica prefix kubetrain added."""
    return [json.loads(line.split("CORPUS ", 1)[1]) for line in stdout.splitlines() if "CORPUS {" in line]


def matches(expected: Any, seen: Any) -> bool:
    if isinstance(expected, str) and expected.startswith("~"):
        return isinstance(seen, str) and re.fullmatch(expected[1:], seen) is not None
    if isinstance(expected, dict):
        return isinstance(seen, dict) and all(k in seen and matches(v, seen[k]) for k, v in expected.items())
    return bool(expected == seen)


def assign(expected: list[dict[str, Any]], seen: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """A printed report for each expected one, each used once (backtracking: patterns may overlap); None when
    there is none."""
    if not expected:
        return []
    first, rest = expected[0], expected[1:]
    for i, report in enumerate(seen):
        if matches(first, report):
            found = assign(rest, seen[:i] + seen[i + 1 :])
            if found is not None:
                return [report, *found]
    return None


@pytest.mark.parametrize("name", FILES)
def test_corpus_file(name: str) -> None:
    entry = EXPECTED[name]
    path = CORPUS / name
    outcome = entry["outcome"]
    if outcome == "debug":
        result = cli("run", path, "--dry-run", "-o", "json", timeout=RUN_TIMEOUT)
        no_traceback_of_kubetrain(result)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["runMode"] == "Debug"
        return
    result = cli("run", path, timeout=RUN_TIMEOUT)
    no_traceback_of_kubetrain(result)
    shown = f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    code = {"succeeded": 0, "failed": 1, "refused": 2}[outcome]
    assert result.returncode == code, shown
    if "message" in entry:
        assert re.search(entry["message"], result.stderr), shown
    warned = [line for line in result.stderr.splitlines() if "warning:" in line]
    for text in entry.get("warnings", []):
        assert any(text in line for line in warned), f"no warning names {text}\n{shown}"
    if outcome == "refused":
        assert "CORPUS" not in result.stdout, "a refused job ran something:\n" + shown
        return
    seen = reports_of(result.stdout)
    expected = entry.get("reports", [])
    if not entry.get("partial"):
        assert len(seen) == len(expected), shown
    assert assign(expected, seen) is not None, f"expected {expected}\n{shown}"
