"""`kubetrain ui` as a person runs it: the address it prints holds the token after `#` (required on loopback
too), a token kept across restarts comes from a file or the environment and is checked, a taken port is an
error before any address is announced, and Ctrl-C ends it quietly with status 130 while pages hold their
event streams open."""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain.ui.security import MIN_TOKEN_LENGTH
from tests.ui.helpers import Events, ending, free_port, request, start_ui, token_of, ui_process

KEPT = "kept-across-restarts_" + "k" * 24
"""A token a user keeps (a good one: 45 characters of the URL-safe alphabet)."""


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, str]]:
    """A `kubetrain ui` process, its port, and the token of the address it printed."""
    with ui_process(tmp_path) as started:
        yield started


def test_loopback_requires_the_printed_token(running: tuple[subprocess.Popen[str], int, str]) -> None:
    """Other users of the machine reach 127.0.0.1 too: without the token the page (env values, cancel) is
    refused; with the address as printed, it opens."""
    _proc, port, token = running
    url = f"http://127.0.0.1:{port}"
    assert len(token) >= MIN_TOKEN_LENGTH
    assert request(url + "/api/jobs", auth=False).status == 401
    assert request(url + "/api/jobs", headers={"Authorization": "Bearer not-it"}).status == 401
    assert request(url + "/api/jobs", headers={"Authorization": f"Bearer {token}"}).status == 200


def kept_token(proc: subprocess.Popen[str], port: int) -> str:
    """The token of the address `proc` printed, checked to open the page."""
    assert proc.stdout is not None
    token = token_of(proc.stdout.readline())
    assert request(f"http://127.0.0.1:{port}/api/jobs", headers={"Authorization": f"Bearer {token}"}).status == 200
    return token


def test_a_kept_token_comes_from_the_environment(tmp_path: Path) -> None:
    port = free_port()
    with ending(start_ui(port, tmp_path, env={"KUBETRAIN_UI_TOKEN": KEPT})) as proc:
        assert kept_token(proc, port) == KEPT


def test_a_kept_token_comes_from_a_file_before_the_environment(tmp_path: Path) -> None:
    """The flag wins over the environment, as flags do; a file other users can read is said with a warning."""
    path = tmp_path / "token"
    path.write_text("from-the-file_" + "f" * 30 + "\n")
    path.chmod(0o600)
    port = free_port()
    with ending(start_ui(port, tmp_path, "--token-file", str(path), env={"KUBETRAIN_UI_TOKEN": KEPT})) as proc:
        assert kept_token(proc, port) == "from-the-file_" + "f" * 30
        proc.terminate()
        _out, err = proc.communicate(timeout=30)
    assert "warning" not in err, err
    path.chmod(0o644)
    port = free_port()
    with ending(start_ui(port, tmp_path, "--token-file", str(path))) as proc:
        assert kept_token(proc, port) == "from-the-file_" + "f" * 30
        assert proc.stderr is not None
        assert proc.stderr.readline().strip() == (
            f"warning: {path} may be read by other users of this machine (mode 644), and the token in it opens "
            f"the page: chmod 600 {path}"
        )


def test_a_token_on_the_command_line_works_with_a_warning(tmp_path: Path) -> None:
    port = free_port()
    with ending(start_ui(port, tmp_path, "--token", KEPT)) as proc:
        assert kept_token(proc, port) == KEPT
        assert proc.stderr is not None
        warning = proc.stderr.readline()
        assert warning.startswith("warning: --token is visible to every user of this machine in the process list")
        assert "--token-file PATH or $KUBETRAIN_UI_TOKEN" in warning and KEPT not in warning


MAKE_ONE = "make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--token", "x"], {}, f"--token: a token needs at least 32 characters (this one has 1): {MAKE_ONE}"),
        (
            ["--token", "a b" + "c" * 40],
            {},
            "--token: character 2 is a space; a token takes only A-Z, a-z, 0-9, '-' and '_' (it goes in the "
            f"address unencoded): {MAKE_ONE}",
        ),
        (
            [],
            {"KUBETRAIN_UI_TOKEN": "é" * 40},
            "$KUBETRAIN_UI_TOKEN: character 1 is 'é'; a token takes only A-Z, a-z, 0-9, '-' and '_' (it goes in "
            f"the address unencoded): {MAKE_ONE}",
        ),
        (["--token-file", "{tmp}/none"], {}, "--token-file {tmp}/none: no such file; write a token into it first"),
        (["--token-file", "{tmp}/empty"], {}, "--token-file {tmp}/empty: the file's first line is empty"),
        (["--token-file", "{tmp}/empty", "--token", KEPT], {}, "give the token once: --token-file or --token, not"),
    ],
)
def test_a_bad_token_is_refused_saying_what_is_wrong(
    tmp_path: Path, args: list[str], env: dict[str, str], said: str
) -> None:
    (tmp_path / "empty").write_text("\n")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = start_ui(free_port(), tmp_path, *args, env=env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert out == ""  # no address announced
    error = err.strip().splitlines()[-1]
    assert error.startswith("error: " + said.replace("{tmp}", str(tmp_path))), error
    assert "Traceback" not in err


def test_a_taken_port_is_an_error_and_no_address_is_announced(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = start_ui(port, tmp_path)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert out == ""  # no "serving ... at" for a server that never served
    assert err.strip() == (
        f"error: port {port} on 127.0.0.1 is in use (another kubetrain ui?): give another with --port, "
        "or open the one already running"
    )


def test_ctrl_c_ends_quietly_with_status_130(running: tuple[subprocess.Popen[str], int, str]) -> None:
    """With a jobs table and a job-less page streaming, Ctrl-C ends the server at once: status 130 as any
    interrupted command, and no traceback."""
    proc, port, token = running
    headers = {"Authorization": f"Bearer {token}"}
    with Events(f"http://127.0.0.1:{port}/events", headers=headers) as table:
        assert next(iter(table))[0] == "jobs"  # the stream is open and live
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "CancelledError" not in err, err


def test_another_address_is_served_with_a_warning_that_http_is_unencrypted(tmp_path: Path) -> None:
    with ending(start_ui(free_port(), tmp_path, "--host", "0.0.0.0")) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert "/#token=" in proc.stdout.readline()
        warning = proc.stderr.readline()
        assert warning.startswith("warning: serving on 0.0.0.0: the token and the pages travel unencrypted"), warning
