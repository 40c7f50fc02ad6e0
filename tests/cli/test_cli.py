"""The `kubetrain` command line as users call it: a separate process, exit codes, stdout/stderr, and
output formats other programs parse. Jobs run plain Python scripts."""

from __future__ import annotations

import json
import time
from datetime import datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.cli.main import build_parser, main
from kubetrain.jobspec import from_dict
from kubetrain.status import JobPhase, JobStatus
from tests.support.helpers import (
    EXAMPLES,
    EXIT_ON_INDEX,
    FAIL_FIRST_ATTEMPT,
    PRINT_ENV,
    TICK,
    cli,
    env_lines,
    generic,
    job_file,
    no_traceback,
    spawn_cli,
    start_detached,
    status_of,
    wait_phase,
    write,
)

pytestmark = pytest.mark.timeout(120)


def last_job_id() -> str:
    return cli("list", "-o", "name").stdout.split()[0]


# -- help, version, explain, schema ---------------------------------------------------------------------


def test_help_lists_every_verb() -> None:
    result = cli("--help")
    assert result.returncode == 0
    for verb in (
        "run",
        "list",
        "status",
        "describe",
        "logs",
        "cancel",
        "delete",
        "suspend",
        "resume",
        "attach",
        "validate",
        "explain",
        "schema",
        "version",
        "render",
    ):
        assert f"    {verb} " in result.stdout
    assert cli().returncode == 2  # no verb: the help, as a usage error


def test_every_verb_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    verbs = [a for a in build_parser()._subparsers._group_actions[0].choices]  # type: ignore[union-attr]
    for verb in verbs:
        with pytest.raises(SystemExit) as exit_info:
            main([verb, "--help"])
        assert exit_info.value.code == 0, verb
        assert f"usage: kubetrain {verb}" in capsys.readouterr().out


def test_version() -> None:
    for args in (["version"], ["--version"]):
        result = cli(*args)
        assert result.returncode == 0
        assert result.stdout.strip() == f"kubetrain {version('kubetrain')}"


def test_explain() -> None:
    result = cli("explain", "spec.runPolicy")
    assert result.returncode == 0
    assert result.stdout.startswith("FIELD:    spec.runPolicy")
    assert "backoffLimit" in result.stdout and "activeDeadlineSeconds" in result.stdout
    unknown = cli("explain", "spec.nope")
    assert unknown.returncode == 2
    assert "no such field" in unknown.stderr
    no_traceback(unknown)


def test_schema_is_json_schema_that_rejects_bad_jobs() -> None:
    from jsonschema import Draft202012Validator

    result = cli("schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    good = {
        "apiVersion": "kubetrain.dev/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "a"},
        "spec": {"replicas": 2, "run": {"python": ["t.py"]}},
    }
    assert list(validator.iter_errors(good)) == []
    assert list(validator.iter_errors({**good, "spec": {**good["spec"], "replicas": 0}}))
    assert list(validator.iter_errors({**good, "spec": {**good["spec"], "replica": 2}}))


def test_schema_accepts_every_example_validate_accepts() -> None:
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(json.loads(cli("schema").stdout))
    rejected = {}
    for path in sorted(EXAMPLES.glob("*/job.yaml")):
        errors = [
            f"{list(e.absolute_path)}: {e.message[:80]}"
            for e in validator.iter_errors(yaml.safe_load(path.read_text()))
        ]
        if errors:
            rejected[path.parent.name] = errors
    assert rejected == {}


# -- validate -------------------------------------------------------------------------------------------


