"""`kubetrain.metrics.log` as a training script meets it: in real processes, with the environment each backend
gives, never raising into the training loop, and cheap to import."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from kubetrain.metrics import MARKER, parse_file_line, parse_log_line

# The variables that decide where metrics go, and the replica identity: a test starts from none of them.
_OURS = (
    "KUBETRAIN_METRICS_FILE",
    "KUBETRAIN_METRICS",
    "KUBETRAIN_JOB",
    "KUBETRAIN_ROLE",
    "KUBETRAIN_REPLICA_INDEX",
    "RANK",
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "JAX_PROCESS_ID",
)


def script(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter with only `env` of the variables above."""
    clean = {k: v for k, v in os.environ.items() if k not in _OURS}
    return subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, timeout=60, check=True
    )


def test_without_kubetrain_it_does_nothing(tmp_path: Path) -> None:
    out = script(
        "import kubetrain.metrics as m\nfor i in range(3): m.log(step=i, loss=1.0)\nprint('trained')",
        HOME=str(tmp_path),
    )
    assert out.stdout == "trained\n"
    assert out.stderr == ""
    assert list(tmp_path.iterdir()) == []


def test_a_metrics_file_gets_a_line_per_call_with_the_replica(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "worker-1.jsonl"
    code = "import kubetrain.metrics as m\nm.log(step=1, loss=0.75, samples_per_s=120)\nm.log(step=2, loss=0.5)"
    out = script(
        code,
        KUBETRAIN_METRICS_FILE=str(path),
        KUBETRAIN_JOB="j",
        KUBETRAIN_ROLE="worker",
        KUBETRAIN_REPLICA_INDEX="1",
        RANK="3",
    )
    assert out.stdout == ""  # a file, not the output
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[0])["values"] == {"loss": 0.75, "samples_per_s": 120.0}
    samples = [s for line in lines for s in parse_file_line(line)]
    assert [(s.name, s.value, s.step) for s in samples] == [
        ("loss", 0.75, 1),
        ("samples_per_s", 120.0, 1),
        ("loss", 0.5, 2),
    ]
    assert {(s.role, s.index, s.rank, s.replica, s.source) for s in samples} == {("worker", 1, 3, "worker-1", "rank 3")}
    assert samples[0].time <= samples[2].time
    assert path.stat().st_mode & 0o777 == 0o600  # private, as the job store


def test_under_kubetrain_without_a_file_it_writes_marked_lines_to_stdout() -> None:
    """As on Kubernetes: the container log is where kubetrain reads them back."""
    code = "import kubetrain.metrics as m\nprint('epoch 1')\nm.log(step=7, loss=0.25)\nprint('epoch 2')"
    out = script(code, KUBETRAIN_JOB="j", KUBETRAIN_ROLE="worker", KUBETRAIN_REPLICA_INDEX="0", RANK="0")
    lines = out.stdout.splitlines()
    assert lines[0] == "epoch 1" and lines[2] == "epoch 2"
    assert lines[1].startswith(MARKER)
    assert parse_log_line(lines[0]) is None
    [sample] = parse_log_line(lines[1]) or []
    assert (sample.name, sample.value, sample.step, sample.replica, sample.rank) == ("loss", 0.25, 7, "worker-0", 0)


def test_the_environment_can_force_stdout_or_turn_metrics_off(tmp_path: Path) -> None:
    code = "import kubetrain.metrics as m\nm.log(step=1, acc=0.9)"
    forced = script(code, KUBETRAIN_METRICS="stdout")
    assert [s.name for s in parse_log_line(forced.stdout.strip()) or []] == ["acc"]
    off = script(code, KUBETRAIN_METRICS="off", KUBETRAIN_JOB="j", KUBETRAIN_METRICS_FILE=str(tmp_path / "m"))
    assert off.stdout == "" and not (tmp_path / "m").exists()


