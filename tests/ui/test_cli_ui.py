"""`kubetrain ui` as a person runs it: the address it prints holds the token (required on loopback too),
a taken port is an error before any address is announced, and Ctrl-C ends it quietly with status 130
while pages hold their event streams open."""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ui.helpers import Events, ending, free_port, request, start_ui, ui_process


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
    assert request(url + "/api/jobs", auth=False).status == 403
    assert request(url + "/api/jobs", headers={"Authorization": "Bearer not-it"}).status == 403
    first = request(f"{url}/?token={token}", auth=False)
    assert first.status == 303 and first.headers["location"] == "/"
    cookie = first.headers["set-cookie"].split(";", 1)[0]
    assert request(url + "/", headers={"Cookie": cookie}, auth=False).status == 200


def test_a_fixed_token_is_taken_from_the_environment(tmp_path: Path) -> None:
    port = free_port()
    with ending(start_ui(port, tmp_path, env={"KUBETRAIN_UI_TOKEN": "kept-across-restarts"})) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip().endswith("/?token=kept-across-restarts")
        headers = {"Authorization": "Bearer kept-across-restarts"}
        assert request(f"http://127.0.0.1:{port}/api/jobs", headers=headers).status == 200


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
        assert "/?token=" in proc.stdout.readline()
        warning = proc.stderr.readline()
        assert warning.startswith("warning: serving on 0.0.0.0: the token and the pages travel unencrypted"), warning
