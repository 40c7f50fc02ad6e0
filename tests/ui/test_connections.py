"""Connections anyone can open (no token needed) cannot lock the web view: idle ones are closed after the
idle timeout (also when they trickle their bytes), at most a cap of them is held (the longest idle one goes
to let a new one in; a new one is answered 503 when every one is busy), the open-file limit is never
reached by connections, and none of it floods the server's stderr.

Real `kubetrain ui` processes and servers on threads, real sockets. Every wait is for a condition (with a
generous bound for a hung test), never a sleep."""

from __future__ import annotations

import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.ui.connections import ConnectionLimits, connection_cap
from kubetrain.ui.server import Background
from tests.support.helpers import no_process_left_behind, wait_for  # noqa: F401 (an autouse fixture)
from tests.ui.helpers import TOKEN, Events, ending, free_port, gated_job, release, request, start_ui, ui_process

CAP = 20
IDLE = 2.0


def closed_by_server(sock: socket.socket) -> bool:
    """The server has closed `sock` (end of file or reset), looked at without waiting."""
    sock.setblocking(False)
    try:
        return sock.recv(65536, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def keep_alive_request(port: int, token: str) -> socket.socket:
    """A socket that has made one request (answered 200) and stays open, as a browser keeps it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(f"GET /api/jobs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += sock.recv(65536)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    [length] = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
    while len(body) < length:
        body += sock.recv(65536)
    return sock


@pytest.fixture
def capped(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, str]]:
    with ui_process(tmp_path, "--max-connections", str(CAP), "--idle-timeout", str(IDLE)) as started:
        yield started


def test_idle_connections_beyond_the_cap_keep_no_client_out_and_are_closed(
    capped: tuple[subprocess.Popen[str], int, str],
) -> None:
    proc, port, token = capped
    url = f"http://127.0.0.1:{port}"
    idle = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(3 * CAP)]
    try:
        # A real client is answered while three times the cap of idle connections were opened before it.
        reply = request(url + "/api/jobs", headers={"Authorization": f"Bearer {token}"})
        assert reply.status == 200 and reply.json() == {"jobs": [], "errors": []}
        kept = keep_alive_request(port, token)
        idle.append(kept)
        # Every idle one is closed: over the cap at once, the rest after the idle timeout; and the keep-alive
        # connection once it has idled that long after its response.
        wait_for("the server closing every idle connection", lambda: all(closed_by_server(s) for s in idle))
        assert request(url + "/api/jobs", headers={"Authorization": f"Bearer {token}"}).status == 200
        assert proc.poll() is None
    finally:
        for sock in idle:
            sock.close()
    proc.terminate()
    _out, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err
    assert len(err) < 1000, err  # a note or two, not a line per connection
    assert f"kubetrain ui: {CAP} connections at once (--max-connections): closed the longest idle one" in err


def test_a_request_head_trickled_byte_by_byte_is_closed(local: LocalBackend) -> None:
    """A byte now and then does not keep a connection that never completes its request (slowloris)."""
    with Background([local], token=TOKEN, limits=ConnectionLimits(idle_timeout=1.0)) as bg:
        sock = socket.create_connection(("127.0.0.1", bg.port), timeout=60)
        try:
            sock.sendall(b"GET /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")

            def trickled_until_closed() -> bool:
                readable, _, _ = select.select([sock], [], [], 0.1)  # a byte every tenth of a second
                if readable:
                    return closed_by_server(sock)
                try:
                    sock.send(b"a")
                except OSError:  # closed: the send was refused
                    return True
                return False

            wait_for("the server closing the trickling connection", trickled_until_closed, interval=0)
            # Meanwhile, and after it, a whole request is answered.
            assert request(bg.url + "/api/jobs").status == 200
        finally:
            sock.close()


def test_a_stream_outlives_the_idle_timeout(local: LocalBackend, tmp_path: Path) -> None:
    """The timeout is for a request's head: an event stream (a response that lasts) goes on past it."""
    with (
        Background([local], token=TOKEN, limits=ConnectionLimits(idle_timeout=1.0)) as bg,
        Events(bg.url + "/events") as events,
    ):
        assert events.until("jobs")["upsert"] == []
        quiet = socket.create_connection(("127.0.0.1", bg.port), timeout=60)
        try:  # the idle timeout has passed once a connection opened after the stream's is closed
            wait_for("an idle connection closed", lambda: closed_by_server(quiet))
        finally:
            quiet.close()
        job = gated_job(local, tmp_path, gates=1)
        try:
            added = events.until("jobs", lambda d: d["order"] is not None)
            assert added["order"] == [f"local/{job.job_id}"]
        finally:
            release(job)


def test_a_connection_over_a_cap_of_busy_ones_is_answered_503(local: LocalBackend) -> None:
    with Background([local], token=TOKEN, limits=ConnectionLimits(max_connections=3)) as bg:
        streams = [Events(bg.url + "/events") for _ in range(3)]
        try:
            for stream in streams:
                assert next(iter(stream))[0] == "jobs"  # each holds its connection, busy
            refused = socket.create_connection(("127.0.0.1", bg.port), timeout=60)
            reply = b""
            while chunk := refused.recv(65536):
                reply += chunk
            refused.close()
            assert reply.startswith(b"HTTP/1.1 503 Service Unavailable\r\n"), reply
            assert reply.endswith(b"\r\n\r\nkubetrain ui: too many connections at once; try again later\n")
            streams.pop().close()
            # Once the server has seen that stream go, there is room again.
            wait_for("a request answered", lambda: request(bg.url + "/api/jobs").status == 200)
        finally:
            for stream in streams:
                stream.close()


OUT_OF_FILES = """
import errno, os, resource, socket, sys
from kubetrain.ui.connections import Listener

listener = Listener(socket.AF_INET)
listener.bind(("127.0.0.1", 0))
listener.listen()
listener.setblocking(False)
clients = [socket.create_connection(listener.getsockname(), timeout=30) for _ in range(3)]
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
filler = []
try:
    while True:
        filler.append(os.open(os.devnull, os.O_RDONLY))
except OSError as exc:
    assert exc.errno == errno.EMFILE
for _ in range(2):  # as asyncio does, again and again while the listening socket is readable
    try:
        listener.accept()
    except BlockingIOError:
        pass
    else:
        raise AssertionError("accepted without a file")
print("closed:", [client.recv(1) for client in clients])  # b'': each was closed at once, not left waiting
for fd in filler:
    os.close(fd)
late = socket.create_connection(listener.getsockname(), timeout=30)
conn, _ = listener.accept()  # with files again, connections are accepted as usual
print("accepted:", conn.fileno() > 0)
"""


def test_out_of_files_the_waiting_connections_are_closed_and_said_once() -> None:
    """If the process runs out of open files anyway (many logs followed), `accept()` closes the waiting
    connections at once and says so in one line, instead of asyncio's traceback per attempt."""
    done = subprocess.run([sys.executable, "-c", OUT_OF_FILES], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["closed: [b'', b'', b'']", "accepted: True"]
    [note] = done.stderr.splitlines()
    assert note.startswith("kubetrain ui: out of open files: closed 3 new connection(s) at once"), note


def test_the_cap_stays_below_the_open_file_limit(tmp_path: Path) -> None:
    """With `ulimit -n 1024` (soft and hard: nothing to raise), a cap asked above what the limit leaves room
    for is lowered, and said."""
    assert connection_cap(1024) == 384
    port = free_port()
    with ending(start_ui(port, tmp_path, "--max-connections", "5000", open_files=1024)) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().startswith("kubetrain ui: serving local jobs at ")
        assert proc.stderr.readline().strip() == (
            "warning: --max-connections 5000 leaves too few of the 1024 files this process may open (ulimit -n) "
            "for the logs and the store: at most 384 connections at once"
        )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--max-connections", "0"], "error: --max-connections 0: give a number from 1"),
        (["--idle-timeout", "0"], "error: --idle-timeout 0: give seconds above 0 and below a day"),
    ],
)
def test_limits_are_checked(tmp_path: Path, args: list[str], said: str) -> None:
    proc = start_ui(free_port(), tmp_path, *args)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err.strip()) == (2, "", said)
