"""The verbs that answer once (status, describe, list) run without the cyclic garbage collector, which would scan
the thousands of objects a large job's pods are, again and again, for nothing; a program calling `main` gets it back.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.cli.main import main
from kubetrain.cli.registry import COMMANDS

JOB = """\
apiVersion: kubetrain.dev/v1alpha1
kind: TrainJob
metadata: {name: brief, namespace: default}
spec:
  framework: pytorch
  image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
  run: {python: [train.py]}
  replicas: 3
"""


#: Where a verb is parsed and run (`cli.main`, `cli.errors`): a collection with one of them on the stack ran while
#: the verb did (not after it ended: the collector, back on, may run at once, while `main` returns).
VERB_AT_WORK = {"build_parser", "run_handler"}


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generations of the collections that run while a verb parses its arguments or runs."""
    seen: list[int] = []

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase != "start":
            return
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_name in VERB_AT_WORK and "kubetrain" in frame.f_code.co_filename:
                seen.append(int(info["generation"]))
                return
            frame = frame.f_back  # type: ignore[assignment]

    # A collector eager to run (every 10 allocations, not 700): a small job's few objects would seldom wake it.
    threshold = gc.get_threshold()
    gc.set_threshold(10)
    gc.callbacks.append(count)
    try:
        yield seen
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*threshold)


def test_the_brief_verbs_are_status_describe_and_list() -> None:
    assert sorted(v for v, c in COMMANDS.items() if c.brief) == ["describe", "list", "status"]


@pytest.mark.parametrize("verb", [["status", "brief"], ["describe", "brief"], ["list"]])
def test_a_brief_verb_runs_no_collection_and_gives_the_collector_back(
    verb: list[str],
    kube_emulator: object,
    kube_config_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    collections: list[int],
) -> None:
    k8s = ["--backend", "k8s", "--kubeconfig", str(kube_config_file)]
    (tmp_path / "job.yaml").write_text(JOB)
    assert main(["run", str(tmp_path / "job.yaml"), "--detach", "--flavor", "job", *k8s]) == 0
    gc.collect()
    collections.clear()
    assert gc.isenabled()
    assert main([*verb, *k8s]) == 0
    assert collections == []
    assert gc.isenabled()
    assert "brief" in capsys.readouterr().out


def test_a_brief_verb_that_fails_gives_the_collector_back(
    kube_emulator: object, kube_config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "nope", "--backend", "k8s", "--kubeconfig", str(kube_config_file)]) != 0
    assert gc.isenabled()
    assert "nope" in capsys.readouterr().err


#: Modules the brief verbs leave unloaded on a token kubeconfig: each cost 3–25 ms of every start, for nothing they
#: use (urllib3: the light transport is on http.client; yaml: a kubeconfig in block YAML is read without it;
#: hashlib: only long names are digested; concurrent.futures: only reading several replicas' logs; the official
#: client and pydantic: not needed to read a job).
NOT_LOADED = ("urllib3", "yaml", "kubernetes", "pydantic", "hashlib", "concurrent.futures")


def test_the_brief_verbs_import_only_what_they_use(
    kube_emulator: object, kube_config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    k8s = ["--backend", "kubernetes", "--kubeconfig", str(kube_config_file)]
    (tmp_path / "job.yaml").write_text(JOB)
    assert main(["run", str(tmp_path / "job.yaml"), "--detach", "--flavor", "job", *k8s]) == 0
    wrapper = textwrap.dedent(f"""\
        import atexit, sys
        atexit.register(lambda: print("loaded:", sorted(m for m in {NOT_LOADED!r} if m in sys.modules),
                                      file=sys.stderr))
        from kubetrain.cli.main import command
        sys.argv = ["kubetrain", *sys.argv[1:]]
        sys.exit(command())
        """)
    for argv in (["status", "brief"], ["describe", "brief"], ["list"]):
        proc = subprocess.run([sys.executable, "-c", wrapper, *argv, *k8s], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert "brief" in proc.stdout
        assert proc.stderr.splitlines()[-1] == "loaded: []", (argv, proc.stderr)
