"""A replica's log is capped like the kubelet's (containerLogMaxSize, containerLogMaxFiles): rotated past the
size, the oldest files removed, and every line either on disk or counted in the record of what rotated away."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from kubetrain.backends.local.backend import LocalBackend
from kubetrain.backends.local.log_follow import follow_log
from kubetrain.backends.logfiles.format import rotated_away
from kubetrain.backends.logfiles.reader import iter_log, log_files
from kubetrain.backends.logfiles.writer import LogWriter, parse_size, rotation_from_env
from kubetrain.contract import env_names
from tests.support.helpers import cli, exec_job, job_file, no_traceback, write

LINES = 3000
MAX_SIZE = 16 * 1024
MAX_FILES = 3


def write_lines(path: Path, count: int, start: int = 0, per_flush: int = 7) -> None:
    writer = LogWriter(path, max_size=MAX_SIZE, max_files=MAX_FILES)
    for i in range(start, start + count):
        writer.add(1_700_000_000_000_000_000 + i, "stdout", f"line {i:05d}".encode())
        if i % per_flush == 0:
            writer.flush()
    writer.close()


def numbers(path: Path, **kw: object) -> list[int]:
    return [int(r.text.split()[1]) for r in iter_log(path, **kw) if r.text.startswith("line ")]  # type: ignore[arg-type]


def test_rotation_bounds_the_files_keeps_the_newest_lines_in_order_and_accounts_for_the_rest(tmp_path: Path) -> None:
    log = tmp_path / "worker-0.log"
    write_lines(log, LINES)

    files = log_files(log)
    assert len(files) == MAX_FILES
    assert all(f.stat().st_size <= MAX_SIZE for f in files)
    kept = numbers(log)
    # The newest lines, in order, with none missing between them, and the last one last.
    assert kept == list(range(LINES - len(kept), LINES))
    # What rotated away is counted: on disk + rotated away = every line written.
    gone = rotated_away(log)
    assert gone["lines"] + len(kept) == LINES
    assert gone["files"] >= 1
    records = list(iter_log(log))
    assert records[0].text.startswith(f"kubetrain: {gone['lines']:,} earlier lines")
    assert records[0].time_ns <= records[1].time_ns


def test_tail_reads_across_rotated_files(tmp_path: Path) -> None:
    log = tmp_path / "worker-0.log"
    write_lines(log, LINES)
    newest_in_current = numbers(log, offset=1)  # only the file being written
    want = len(newest_in_current) + 50  # reaches into the rotated file before it
    assert numbers(log, tail=want) == list(range(LINES - want, LINES))


def test_follow_reads_every_line_through_rotations(tmp_path: Path) -> None:
    log = tmp_path / "worker-0.log"
    write_lines(log, 200)
    done = threading.Event()

    def more() -> None:
        write_lines(log, LINES, start=200, per_flush=3)
        done.set()

    got: list[int] = []
    writer = threading.Thread(target=more)
    followed = follow_log({"w": log}, done.is_set, poll_interval=0.01)
    first = next(followed)  # history first, then the writer runs while we follow
    writer.start()
    for rec in [first, *followed]:
        if rec.text.startswith("line "):
            got.append(int(rec.text.split()[1]))
    writer.join()
    # Rotation may remove lines before the follower read them; those are counted, never skipped silently.
    assert got == sorted(got) and len(set(got)) == len(got)
    assert got[-1] == LINES + 200 - 1
    missing = set(range(got[0], LINES + 200)) - set(got)
    assert len(missing) <= rotated_away(log)["lines"]


def test_a_follower_rotated_past_the_last_file_still_reads_the_files_after_its_own(tmp_path: Path) -> None:
    """A follower that falls behind while its file is rotated away entirely (three rotations between two
    reads, with three files kept) reads its own file to the end, then every rotated file still on disk:
    nothing that exists is skipped."""
    log = tmp_path / "worker-0.log"
    write_lines(log, 10)
    done = threading.Event()
    followed = follow_log({"w": log}, done.is_set, poll_interval=0.01)
    got = [int(next(followed).text.split()[1])]  # history; the follower now holds the file open
    # Enough for three rotations (each file ~16 KiB; a line ~ 60 bytes): the follower's file is removed.
    write_lines(log, 1000, start=10)
    assert rotated_away(log)["files"] >= 1
    done.set()
    got += [int(r.text.split()[1]) for r in followed if r.text.startswith("line ")]
    assert got == list(range(1010))


WRITE = "import sys\nfor i in range(int(sys.argv[1])):\n    print(f'line {i:05d} ' + 'x' * 120)\n"


def test_a_slow_follower_reads_every_line_of_a_fast_writer_through_many_rotations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`logs -f` (and the web view) behind a replica that rotates its log every few milliseconds: a reader
    that starts before the log exists and falls several rotations behind, or looks while a rotation renames
    the files one by one, still reads every line once, in order, when none was rotated away."""
    monkeypatch.setenv("KUBETRAIN_LOG_MAX_SIZE", "64Ki")
    monkeypatch.setenv("KUBETRAIN_LOG_MAX_FILES", "1000")  # enough: nothing is removed
    script = tmp_path / "write.py"
    script.write_text(WRITE)
    count = 30_000
    job = exec_job([sys.executable, str(script), str(count)], "fast")
    backend = LocalBackend()
    try:
        job_id = backend.run(job, detach=True).job_id
        got = []
        for n, rec in enumerate(backend.logs(job_id, follow=True)):
            if rec.text.startswith("line "):
                got.append(int(rec.text.split()[1]))
            if n % 500 == 0:
                time.sleep(0.01)  # a slow reader: the writer rotates several times meanwhile
        files = log_files(backend.store.log_path(job_id, "worker", 0))
    finally:
        backend.close()
    assert len(files) > 20 and rotated_away(files[-1])["lines"] == 0
    assert got == list(range(count))