def test_validate_exit_codes_and_messages(tmp_path: Path) -> None:
    examples = sorted(EXAMPLES.glob("*/job.yaml"))
    ok = cli("validate", *examples)
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr.count("valid TrainJob") == len(examples)

    bad = write(
        tmp_path / "bad.yaml",
        """\
        apiVersion: kubetrain.dev/v1alpha1
        kind: TrainJob
        metadata: {name: bad}
        spec:
          replicas: 0
          run: {python: [t.py]}
          restartPolicy: Sometimes
        """,
    )
    broken = write(tmp_path / "broken.yaml", "spec: [\n")
    cases = [
        (bad, ["bad.yaml:5: spec.replicas", "bad.yaml:7: spec.restartPolicy"]),
        (broken, ["broken.yaml", "not valid YAML"]),
        (tmp_path / "missing.yaml", ["missing.yaml", "cannot read"]),
    ]
    for path, expected in cases:
        result = cli("validate", path)
        assert result.returncode == 2, (path, result.stderr)
        no_traceback(result)
        for text in expected:
            assert text in result.stderr
    mixed = cli("validate", examples[0], bad)
    assert mixed.returncode == 2
    assert "valid TrainJob" in mixed.stderr and "spec.replicas" in mixed.stderr
    quiet = cli("validate", "-q", EXAMPLES / "pytorch-ddp" / "job.yaml")
    assert quiet.returncode == 0 and quiet.stdout == quiet.stderr == ""
    # -q keeps the warnings: all-fields' host folders and capability relax kubetrain's security defaults
    relaxed = cli("validate", "-q", EXAMPLES / "all-fields" / "job.yaml")
    assert relaxed.returncode == 0 and relaxed.stdout == ""
    assert relaxed.stderr.count("RELAXES kubetrain's security defaults on Kubernetes") == 3, relaxed.stderr


def test_validate_and_render_refuse_what_the_api_server_would_about_resources(tmp_path: Path) -> None:
    fractional = write(
        tmp_path / "fractional.yaml",
        """\
        apiVersion: kubetrain.dev/v1alpha1
        kind: TrainJob
        metadata: {name: frac}
        spec:
          image: train:1
          run: {python: [t.py]}
          limits:
            nvidia.com/gpu: 0.5
        """,
    )
    for verb in ("validate", "render"):
        result = cli(verb, fractional)
        assert result.returncode == 2, result.stderr
        no_traceback(result)
        assert 'fractional.yaml:8: spec.limits."nvidia.com/gpu": must be a whole number' in result.stderr
        assert "hint:" in result.stderr and "resources.gpuSharing" in result.stderr
    unlimited = write(
        tmp_path / "unlimited.yaml",
        """\
        apiVersion: kubetrain.dev/v1alpha1
        kind: TrainJob
        metadata: {name: unlimited}
        spec:
          image: train:1
          run: {python: [t.py]}
          requests: {example.com/fpga: 1}
        """,
    )
    assert cli("validate", unlimited).returncode == 0  # pairing a request with its limit needs the merged container
    result = cli("render", unlimited)
    assert result.returncode == 2 and result.stdout == ""
    assert 'spec.requests."example.com/fpga": has no limit' in result.stderr


def test_bad_input_to_run_is_a_usage_error_without_traceback(tmp_path: Path) -> None:
    path = job_file(tmp_path, generic(["t.py"]))
    for args in (
        ["run", path, "--set", "spec.replicas=abc"],
        ["run", path, "--set", "garbage"],
        ["run", path, "--replicas", "2"],  # quick-form flags with a file
        ["run"],
        ["run", tmp_path / "missing.yaml"],
    ):
        result = cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith("error: "), result.stderr
        no_traceback(result)
    assert cli("list", "-o", "name").stdout.split() == []  # nothing was created


# -- run ------------------------------------------------------------------------------------------------


def test_set_overrides_the_replica_count(tmp_path: Path) -> None:
    write(tmp_path / "env.py", PRINT_ENV)
    path = job_file(tmp_path, generic(["env.py"]), "setrep")
    result = cli("run", path, "--set", "spec.replicas=3")
    assert result.returncode == 0, result.stderr
    envs = env_lines(result.stdout.splitlines())
    assert sorted(e["KUBETRAIN_REPLICA_INDEX"] for e in envs) == ["0", "1", "2"]
    assert {e["KUBETRAIN_NUM_REPLICAS"] for e in envs} == {"3"}
    assert all(any(line.startswith(f"[worker-{i}]") for line in result.stdout.splitlines()) for i in range(3))


