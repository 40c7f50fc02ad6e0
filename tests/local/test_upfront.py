"""A local job whose program cannot run is refused before a job record exists, with the field path: in
`run`, in a dry run and in `resume`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubetrain.status import JobPhase
from tests.support.helpers import cli, generic, job_file, no_traceback, status_of, write

pytestmark = pytest.mark.timeout(120)


def no_jobs() -> None:
    listed = cli("list", "-o", "name")
    assert listed.returncode == 0 and listed.stdout.split() == [], listed.stdout


def refused(path: Path, *expected: str, cwd: Path | None = None) -> None:
    """`run` and `run --dry-run` both refuse `path` (exit 2) with every `expected` text, and record nothing."""
    for args in (("run", path), ("run", "--dry-run", path)):
        result = cli(*args, cwd=cwd)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        no_traceback(result)
        for text in expected:
            assert text in result.stderr, (args, result.stderr)
    no_jobs()


ELF = b"\x7fELF\x02\x01\x01\x00" + bytes(56)


def test_a_script_resolves_against_working_dir(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_bytes(ELF)
    write(tmp_path / "train.py", "print('not this one')\n")
    path = job_file(tmp_path, generic(["train.py"], replicas=1, workingDir="src"))
    refused(path, "spec.run.python[0]:", f"{tmp_path / 'src' / 'train.py'} is an ELF executable, not Python source")


def test_a_role_script_is_refused_at_the_role_path(tmp_path: Path) -> None:
    write(tmp_path / "ok.py", "print('ok')\n")
    (tmp_path / "tool").write_bytes(ELF)
    spec: dict[str, Any] = {
        "framework": "generic",
        "run": {"python": ["ok.py"]},
        "roles": {"worker": {"replicas": 1}, "helper": {"replicas": 1, "run": {"python": ["tool"]}}},
    }
    refused(job_file(tmp_path, spec), "spec.roles.helper.run.python[0]:", "is an ELF executable")


def test_a_binary_given_to_python_is_refused(tmp_path: Path) -> None:
    prog = tmp_path / "prog"
    shutil.copy(sys.executable if os.path.getsize(sys.executable) > 0 else "/bin/true", prog)
    path = job_file(tmp_path, generic(["prog", "--fast"], replicas=1))
    refused(path, "spec.run.python[0]:", "is an ELF executable, not Python source", "exec: [prog, ...]")


def test_a_folder_without_main_is_refused_and_one_with_main_runs(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    path = job_file(tmp_path, generic(["pkg"], replicas=1))
    refused(path, "spec.run.python[0]:", "is a folder without __main__.py")
    write(tmp_path / "pkg" / "__main__.py", "print('from main', flush=True)\n")
    result = cli("run", path)
    assert result.returncode == 0, result.stderr
    assert "from main" in result.stdout


def test_python_source_zip_apps_and_options_still_run(tmp_path: Path) -> None:
    write(tmp_path / "plain.py", "print('plain', flush=True)\n")
    assert cli("run", job_file(tmp_path, generic(["plain.py"], replicas=1))).returncode == 0
    inline = job_file(tmp_path, generic(["-c", "print('inline')"], replicas=1), file="inline.yaml")
    assert cli("run", "--dry-run", inline).returncode == 0


def test_python_dash_m_with_no_module_is_refused(tmp_path: Path) -> None:
    result = cli("run", "--", "python", "-m", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    no_traceback(result)
    assert "spec.run.python: `python -m` names no module after -m" in result.stderr
    dry = cli("run", "--dry-run", "--", "python3", "-m", cwd=tmp_path)
    assert dry.returncode == 2 and "names no module after -m" in dry.stderr
    in_exec = job_file(tmp_path, {"replicas": 1, "run": {"exec": ["/usr/bin/python3", "-u", "-m"]}})
    refused(in_exec, "spec.run.exec: `/usr/bin/python3 -u -m` names no module after -m")


def test_an_env_name_no_shell_can_hold_runs_with_a_warning(tmp_path: Path) -> None:
    """Kubernetes takes `my.var` and an exec'd program gets it; only a shell cannot export it: a warning."""
    write(tmp_path / "show.py", "import os; print('got', os.environ['my.var'], flush=True)\n")
    path = job_file(tmp_path, generic(["show.py"], replicas=1, env={"my.var": "x", "GOOD": "y"}))
    result = cli("run", path)
    assert result.returncode == 0, result.stderr
    assert "got x" in result.stdout
    assert "spec.env[0].name: 'my.var' is not a shell variable name" in result.stderr
    assert "GOOD" not in result.stderr


def test_attach_print_emits_only_what_a_shell_can_run(tmp_path: Path) -> None:
    """`attach --print` is pasted into a shell: a name like `my.var` must not become `export my.var=x`."""
    write(tmp_path / "show.py", "print('hi')\n")
    path = job_file(tmp_path, generic(["show.py"], replicas=1, env={"my.var": "x y", "GOOD": "y"}))
    assert cli("run", path).returncode == 0
    job_id = cli("list", "-o", "name").stdout.split()[0]
    printed = cli("attach", job_id, "--print")
    assert printed.returncode == 0, printed.stderr
    assert "export my.var" not in printed.stdout and "export GOOD=y" in printed.stdout
    assert "env 'my.var=x y'" in printed.stdout
    check = subprocess.run(["sh", "-n"], input=printed.stdout, text=True, capture_output=True)
    assert check.returncode == 0, check.stderr  # the whole script parses


def test_resume_refuses_a_script_replaced_by_a_binary_while_suspended(tmp_path: Path) -> None:
    script = write(tmp_path / "train.py", "print('ok')\n")
    path = job_file(tmp_path, generic(["train.py"], replicas=1, runMode="Pause"))
    created = cli("run", path)
    assert created.returncode == 0, created.stderr
    job_id = cli("list", "-o", "name").stdout.split()[0]
    script.write_bytes(ELF)
    resumed = cli("resume", job_id)
    assert resumed.returncode != 0, resumed.stderr
    no_traceback(resumed)
    assert "spec.run.python[0]:" in resumed.stderr and "is an ELF executable" in resumed.stderr
    assert status_of(job_id).phase is JobPhase.SUSPENDED


def test_a_missing_script_is_left_to_python(tmp_path: Path) -> None:
    """Not refused up front (dry runs plan jobs whose scripts are not written yet): the replica fails with
    Python's own message."""
    path = job_file(tmp_path, generic(["missing.py"], replicas=1))
    assert cli("run", "--dry-run", path).returncode == 0
