"""`kubetrain completion bash`: the script, loaded in a real bash, completes as a user types (COMP_LINE and
COMP_WORDS as bash sets them, "=" splitting words). zsh and fish are not installed here; their scripts
ask the same `kubetrain __complete`, whose answers these tests check through bash."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.cluster import Cluster, emulated  # noqa: F401 - the fixture
from tests.support.helpers import cli, generic, make_job, run_job, write

# ruff: noqa: F811 - the emulated fixture is imported from tests.support.cluster and named as a parameter

BIN = str(Path(sys.executable).parent)  # where the venv's `kubetrain` is, as installed


def bash(script: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", 'eval "$(kubetrain completion bash)"\n' + script],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"},
        timeout=120,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def complete(line: str, cwd: Path | None = None) -> list[str]:
    """COMPREPLY for the cursor at the end of `line`, after bash split it into COMP_WORDS."""
    words = re.findall(r"=|[^\s=]+", line) + ([""] if line.endswith(" ") else [])
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    out = bash(
        f"COMP_LINE='{line}'; COMP_POINT={len(line)}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
        '_kubetrain; printf "%s\\n" "${COMPREPLY[@]}"',
        cwd,
    )
    return [w for w in out.split("\n") if w]


def test_the_script_registers_a_completion_for_kubetrain() -> None:
    assert bash("complete -p kubetrain").strip() == "complete -F _kubetrain kubetrain"


def test_verbs_flags_and_their_values() -> None:
    assert complete("kubetrain st") == ["status"]
    assert complete("kubetrain compl") == ["completion"]
    assert complete("kubetrain completion ") == ["bash", "zsh", "fish"]
    assert complete("kubetrain run --fla") == ["--flavor"]
    assert complete("kubetrain render job.yaml --flavor j") == ["job", "jobset"]
    assert complete("kubetrain list -o ") == ["wide", "json", "yaml", "name"]
    assert complete("kubetrain list --backend ") == ["local", "kubernetes", "k8s"]
    # bash splits `--for=condition=Su` at each '=': what it replaces is the part after the last one.
    assert complete("kubetrain wait abc --for=condition=Su") == ["Succeeded", "Suspended"]
    assert complete("kubetrain wait abc --for ph") == [f"phase={p}" for p in
                                                        ("Pending", "Running", "Succeeded", "Failed", "Cancelled",
                                                         "Suspended")]


def test_file_paths_where_a_verb_takes_a_file(tmp_path: Path) -> None:
    write(tmp_path / "job.yaml", "")
    write(tmp_path / "jobs" / "other.yaml", "")
    write(tmp_path / "notes.txt", "")
    assert sorted(complete("kubetrain run jo", tmp_path)) == ["job.yaml", "jobs"]
    assert complete("kubetrain validate jobs/", tmp_path) == ["jobs/other.yaml"]


def test_job_ids_from_the_local_store(tmp_path: Path) -> None:
    write(tmp_path / "ok.py", "pass\n")
    first = run_job(make_job(generic(["ok.py"], replicas=1), name="alpha"), tmp_path).job_id
    second = run_job(make_job(generic(["ok.py"], replicas=1), name="beta"), tmp_path).job_id
    assert complete("kubetrain status ") == [second, first]  # newest first, as `kubetrain list`
    assert complete(f"kubetrain logs {first[:4]}") == [first]
    assert complete("kubetrain cancel x-nothing") == []
    assert cli("list").returncode == 0


def test_job_ids_from_the_cluster_the_line_names(emulated: Cluster, tmp_path: Path) -> None:
    config = emulated.kubeconfig
    write(tmp_path / "train.py", "pass\n")
    job = tmp_path / "job.yaml"
    write(job, "apiVersion: kubetrain.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: demo}\nspec:\n"
               "  framework: pytorch\n  image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\n"
               "  run: {python: [train.py]}\n")
    assert cli("run", job, "-d", "--backend", "k8s", "--kubeconfig", config, "--flavor", "job").returncode == 0
    assert complete(f"kubetrain describe --backend k8s --kubeconfig {config} de") == ["demo"]
    assert complete("kubetrain describe de") == []  # the local store has no such job