def test_quick_form_runs_a_program(tmp_path: Path) -> None:
    write(tmp_path / "env.py", PRINT_ENV)
    result = cli(
        "run", "--framework", "pytorch", "--replicas", "2", "--name", "quick", "--", "python", "env.py", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    envs = sorted(env_lines(result.stdout.splitlines()), key=lambda e: e["RANK"])
    assert [(e["RANK"], e["WORLD_SIZE"]) for e in envs] == [("0", "2"), ("1", "2")]
    assert envs[0]["KUBETRAIN_JOB"].startswith("quick-")
    assert status_of(envs[0]["KUBETRAIN_JOB"]).phase is JobPhase.SUCCEEDED


def test_quiet_run_prints_only_the_replicas_output(tmp_path: Path) -> None:
    write(tmp_path / "tick.py", TICK)
    path = job_file(tmp_path, generic(["tick.py", "1", "0"], replicas=1))
    result = cli("run", path, "-q")
    assert result.returncode == 0
    assert result.stdout == "[worker-0] tick 0 worker-0\n"
    assert result.stderr == "[worker-0] error-line from worker-0\n"


def test_dry_run_prints_the_plan_and_runs_nothing(tmp_path: Path) -> None:
    path = job_file(tmp_path, generic(["t.py"], replicas=2), "dry")
    result = cli("run", path, "--dry-run", "-o", "json")
    assert result.returncode == 0, result.stderr
    planned = json.loads(result.stdout)
    assert [r["processes"][0]["key"] for r in planned["replicas"]] == ["worker-0", "worker-1"]
    assert planned["replicas"][1]["processes"][0]["env"]["KUBETRAIN_REPLICA_INDEX"] == "1"
    assert yaml.safe_load(cli("run", path, "--dry-run").stdout)["name"] == "dry"
    assert cli("list", "-o", "name").stdout.split() == []


def test_list_names_of_no_jobs_is_empty() -> None:
    result = cli("list", "-o", "name")
    assert result.returncode == 0
    assert result.stdout == ""


def test_failed_run_exit_status_and_message(tmp_path: Path) -> None:
    write(tmp_path / "fail.py", EXIT_ON_INDEX)
    path = job_file(tmp_path, generic(["fail.py", "3", "0"]), "rc")
    result = cli("run", path)
    assert result.returncode == 1
    job_id = last_job_id()
    assert f"Job {job_id} failed: worker-0 exited with code 3" in result.stderr
    assert f"kubetrain logs {job_id}" in result.stderr
    no_traceback(result)


# -- list, status, describe: formats other programs read ------------------------------------------------


@pytest.fixture
def finished_jobs(tmp_path: Path) -> list[str]:
    """One failed job (with a failure summary) and one that succeeded."""
    write(tmp_path / "fail.py", EXIT_ON_INDEX)
    write(tmp_path / "tick.py", TICK)
    assert cli("run", job_file(tmp_path, generic(["fail.py", "3", "1"]), "bad", "bad.yaml")).returncode == 1
    assert cli("run", job_file(tmp_path, generic(["tick.py", "2", "0"]), "good", "good.yaml")).returncode == 0
    return cli("list", "-o", "name").stdout.split()


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_status_list_describe_round_trip(finished_jobs: list[str], fmt: str) -> None:
    load = json.loads if fmt == "json" else yaml.safe_load
    good, bad = finished_jobs  # newest first
    assert good.startswith("good-") and bad.startswith("bad-")
    for job_id in finished_jobs:
        result = cli("status", job_id, "-o", fmt)
        assert result.returncode == 0
        assert JobStatus.from_dict(load(result.stdout)) == status_of(job_id)

    listed = load(cli("list", "-o", fmt).stdout)
    assert [JobStatus.from_dict(item) for item in listed["items"]] == [status_of(j) for j in finished_jobs]

    described = load(cli("describe", bad, "-o", fmt).stdout)
    assert JobStatus.from_dict(described) == status_of(bad)
    assert described["firstFailure"]["exitCode"] == 3
    assert described["counts"]["worker"]["failed"] == 2
    spec = from_dict(described["spec"])  # the job as submitted: it can be loaded and run again
    assert spec.name == "bad" and spec.spec.replicas == 2


def test_list_table_and_wide(finished_jobs: list[str]) -> None:
    table = cli("list").stdout.splitlines()
    assert table[0].split() == ["NAME", "PHASE", "REPLICAS", "RESTARTS", "AGE"]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    good, bad = finished_jobs
    assert rows[good][1:4] == ["Succeeded", "2/2", "0"]
    assert rows[bad][1] == "Failed"
    wide = cli("list", "-o", "wide").stdout.splitlines()
    assert "REASON" in wide[0] and any("ReplicaFailed" in line for line in wide)
    assert cli("list", "--limit", "1", "-o", "name").stdout.split() == [good]


def test_status_and_describe_text(finished_jobs: list[str]) -> None:
    _good, bad = finished_jobs
    status = cli("status", bad)
    assert status.returncode == 0
    assert status.stdout.splitlines()[0].startswith(f"{bad} Failed (ReplicaFailed): worker-1 exited with code 3")
    assert "replica 1 exiting with code 3" in status.stdout
    described = cli("describe", bad).stdout
    for text in ("Phase:    Failed", "Replicas:", "Conditions:", "Counts:", "exit code 3"):
        assert text in described


def test_restarts_column_counts_each_group_restart_once(tmp_path: Path) -> None:
    write(tmp_path / "always.py", "import sys\nsys.exit(2)\n")
    path = job_file(tmp_path, generic(["always.py"], restartPolicy="OnFailure", runPolicy={"backoffLimit": 2}))
    assert cli("run", path).returncode == 1
    rows = cli("list").stdout.splitlines()
    assert rows[1].split()[1:4] == ["Failed", "0/2", "2"]
    assert "Restarts: 2/2" in cli("describe", last_job_id()).stdout


def test_describe_of_a_job_that_recovered_does_not_say_it_failed(tmp_path: Path) -> None:
    write(tmp_path / "once.py", FAIL_FIRST_ATTEMPT)
    spec = generic(["once.py", str(tmp_path / "marker"), "5"], restartPolicy="OnFailure", runPolicy={"backoffLimit": 1})
    assert cli("run", job_file(tmp_path, spec)).returncode == 0
    described = cli("describe", last_job_id()).stdout
    assert "Phase:    Succeeded" in described
    assert "restarted 1/1" in described  # the restart and why are still shown
    assert " failed: " not in described


def test_unknown_job_is_an_error_without_traceback() -> None:
    for verb in ("status", "describe", "logs", "cancel", "delete", "suspend", "resume", "attach"):
        result = cli(verb, "no-such-job")
        assert result.returncode == 1, (verb, result.stderr)
        assert "no job matches 'no-such-job'" in result.stderr
        no_traceback(result)


# -- logs -----------------------------------------------------------------------------------------------


@pytest.fixture
def ticked(tmp_path: Path) -> str:
    """A finished job: worker-0 and worker-1 each printed `tick 0..4 <key>` and then one stderr line."""
    write(tmp_path / "tick.py", TICK)
    assert cli("run", job_file(tmp_path, generic(["tick.py", "5", "0"]), "ticks"), "-q").returncode == 0
    return last_job_id()


def lines_of(result: Any) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line]