def test_sizes_and_settings_from_the_environment() -> None:
    assert parse_size("10Mi") == 10 * 1024 * 1024
    assert parse_size("500K") == 500_000
    assert rotation_from_env({"KUBETRAIN_LOG_MAX_SIZE": "64Ki", "KUBETRAIN_LOG_MAX_FILES": "2"}) == (65536, 2)
    assert rotation_from_env({}) == (10 * 1024 * 1024, 5)
    # The names live with every other KUBETRAIN_* name, spelled as users set them.
    assert (env_names.LOG_MAX_SIZE, env_names.LOG_MAX_FILES) == ("KUBETRAIN_LOG_MAX_SIZE", "KUBETRAIN_LOG_MAX_FILES")
    assert {"LOG_MAX_SIZE", "LOG_MAX_FILES"} <= set(env_names.__all__)


def test_a_job_over_the_cap_keeps_its_newest_output_and_logs_says_what_rotated_away(
    tmp_path: Path, kubetrain_home: Path
) -> None:
    write(
        tmp_path / "chatty.py",
        """\
        for i in range(20000):
            print(f"line {i:05d} " + "x" * 40)
        """,
    )
    path = job_file(tmp_path, {"framework": "generic", "replicas": 1, "run": {"python": ["chatty.py"]}})
    env = {"KUBETRAIN_LOG_MAX_SIZE": "100Ki", "KUBETRAIN_LOG_MAX_FILES": "3"}
    run = cli("run", path, "-q", env=env)
    no_traceback(run)
    assert run.returncode == 0, run.stderr
    job_id = cli("list", "-o", "name").stdout.split()[0]
    logs = cli("logs", job_id)
    no_traceback(logs)
    # The marker is kubetrain's, on the stderr stream; the replica's lines on stdout.
    marker = logs.stderr.strip()
    assert "earlier lines" in marker and "rotated away" in marker, logs.stderr
    shown = [int(line.split()[2]) for line in logs.stdout.splitlines()]
    assert shown == list(range(20000 - len(shown), 20000))
    earlier = int(marker.split("kubetrain: ")[1].split()[0].replace(",", ""))
    assert earlier + len(shown) == 20000
    on_disk = sum(f.stat().st_size for f in (kubetrain_home / "logs" / job_id).glob("worker-0.log*"))
    assert on_disk <= 3 * 100 * 1024
    tail = cli("logs", job_id, "--tail", "3").stdout.splitlines()
    assert [int(line.split()[2]) for line in tail] == [19997, 19998, 19999]
