"""What idle connections do to the web view: a stranger (no token needed) opens many TCP connections to
`kubetrain ui` and sends nothing; does a real client still get `/api/jobs`, and what does it cost?

    .venv/bin/python benchmarks/ui_idle_connections.py [--connections 1100] [--nofile 1024] [--hold 20]

`kubetrain ui` runs as a process of its own with the open-file limit at `--nofile` (soft and hard, as
`ulimit -n 1024` sets them), its settings otherwise the defaults, over an empty job store. The benchmark
opens `--connections` connections that send nothing, then asks for `/api/jobs` as a script does (bearer
token, a 60 s socket timeout), and after `--hold` seconds reports: the answer and its time, how many of the
idle connections the server has closed, its RSS and how much it wrote to stderr.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.ui.helpers import TOKEN, free_port, request  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def closed_count(conns: list[socket.socket]) -> int:
    """How many of `conns` the server has closed (a read returns end of file, or the connection was reset)."""
    closed = 0
    for conn in conns:
        try:
            if conn.recv(65536, socket.MSG_PEEK) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return closed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--connections", type=int, default=1100)
    parser.add_argument("--nofile", type=int, default=1024, help="the server's open-file limit (soft and hard)")
    parser.add_argument("--hold", type=float, default=20.0, help="seconds the idle connections are held")
    args = parser.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < args.connections + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, args.connections + 256), hard))

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))

    scratch = Path(tempfile.mkdtemp(prefix="kubetrain-bench-idle-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    stderr_path = scratch / "stderr"
    with stderr_path.open("wb") as stderr:
        server = subprocess.Popen(
            [sys.executable, "-m", "kubetrain.cli.main", "ui", "--port", str(port)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**os.environ, "KUBETRAIN_HOME": str(scratch / "home"), "KUBETRAIN_UI_TOKEN": TOKEN},
            preexec_fn=limit_files,
        )
    conns: list[socket.socket] = []
    try:
        assert server.stdout is not None
        server.stdout.readline()  # the address: the port is bound
        assert request(url + "/api/jobs").status == 200
        idle_rss = rss_mb(server.pid)
        started = time.monotonic()
        failed = 0
        for _ in range(args.connections):
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=5)
                conn.setblocking(False)  # `closed_count` peeks without waiting
                conns.append(conn)
            except OSError:  # the server's queue full (it does not accept): counted
                failed += 1
        opened = time.monotonic() - started
        t = time.perf_counter()
        try:
            reply = request(url + "/api/jobs")
            answer = f"{reply.status} in {(time.perf_counter() - t) * 1000:.0f} ms"
        except OSError as exc:
            answer = f"no answer after {time.perf_counter() - t:.1f} s ({exc.__class__.__name__}: {exc})"
        rss_with = rss_mb(server.pid)
        deadline = started + args.hold
        closed_at: float | None = None
        while time.monotonic() < deadline:
            if closed_at is None and closed_count(conns) == len(conns):
                closed_at = time.monotonic() - started
            time.sleep(0.5)
        closed = closed_count(conns)
        t = time.perf_counter()
        try:
            after = request(url + "/api/jobs")
            answer_after = f"{after.status} in {(time.perf_counter() - t) * 1000:.0f} ms"
        except OSError as exc:
            answer_after = f"no answer ({exc.__class__.__name__})"
        rss_end = rss_mb(server.pid)
    finally:
        for conn in conns:
            conn.close()
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(30)
    err = stderr_path.read_bytes()
    shutil.rmtree(scratch, ignore_errors=True)
    rows = [
        ("server's open-file limit", f"{args.nofile}"),
        (f"idle connections opened (in {opened:.1f} s)", f"{len(conns)}" + (f" ({failed} failed)" if failed else "")),
        ("GET /api/jobs with them open", answer),
        (f"idle connections closed by the server after {args.hold:.0f} s", f"{closed} of {len(conns)}"),
        ("  all of them closed after", "-" if closed_at is None else f"{closed_at:.1f} s"),
        ("GET /api/jobs after", answer_after),
        ("server RSS: idle / with the connections / at the end", f"{idle_rss:.0f} / {rss_with:.0f} / {rss_end:.0f} MB"),
        ("server stderr", f"{len(err):,} bytes, {err.count(b'Traceback'):,} tracebacks"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    first = err.decode(errors="replace").strip().splitlines()[:3]
    if first:
        print("stderr begins:", *first, sep="\n  ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