def test_logs_filters(ticked: str) -> None:
    finished = time.monotonic()
    everything = cli("logs", ticked)
    assert sorted(lines_of(everything)) == sorted(
        [f"[worker-{r}] tick {i} worker-{r}" for r in range(2) for i in range(5)]
    )
    assert sorted(everything.stderr.splitlines()) == [
        "[worker-0] error-line from worker-0",
        "[worker-1] error-line from worker-1",
    ]

    one = cli("logs", ticked, "--role", "worker", "--index", "1")
    assert lines_of(one) == [f"[worker-1] tick {i} worker-1" for i in range(5)]
    assert one.stderr == "[worker-1] error-line from worker-1\n"

    tail = cli("logs", ticked, "--role", "worker", "--index", "0", "--tail", "2")
    assert lines_of(tail) == ["[worker-0] tick 4 worker-0"]  # the last 2 records: this line and the stderr one
    assert tail.stderr == "[worker-0] error-line from worker-0\n"

    grep = cli("logs", ticked, "--grep", r"tick [34] ")
    assert sorted(lines_of(grep)) == sorted(f"[worker-{r}] tick {i} worker-{r}" for r in range(2) for i in (3, 4))

    plain = cli("logs", ticked, "--role", "worker", "--index", "0", "--no-prefix", "--grep", "tick 0")
    assert lines_of(plain) == ["tick 0 worker-0"]
    stamped = lines_of(cli("logs", ticked, "--timestamps", "--grep", "tick 0", "--role", "worker", "--index", "0"))
    assert len(stamped) == 1 and stamped[0].endswith(" tick 0 worker-0")
    assert datetime.fromisoformat(stamped[0].split()[1]).tzinfo is not None  # [worker-0] <ISO time> <line>

    assert len(lines_of(cli("logs", ticked, "--since", "1h"))) == 10
    while time.monotonic() - finished < 2.5:  # let every line become older than one second
        time.sleep(0.1)
    assert lines_of(cli("logs", ticked, "--since", "1s")) == []

    for args, code in ((["--index", "1"], 2), (["--since", "5x"], 2), (["--grep", "("], 2), (["--role", "ps"], 1)):
        result = cli("logs", ticked, *args)
        assert result.returncode == code, (args, result.stderr)
        no_traceback(result)


