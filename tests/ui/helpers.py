"""Helpers of the web view's tests: a real server on a thread, HTTP and server-sent events over sockets,
and local jobs whose replicas wait on FIFOs (so a test moves them on by an event, never by a sleep)."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import resource
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.jobspec import from_dict

XSS = "<script>alert(1)</script>"
TOKEN = "the-token-of-the-web-views-tests_0123456789"
"""The token the tests' servers are started with; `request` and `Events` present it unless told otherwise."""
AUTH = {"Authorization": f"Bearer {TOKEN}"}

# A replica: says the XSS line, then per gate five steps (a line and a metric each) and waits on the gate
# (a FIFO of its own: opening it blocks until the test opens it for writing).
TRAIN = """
import os, sys
import kubetrain.metrics as m
i = int(os.environ["KUBETRAIN_REPLICA_INDEX"])
print("<script>alert(1)</script>", flush=True)
for g, gate in enumerate(sys.argv[1:]):
    for step in range(g * 5, g * 5 + 5):
        m.log(step=step, loss=1.0 / (step + 1) + i * 0.1)
        print(f"replica {i} step {step}", flush=True)
    open(f"{gate}-{i}").read()
"""


@dataclass
class Gated:
    """A local 2-replica job created paused, its replicas held at FIFO gates."""

    job_id: str
    gates: list[Path]
    replicas: int

    def open_gate(self, n: int) -> None:
        """Let every replica past gate `n`: each FIFO's open returns once its replica waits there."""
        for i in range(self.replicas):
            fd = os.open(f"{self.gates[n]}-{i}", os.O_WRONLY)
            os.close(fd)


def gated_job(backend: LocalBackend, tmp: Path, *, gates: int = 2, name: str = "train", replicas: int = 2) -> Gated:
    script = tmp / "train.py"
    script.write_text(TRAIN)
    paths = []
    for n in range(gates):
        p = tmp / f"gate{n}"
        for i in range(replicas):
            os.mkfifo(f"{p}-{i}")
        paths.append(p)
    doc = {
        "apiVersion": "kubetrain.dev/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "framework": "generic",
            "replicas": replicas,
            "runMode": "Pause",
            "run": {"exec": [sys.executable, str(script), *map(str, paths)]},
        },
    }
    result = backend.run(from_dict(doc), detach=True)
    return Gated(result.job_id, paths, replicas)


def release(gated: Gated) -> None:
    """Open every gate not yet opened by a replica's reader (ends the replicas of a cancelled test too)."""
    for gate in gated.gates:
        for i in range(gated.replicas):
            try:
                fd = os.open(f"{gate}-{i}", os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader (yet, or any more)
                continue
            os.close(fd)


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: str

    def json(self) -> Any:
        return json.loads(self.body)


def request(
    url: str,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    *,
    auth: bool = True,
) -> Reply:
    """One HTTP request, with the tests' token as a bearer header unless `auth=False`."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    try:
        sent = {**(AUTH if auth else {}), **(headers or {})}
        conn.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), body=body, headers=sent)
        resp = conn.getresponse()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read().decode())
    finally:
        conn.close()


class Events:
    """A server-sent event stream, read event by event (a generous socket timeout guards a hung test)."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
        sent = {**AUTH, **(headers or {})}
        self.conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""), headers=sent)
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.read()
        assert self.resp.getheader("content-type", "").startswith("text/event-stream")

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        event, data = "message", list[str]()
        while True:
            line = self.resp.readline()
            if not line:
                return
            text = line.decode().rstrip("\n")
            if text == "":
                if data:
                    yield event, json.loads("\n".join(data))
                event, data = "message", []
            elif text.startswith("event: "):
                event = text[7:]
            elif text.startswith("data: "):
                data.append(text[6:])

    def until(self, wanted: str, test: Any = lambda data: True) -> Any:
        """The data of the first `wanted` event that passes `test`."""
        for event, data in self:
            if event == wanted and test(data):
                return data
        raise AssertionError(f"the stream ended before a {wanted} event")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Events:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def lines_of(events: Sequence[tuple[str, Any]]) -> list[tuple[str, str]]:
    return [(key, text) for event, data in events if event == "lines" for key, _s, text, *_ in data]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_ui(
    port: int,
    home: Path,
    *args: str,
    env: dict[str, str] | None = None,
    open_files: int | None = None,
    memory: int | None = None,
) -> subprocess.Popen[str]:
    """`kubetrain ui --port PORT ARGS` as a process of its own over the job store in `home` (a fresh token
    unless `env` gives KUBETRAIN_UI_TOKEN), its output piped; with `open_files`, its open-file limit (soft
    and hard, as `ulimit -n` sets them); with `memory`, its address space in bytes (`ulimit -v`), so a
    server that would take gigabytes fails instead of taking them from the machine."""
    full = {**os.environ, "KUBETRAIN_HOME": str(home)}
    full.pop("KUBETRAIN_UI_TOKEN", None)

    def limit() -> None:
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.Popen(
        [sys.executable, "-m", "kubetrain.cli.main", "ui", "--port", str(port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**full, **(env or {})},
        preexec_fn=limit,
    )


@contextlib.contextmanager
def ending(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """`proc`, killed at the end of the block if it still runs."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


@contextlib.contextmanager
def ui_process(
    home: Path, *args: str, memory: int | None = None
) -> Iterator[tuple[subprocess.Popen[str], int, str]]:
    """`kubetrain ui ARGS` on 127.0.0.1 over `home`'s jobs: the process, its port, and the token of the
    address it printed (once the port is bound)."""
    port = free_port()
    with ending(start_ui(port, home, *args, memory=memory)) as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("kubetrain ui: serving local jobs at http://127.0.0.1:"), first
        yield proc, port, token_of(first)


def token_of(line: str) -> str:
    """The token of the address in kubetrain ui's first line (`... at http://HOST:PORT/#token=TOKEN`)."""
    address = urlsplit(line.split(" at ", 1)[1].strip())
    assert address.path == "/" and not address.query, line
    [token] = parse_qs(address.fragment)["token"]
    return token
