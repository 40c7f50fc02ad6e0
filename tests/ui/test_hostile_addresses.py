"""Addresses a stranger writes: no redirect built from them, a request that is not HTTP answered 400 without
a line in the server's log per request, and an action's address names a job by its whole id only."""

from __future__ import annotations

import socket
from pathlib import Path

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.status import JobPhase
from kubetrain.ui.server import Background
from tests.support.helpers import no_process_left_behind  # noqa: F401 (an autouse fixture)
from tests.ui.helpers import TOKEN, ending, free_port, gated_job, release, request, start_ui

STEERING = [
    "/content/",
    "//evil.example/x/?token=abc",
    "/\\evil.example/",
    "/%5Cevil.example/",
    "/jobs/local/x%0d%0aSet-Cookie:%20a=b/",
    "/jobs/local/x/detail.json/",
]


def test_no_address_is_answered_with_a_redirect(server: Background) -> None:
    """A redirect's address was built from the request's (Starlette's trailing-slash redirect): none now,
    token or not; the addresses the pages make have no trailing slash."""
    for path in STEERING:
        for auth in (True, False):
            reply = request(server.url + path, auth=auth)
            assert not 300 <= reply.status < 400, (path, reply.status, reply.headers.get("location"))
            assert "location" not in reply.headers, path
    assert request(server.url + "/content").status == 200


def raw(port: int, head: bytes) -> bytes:
    """What the server answers to `head` sent as it is (a client that writes its own bytes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(head)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def test_a_cr_or_lf_in_the_address_is_a_400_and_one_note(tmp_path: Path) -> None:
    port = free_port()
    with ending(start_ui(port, tmp_path / "home", env={"KUBETRAIN_UI_TOKEN": TOKEN})) as proc:
        assert proc.stdout is not None
        proc.stdout.readline()  # the address: the port is bound
        host = f"Host: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode()
        for head in (b"GET /jobs/local/x\r\n/ HTTP/1.1\r\n", b"GET /a\rb HTTP/1.1\r\n", b"GET /\nx HTTP/1.1\r\n") * 5:
            answer = raw(port, head + host)
            assert answer.startswith(b"HTTP/1.1 400 "), answer[:80]
        assert request(f"http://127.0.0.1:{port}/api/jobs").status == 200  # the server goes on
        proc.terminate()
        _out, err = proc.communicate(timeout=30)
    assert "Invalid HTTP request" not in err and "Traceback" not in err, err
    notes = [line for line in err.splitlines() if "not valid HTTP/1.1" in line]
    assert len(notes) == 1, err  # 15 requests: one note (at most one per 10 s), not a line each


def test_an_action_takes_a_whole_id_only(server: Background, local: LocalBackend, tmp_path: Path) -> None:
    """`POST /jobs/local/<prefix>/cancel` cancelled the one job beginning so: the address of an action is
    what a page showed, never a guess. The CLI, typed by a person, still takes a unique prefix."""
    job = gated_job(local, tmp_path, gates=1, name="xss-g")
    try:
        prefix = job.job_id[:-2]
        for action in ("cancel", "suspend", "resume", "delete"):
            reply = request(f"{server.url}/jobs/local/{prefix}/{action}", "POST")
            assert reply.status == 404, (action, reply.body)
            error = reply.json()["error"]
            assert f"no job {prefix!r}" in error and "whole id" in error and job.job_id in error
        assert local.status(job.job_id).phase is JobPhase.SUSPENDED  # paused at creation, untouched
        whole = request(f"{server.url}/jobs/local/{job.job_id}/cancel", "POST")
        assert whole.status == 200 and whole.json()["phase"] == "Cancelled"
    finally:
        release(job)
