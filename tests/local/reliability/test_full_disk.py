"""A full disk under KUBETRAIN_HOME (a 2 MB tmpfs, mounted in a private user and mount namespace, so it needs
no privilege) loses neither the job's outcome nor a line unaccounted for: the log gets a marker counting what
was not written, the terminal one line, `describe` a LogTruncated condition; `list` works while it is full.
The supervisor's state file (who supervises the job, whether a signal reaches it) stays true on a full disk."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from kubetrain.backends.local.supervisor_state import Heartbeat, read_state, write_state
from kubetrain.backends.logfiles.reader import iter_log
from tests.support.helpers import alive, job_file, wait_for, wait_gone

LINES = 60_000
CHATTY = """\
import sys
for i in range(int(sys.argv[1])):
    print(f"line {i:05d} of the replica's output, padded a little xxxxxxxxxx")
"""
# Fills the disk to the last block (its checkpoints, say), tells the test, waits for it, then prints.
FILLER = """\
import os, sys
fd = os.open(os.path.join(os.environ["KUBETRAIN_HOME"], "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
try:
    while True:
        os.write(fd, b"x" * 4096)
except OSError as e:
    print(f"filler stopped: {e.strerror}", file=sys.stderr, flush=True)
os.close(fd)
with open(sys.argv[2], "w") as full:  # a FIFO: opening it waits for the test, no polling
    full.write("full\\n")
with open(sys.argv[3]) as go:
    go.read()
for i in range(int(sys.argv[1])):
    print(f"line {i:05d} after the disk filled up")
"""


def on_small_disk(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    """Run the shell `script` in a private mount namespace where $HOME_DIR is a fresh 2 MB tmpfs; it copies
    what the test checks to $OUT (the tmpfs goes away with the namespace)."""
    assert shutil.which("unshare") is not None, "unshare (util-linux) mounts the small filesystem"
    home, out = tmp_path / "small-disk", tmp_path / "out"
    home.mkdir()
    out.mkdir()
    probe = subprocess.run(["unshare", "-Urm", "true"], capture_output=True, text=True, check=False)
    assert probe.returncode == 0, f"user namespaces are needed to mount a small tmpfs: {probe.stderr.strip()}"
    prelude = f'set -u\nmount -t tmpfs -o size=2m tmpfs "$HOME_DIR"\nK="{sys.executable} -m kubetrain.cli.main"\n'
    return subprocess.run(
        ["unshare", "-Urm", "--fork", "sh", "-c", prelude + script],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "HOME_DIR": str(home), "OUT": str(out), "KUBETRAIN_HOME": str(home)},
    )


def replica_pids(store: Path) -> list[int]:
    with sqlite3.connect(store) as db:
        return [pid for (pid,) in db.execute("SELECT pid FROM replicas WHERE pid IS NOT NULL")]


def outcome(store: Path) -> tuple[str, str]:
    with sqlite3.connect(store) as db:
        return db.execute("SELECT phase, reason FROM jobs").fetchone()


def test_a_replica_filling_the_log_disk_succeeds_and_every_line_is_accounted_for(tmp_path: Path) -> None:
    (tmp_path / "chatty.py").write_text(CHATTY)
    job_file(tmp_path, {"framework": "generic", "replicas": 1, "run": {"python": ["chatty.py", str(LINES)]}})
    done = on_small_disk(
        tmp_path,
        """
        $K run job.yaml > /dev/null 2> "$OUT/run.err"; echo $? > "$OUT/run.rc"
        $K list > "$OUT/list.out" 2>&1; echo $? > "$OUT/list.rc"
        $K describe "$($K list -o name)" > "$OUT/describe.out" 2>&1
        cp -r "$HOME_DIR/." "$OUT/home"
        """,
    )
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    run_err = (out / "run.err").read_text()
    assert (out / "run.rc").read_text().strip() == "0", run_err
    assert "Traceback" not in run_err
    # One line on the terminal says the log is truncated.
    assert len([line for line in run_err.splitlines() if "not written to the log" in line]) == 1, run_err
    assert "succeeded" in run_err
    store = out / "home" / "jobs.db"
    assert outcome(store) == ("Succeeded", "Completed")
    assert (out / "list.rc").read_text().strip() == "0"
    assert "Succeeded" in (out / "list.out").read_text()
    describe = (out / "describe.out").read_text()
    assert "LogTruncated" in describe and "lines" in describe, describe
    # Every line: in the log, or counted by the marker.
    (log,) = (out / "home" / "logs").glob("*/worker-0.log")
    records = list(iter_log(log))
    written = [r for r in records if r.stream == "stdout"]
    markers = [r.text for r in records if r.stream == "stderr" and "not written here" in r.text]
    assert len(markers) == 1, markers
    missing = int(markers[0].split("kubetrain: ")[1].split()[0].replace(",", ""))
    assert [int(r.text.split()[1]) for r in written] == list(range(len(written)))
    assert len(written) + missing == LINES
    print(f"full disk: {len(written)} lines written, {missing} counted by the marker")
    pids = replica_pids(store)
    assert pids
    wait_gone(pids)


def test_a_disk_filled_by_the_replica_still_records_its_success_and_list_works_meanwhile(tmp_path: Path) -> None:
    (tmp_path / "filler.py").write_text(FILLER)
    job_file(
        tmp_path,
        {"framework": "generic", "replicas": 1, "run": {"python": ["filler.py", "3000", "full.fifo", "go.fifo"]}},
    )
    done = on_small_disk(
        tmp_path,
        """
        mkfifo full.fifo go.fifo
        id=$($K run job.yaml --detach)
        read state < full.fifo
        $K list > "$OUT/list.out" 2>&1; echo $? > "$OUT/list.rc"
        echo go > go.fifo
        $K logs -f "$id" > /dev/null 2>&1
        $K describe "$id" > "$OUT/describe.out" 2>&1
        cp -r "$HOME_DIR/." "$OUT/home"
        """,
    )
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    listed = (out / "list.out").read_text()
    assert (out / "list.rc").read_text().strip() == "0", listed
    assert "Traceback" not in listed and "Running" in listed
    store = out / "home" / "jobs.db"
    assert outcome(store) == ("Succeeded", "Completed")
    # Detached, the warning is kept where `describe` reads it.
    assert "LogTruncated" in (out / "describe.out").read_text()
    (log,) = (out / "home" / "logs").glob("*/worker-0.log")
    records = list(iter_log(log))
    written = [r for r in records if r.stream == "stdout"]
    markers = [r.text for r in records if "not written here" in r.text]
    assert len(markers) == 1, [r.text for r in records]
    missing = int(markers[0].split("kubetrain: ")[1].split()[0].replace(",", ""))
    # The replica's lines: 3000 on stdout and its one stderr line, written or counted.
    others = [r for r in records if r.stream == "stderr" and "not written here" not in r.text]
    assert len(written) + len(others) + missing == 3000 + 1
    pids = replica_pids(store)
    assert pids
    wait_gone(pids)
    assert not any(alive(p) for p in pids)


# Runs a job through `kubetrain.run`, attached; when the job exists (its first message), fills the disk to the last
# block, so that the supervisor about to take the job over finds no room for its state file.
FILL_ON_CREATE = """\
import os, sys
import kubetrain

out, home = os.environ["OUT"], os.environ["KUBETRAIN_HOME"]

def on_event(text):
    if text.startswith("job ") and not os.path.exists(os.path.join(out, "id")):
        fd = os.open(os.path.join(home, "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, b"x" * 4096)
        except OSError as e:
            print(f"filler stopped: {e.strerror}", file=sys.stderr, flush=True)
        os.close(fd)
        with open(os.path.join(out, "id"), "w") as f:
            f.write(text.split()[1].rstrip(":"))

result = kubetrain.run(kubetrain.load("job.yaml"), quiet=True, on_event=on_event)
print(result.status.phase.value, result.status.message)
"""
UP_THEN_SLEEP = """\
import sys, time
with open(sys.argv[1], "w") as up:  # a FIFO: opening it waits for the test
    up.write("up\\n")
time.sleep(600)
"""


def test_a_full_disk_when_the_supervisor_takes_over_leaves_its_state_true_and_cancel_working(tmp_path: Path) -> None:
    (tmp_path / "runner.py").write_text(FILL_ON_CREATE)
    (tmp_path / "up.py").write_text(UP_THEN_SLEEP)
    job_file(tmp_path, {"framework": "generic", "replicas": 1, "run": {"python": ["up.py", "up.fifo"]}})
    done = on_small_disk(
        tmp_path,
        f"""
        mkfifo up.fifo
        {sys.executable} runner.py > "$OUT/run.out" 2> "$OUT/run.err" & runner=$!
        read up < up.fifo
        $K cancel "$(cat "$OUT/id")" > "$OUT/cancel.out" 2>&1; echo $? > "$OUT/cancel.rc"
        [ "$(cat "$OUT/cancel.rc")" = 0 ] || kill -TERM $runner  # the cancel failed: end it
        wait $runner; echo $? > "$OUT/run.rc"
        cp -a "$HOME_DIR/." "$OUT/home"
        """,
    )
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    run_err = (out / "run.err").read_text()
    assert "filler stopped: No space left on device" in run_err
    cancel = (out / "cancel.out").read_text()
    assert (out / "cancel.rc").read_text().strip() == "0", cancel
    assert "Traceback" not in run_err + cancel, run_err + cancel
    assert (out / "run.rc").read_text().strip() == "0", run_err
    assert (out / "run.out").read_text().split() == ["Cancelled", "cancelled", "by", "request"]
    assert outcome(out / "home" / "jobs.db") == ("Cancelled", "Cancelled")
    # The state file says who supervised the job and that a signal reaches it (not the creator's "no signals"),
    # and no half-written file was left behind on the full disk.
    (folder,) = (out / "home" / "logs").iterdir()
    state = read_state(folder / "supervisor.json")
    assert state is not None and state.supervising and state.signals
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".supervisor.json")]
    pids = replica_pids(out / "home" / "jobs.db")
    assert pids
    wait_gone(pids)


def test_a_state_file_not_written_is_written_by_a_later_heartbeat(tmp_path: Path) -> None:
    # No folder to write it in yet (as no room on a disk): the supervisor goes on, and its heartbeat writes the
    # state once it can, rather than touching a file that is not there.
    path = tmp_path / "logs" / "supervisor.json"
    state = {"supervising": True, "signals": True, "detached": False}
    heartbeat = Heartbeat(path, lambda: write_state(path, os.getpid(), **state))
    try:
        assert not path.exists()
        path.parent.mkdir()
        written = wait_for("the state written by a heartbeat", lambda: read_state(path))
        assert (written.pid, written.supervising, written.signals) == (os.getpid(), True, True)
    finally:
        heartbeat.stop()
