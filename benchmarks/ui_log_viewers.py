"""Many viewers of one big log: does the web view's memory grow with them, and does it still answer?

    .venv/bin/python benchmarks/ui_log_viewers.py [--lines 1000000] [--viewers 50] [--hold 10]

A local job prints `--lines` lines (about 60 bytes each, one log file: no rotation) and ends. `kubetrain ui`
then runs as a process of its own, its settings the defaults, and `--viewers` clients open the job page's
event stream at once, as that many tabs would (bearer token, no filter: the whole log). Each client reads
until its first `lines` event (time to first line), then reads nothing for `--hold` seconds (a slow
viewer: a tab in the background, a slow network), then reads its stream to the log's end. Reported: the
server's RSS (idle, peak while held, peak overall: VmHWM), `/api/jobs` answered during the hold and 5 s
after it (the viewers reading), the time to the stream's first byte, to its first line and to the end
(median and slowest), and whether every viewer got every line. `--ui-args "--log-readers 8"` measures another setting.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.ui.helpers import TOKEN, free_port, request  # noqa: E402

PRINT = """import sys
w = sys.stdout.write
for i in range({n}):
    w(f"line {{i:>9}} of the big log, as a long training run prints\\n")
"""


def status_kb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def make_job(home: Path, lines: int) -> str:
    """A finished local job whose output is `lines` lines."""
    os.environ["KUBETRAIN_HOME"] = str(home)
    # One file holds it all: rotated at the kubelet's 10 MiB, five files would keep about half of it.
    os.environ["KUBETRAIN_LOG_MAX_SIZE"] = "1Gi"
    from kubetrain.backends.local.backend import LocalBackend
    from kubetrain.jobspec import from_dict

    script = home / "print.py"
    home.mkdir(parents=True, exist_ok=True)
    script.write_text(PRINT.format(n=lines))
    doc = {
        "apiVersion": "kubetrain.dev/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "big-log"},
        "spec": {"framework": "generic", "replicas": 1, "run": {"exec": [sys.executable, str(script)]}},
    }
    backend = LocalBackend()
    try:
        result = backend.run(from_dict(doc), detach=True)
        while not backend.status(result.job_id).phase.is_terminal:
            time.sleep(0.2)
        return result.job_id
    finally:
        backend.close()


class Viewer:
    def __init__(self) -> None:
        self.byte: float | None = None
        self.first: float | None = None
        self.done: float | None = None
        self.lines = 0
        self.ending = ""


async def view(port: int, path: str, started: float, held: asyncio.Event, viewer: Viewer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 24)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode())
    await writer.drain()
    tail = b""
    try:
        while True:
            chunk = await reader.read(1 << 20)
            if not chunk:
                viewer.ending = viewer.ending or "closed"
                return
            both = tail + chunk
            if viewer.byte is None:
                viewer.byte = time.monotonic() - started
            # Counted in what the chunk completes: a line's mark may begin in the chunk before.
            viewer.lines += both.count(b',"stdout",') - tail.count(b',"stdout",')
            if viewer.first is None and b"event: lines" in both:
                viewer.first = time.monotonic() - started
                await held.wait()  # a slow viewer: reads nothing more while held
            for ending in (b"event: end", b"event: failed"):
                if ending in both:
                    viewer.ending = ending.decode()[7:]
                    viewer.done = time.monotonic() - started
                    return
            tail = both[-32:]
    finally:
        writer.close()


async def run_viewers(port: int, job_id: str, count: int, hold: float, pid: int) -> tuple[list[Viewer], str, float]:
    path = f"/jobs/local/{job_id}/events"
    started = time.monotonic()
    held = asyncio.Event()
    viewers = [Viewer() for _ in range(count)]
    tasks = [asyncio.create_task(view(port, path, started, held, v)) for v in viewers]
    await asyncio.sleep(hold)
    held_peak = status_kb(pid, "VmHWM")
    t = time.perf_counter()
    try:
        reply = await asyncio.to_thread(request, f"http://127.0.0.1:{port}/api/jobs")
        answer = f"{reply.status} in {(time.perf_counter() - t) * 1000:.0f} ms"
    except OSError as exc:
        answer = f"no answer after {time.perf_counter() - t:.1f} s ({exc.__class__.__name__})"
    held.set()
    await asyncio.sleep(min(hold, 5.0))  # the 50 reading now
    t = time.perf_counter()
    try:
        reply = await asyncio.to_thread(request, f"http://127.0.0.1:{port}/api/jobs")
        reading = f"{reply.status} in {(time.perf_counter() - t) * 1000:.0f} ms"
    except OSError as exc:
        reading = f"no answer after {time.perf_counter() - t:.1f} s ({exc.__class__.__name__})"
    await asyncio.gather(*tasks, return_exceptions=True)
    return viewers, f"{answer}; while they read: {reading}", held_peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--viewers", type=int, default=50)
    parser.add_argument("--hold", type=float, default=10.0, help="seconds the viewers read nothing")
    parser.add_argument("--ui-args", default="", help="more arguments for kubetrain ui")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="kubetrain-bench-viewers-"))
    home = scratch / "home"
    t = time.monotonic()
    job_id = make_job(home, args.lines)
    print(f"job {job_id}: {args.lines:,} lines printed in {time.monotonic() - t:.1f} s", flush=True)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "kubetrain.cli.main", "ui", "--port", str(port), *args.ui_args.split()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "KUBETRAIN_HOME": str(home), "KUBETRAIN_UI_TOKEN": TOKEN},
    )
    try:
        assert server.stdout is not None
        server.stdout.readline()  # the address: the port is bound
        assert request(f"http://127.0.0.1:{port}/api/jobs").status == 200
        idle = status_kb(server.pid, "VmRSS")
        viewers, answer, held_peak = asyncio.run(run_viewers(port, job_id, args.viewers, args.hold, server.pid))
        peak = status_kb(server.pid, "VmHWM")
    finally:
        server.terminate()
        try:
            _, err = server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            _, err = server.communicate(timeout=30)
        shutil.rmtree(scratch, ignore_errors=True)
    bytes_ = sorted(v.byte for v in viewers if v.byte is not None)
    firsts = sorted(v.first for v in viewers if v.first is not None)
    dones = sorted(v.done for v in viewers if v.done is not None)
    complete = sum(1 for v in viewers if v.lines == args.lines and v.ending == "end")
    endings: dict[str, int] = {}
    for v in viewers:
        endings[v.ending or "none"] = endings.get(v.ending or "none", 0) + 1

    def spread(values: list[float]) -> str:
        if not values:
            return "-"
        return f"median {statistics.median(values):.2f} s, slowest {values[-1]:.2f} s ({len(values)} viewers)"

    rows = [
        ("viewers of the log / its lines", f"{args.viewers} / {args.lines:,}"),
        ("server RSS idle", f"{idle:.0f} MB"),
        (f"server peak RSS, viewers held {args.hold:.0f} s", f"{held_peak:.0f} MB"),
        ("server peak RSS overall", f"{peak:.0f} MB"),
        ("GET /api/jobs while they are held", answer),
        ("time to first byte (the page's status)", spread(bytes_)),
        ("time to first line of the log", spread(firsts)),
        ("time to the log's end", spread(dones)),
        ("viewers with every line and the end", f"{complete} of {args.viewers}"),
        ("how the streams ended", ", ".join(f"{k}: {n}" for k, n in sorted(endings.items()))),
        ("server stderr", f"{len(err):,} bytes, {err.count(b'Traceback')} tracebacks"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
