"""kubetrain's own messages on a terminal nobody reads (`kubetrain run job.yaml 2>&1 | sleep 400`) never hold the
supervisor's control loop: a restart's back-off message is queued, the restart happens, `cancel` works at once, and
the job ends Cancelled with no process left. The messages reach the terminal, in order, once it reads again."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

from kubetrain.backends.local.live_output import Messages
from kubetrain.status import JobPhase, ReplicaPhase
from tests.support.helpers import CLI, cli, job_file, local_backend, no_traceback, wait_for, wait_gone

# First attempt: fill the terminal's pipe to the last byte, then fail (the supervisor then has a back-off
# message to write, to a full pipe). Later attempts: record the pid and sleep, for the cancel to stop.
FILL_THEN_FAIL = """\
import os, sys, time
fifo, pidfile = sys.argv[1], sys.argv[2]
filled = pidfile + ".filled"
if os.path.exists(filled):
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(pidfile + ".tmp", pidfile)
    time.sleep(600)
    sys.exit(0)
fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
try:
    while True:
        os.write(fd, b"." * 4096)
except BlockingIOError:
    pass
open(filled, "w").close()
sys.exit(1)
"""


def test_a_blocked_stderr_holds_neither_the_restart_nor_cancel(tmp_path: Path) -> None:
    (tmp_path / "fill.py").write_text(FILL_THEN_FAIL)
    fifo, pidfile = tmp_path / "terminal.fifo", tmp_path / "replica.pid"
    os.mkfifo(fifo)
    path = job_file(
        tmp_path,
        {
            "framework": "generic",
            "replicas": 1,
            "restartPolicy": "OnFailure",
            "runPolicy": {"backoffLimit": 3},
            "run": {"python": ["fill.py", str(fifo), str(pidfile)]},
        },
        name="stderr",
    )
    # The terminal: a pipe whose reader does not read (yet). stdout and stderr both go there, as with 2>&1.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer = os.open(fifo, os.O_WRONLY)
    run = subprocess.Popen([*CLI, "run", str(path)], stdout=writer, stderr=writer)
    os.close(writer)
    shown = bytearray()
    drain = threading.Thread(target=_read_to_end, args=(reader, shown), daemon=True)
    try:
        job_id = wait_for("the job id", lambda: cli("list", "-o", "name").stdout.split()[:1])[0]
        # The back-off message had to be written to the full pipe; the restart happening says the loop went on.
        pid = int(wait_for("the restarted replica", lambda: pidfile.exists() and pidfile.read_text()))
        with local_backend() as backend:
            assert backend.status(job_id).backoff_count == 1
        started = time.monotonic()
        cancel = cli("cancel", job_id)
        print(f"cancel with a blocked stderr took {time.monotonic() - started:.2f}s")  # -s shows it; not asserted
        no_traceback(cancel)
        assert cancel.returncode == 0, cancel.stderr
        with local_backend() as backend:
            status = backend.status(job_id)
        assert status.phase is JobPhase.CANCELLED
        assert [(r.phase, r.reason) for r in status.replicas] == [(ReplicaPhase.CANCELLED, "Cancelled")]
        wait_gone([pid])
        # The terminal reads again: `run` ends as a cancelled run does, and its messages arrive, in order.
        os.set_blocking(reader, True)
        drain.start()
        assert run.wait(timeout=60) == 130
        drain.join(timeout=60)
        text = bytes(shown).decode(errors="replace").replace(".", "")
        assert "Traceback" not in text, text
        backoff, ended = text.find("back-off: next attempt"), text.find("cancelled")
        assert 0 <= backoff < ended, text
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        if not drain.is_alive():
            os.close(reader)


def _read_to_end(fd: int, into: bytearray) -> None:
    while chunk := os.read(fd, 65536):
        into += chunk


def test_messages_never_block_the_caller_and_arrive_in_order() -> None:
    gate, got = threading.Event(), []

    def blocked_terminal(text: str) -> None:
        gate.wait()
        got.append(text)

    messages = Messages(blocked_terminal, job="job-x")
    for i in range(100):
        messages(f"message {i}")  # returns although the terminal takes nothing
    gate.set()
    assert messages.close()
    assert got == [f"message {i}" for i in range(100)]