def test_bad_values_warn_once_per_name_and_the_rest_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    code = "\n".join(
        [
            "import kubetrain.metrics as m",
            "for i in range(3):",
            "    m.log(step=i, loss=0.5, note='hello', grads=[1, 2])",
            "m.log(step='one', loss=1.0)",
            "m.log(step=3, loss=float('nan'), lr=float('inf'))",
            "print('still training')",
        ]
    )
    out = script(code, KUBETRAIN_METRICS_FILE=str(path))
    assert out.stdout == "still training\n"
    warnings = [line for line in out.stderr.splitlines() if "kubetrain.metrics" in line]
    assert len(warnings) == 3, out.stderr  # note, grads, step: once each
    assert any("note=" in w for w in warnings) and any("grads" in w for w in warnings)
    assert any("step='one'" in w for w in warnings)
    samples = [s for line in path.read_text().splitlines() for s in parse_file_line(line)]
    assert [(s.name, s.step) for s in samples] == [("loss", 0), ("loss", 1), ("loss", 2), ("loss", 3), ("lr", 3)]
    assert math.isnan(samples[3].value) and samples[4].value == math.inf  # a diverging loss is shown, not dropped


def test_numbers_of_other_libraries_are_taken() -> None:
    code = "\n".join(
        [
            "import numpy as np, kubetrain.metrics as m",
            "m.log(step=np.int64(4), loss=np.float32(0.5), tokens=np.int32(9))",
        ]
    )
    out = script(code, KUBETRAIN_METRICS="stdout")
    samples = parse_log_line(out.stdout.strip()) or []
    assert [(s.name, s.value, s.step) for s in samples] == [("loss", 0.5, 4), ("tokens", 9.0, 4)]


def test_a_file_that_cannot_be_written_never_stops_the_training(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = "import kubetrain.metrics as m\nfor i in range(5): m.log(step=i, loss=1.0)\nprint('done')"
    out = script(code, KUBETRAIN_METRICS_FILE=str(blocker / "sub" / "m.jsonl"))
    assert out.stdout == "done\n"
    assert out.stderr.count("kubetrain.metrics") == 1


def test_processes_sharing_a_file_never_tear_each_others_lines(tmp_path: Path) -> None:
    """Ranks that mpirun or the deepspeed launcher start inside one replica share its file."""
    path = tmp_path / "shared.jsonl"
    code = (
        "import os, kubetrain.metrics as m\n"
        "for i in range(2000): m.log(step=i, **{f'metric_{j}': i * 0.5 for j in range(20)})"
    )
    env = {k: v for k, v in os.environ.items() if k not in _OURS}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], env={**env, "KUBETRAIN_METRICS_FILE": str(path), "RANK": str(rank)}
        )
        for rank in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    lines = path.read_text().splitlines()
    assert len(lines) == 8000
    per_rank: dict[int | None, int] = {}
    for line in lines:
        samples = parse_file_line(line)
        assert len(samples) == 20, line[:200]
        per_rank[samples[0].rank] = per_rank.get(samples[0].rank, 0) + 1
    assert per_rank == {0: 2000, 1: 2000, 2: 2000, 3: 2000}


def test_importing_it_in_a_replica_stays_light() -> None:
    """It runs in every replica: no job model, no backend, no YAML, not even the readers' dataclasses."""
    code = (
        "import sys, kubetrain.metrics; print(sorted(m for m in ('pydantic', 'yaml', 'dataclasses', "
        "'kubetrain.jobspec', 'kubetrain.backends', 'kubetrain.metrics.sample') if m in sys.modules))"
    )
    assert script(code).stdout.strip() == "[]"


def test_one_bad_value_is_skipped_alone_and_a_nameless_value_or_boolean_step_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    code = "\n".join(
        [
            "import kubetrain.metrics as m",
            "m.log(step=2, neg=-2, big=10**400)",  # float(10**400) overflows: only `big` is lost
            "m.log(step=3, big=10**400, ok=1.5, **{'': 2.0})",  # `big` again: no second warning
            "m.log(step=4, **{'': 3.0})",  # the empty name again: no second warning
            "m.log(step=True, flag_step=1.0)",  # a boolean step, refused as a boolean value is
            "m.log(step=5, neg=-5)",
        ]
    )
    out = script(code, KUBETRAIN_METRICS_FILE=str(path))
    warnings = [line for line in out.stderr.splitlines() if "kubetrain.metrics" in line]
    assert len(warnings) == 3, out.stderr  # big, the empty name, the step: once each
    assert any("big" in w and "too large" in w for w in warnings)
    assert any("empty name" in w for w in warnings)
    assert any("step=True" in w for w in warnings)
    samples = [s for line in path.read_text().splitlines() for s in parse_file_line(line)]
    assert [(s.name, s.value, s.step) for s in samples] == [("neg", -2.0, 2), ("ok", 1.5, 3), ("neg", -5.0, 5)]
    assert all(json.loads(line)["values"] for line in path.read_text().splitlines())  # no nameless record