def test_logs_follow_ends_when_the_job_ends(tmp_path: Path) -> None:
    write(tmp_path / "tick.py", TICK)
    job_id, _sup = start_detached(
        from_dict(
            {
                "apiVersion": "kubetrain.dev/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": "follow"},
                "spec": generic(["tick.py", "6", "0.2"]),
            }
        ),
        tmp_path,
    )
    follower = spawn_cli("logs", job_id, "-f")
    out, err = follower.communicate(timeout=60)  # returns by itself once the job has ended
    assert follower.returncode == 0, err
    assert sorted(out.splitlines()) == sorted(f"[worker-{r}] tick {i} worker-{r}" for r in range(2) for i in range(6))
    assert status_of(job_id).phase is JobPhase.SUCCEEDED

    again = cli("logs", job_id, "-f", "--role", "worker", "--index", "1", "--tail", "1")  # already ended
    assert again.returncode == 0
    assert again.stderr == "[worker-1] error-line from worker-1\n"


def test_logs_follow_ends_when_the_job_is_cancelled(tmp_path: Path) -> None:
    write(tmp_path / "tick.py", TICK)
    job_id, _sup = start_detached(
        from_dict(
            {
                "apiVersion": "kubetrain.dev/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": "follow"},
                "spec": generic(["tick.py", "100000", "0.05"], replicas=1),
            }
        ),
        tmp_path,
    )
    wait_phase(job_id, JobPhase.RUNNING)
    follower = spawn_cli("logs", job_id, "-f")
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline().startswith("[worker-0] tick ")
        assert cli("cancel", job_id).returncode == 0
        out, _err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == 0
    assert all(line.startswith("[worker-0] tick ") for line in out.splitlines())
