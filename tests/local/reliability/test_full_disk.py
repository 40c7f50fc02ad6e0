"""A full disk under KUBETRAIN_HOME (a 2 MB tmpfs, mounted in a private user and mount namespace, so it needs
no privilege) loses neither the job's outcome nor a line unaccounted for: the log gets a marker counting what
was not written, the terminal one line, `describe` a LogTruncated condition; `list` works while it is full."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from kubetrain.backends.local.logfiles import iter_log
from tests.support.helpers import alive, job_file, wait_gone

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
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed: no way to mount a small filesystem")
    home, out = tmp_path / "small-disk", tmp_path / "out"
    home.mkdir()
    out.mkdir()
    probe = subprocess.run(["unshare", "-Urm", "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"user namespaces are not permitted here ({probe.stderr.strip()}): cannot mount a tmpfs")
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
