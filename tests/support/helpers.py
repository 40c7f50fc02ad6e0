"""Shared helpers of the local backend and CLI tests: job files, scripts, the CLI as a subprocess, pids.

Tests that run jobs use real processes and the real store under the per-test KUBETRAIN_HOME
(tests/conftest.py). Nothing here waits a fixed time: every wait polls a condition up to a generous
limit, so a slow machine makes a test slower, never flaky.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from kubetrain.backends.local import job_start
from kubetrain.backends.local.backend import LocalBackend
from kubetrain.backends.logfiles.reader import iter_log
from kubetrain.jobspec import TrainJob, from_dict
from kubetrain.status import JobPhase, JobStatus

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CLI = [sys.executable, "-m", "kubetrain.cli.main"]

T = TypeVar("T")

# Scripts the jobs below run: plain Python, so a job costs a few tens of milliseconds.

PIDFILE_SLEEP = """\
import os, pathlib, sys, time
# Record this process's pid where the test can find it, then wait to be stopped.
d = pathlib.Path(sys.argv[1])
d.mkdir(parents=True, exist_ok=True)
key = f"{os.environ['KUBETRAIN_ROLE']}-{os.environ['KUBETRAIN_REPLICA_INDEX']}.{os.environ.get('LOCAL_RANK', '0')}"
tmp = d / (key + ".tmp")
tmp.write_text(str(os.getpid()))
tmp.rename(d / (key + ".pid"))
print(f"{key} up", flush=True)
time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 600)
print(f"{key} done", flush=True)
"""

EXIT_ON_INDEX = """\
import os, sys, time
# Replica `index` exits with `code`; the others wait to be stopped.
code, index = int(sys.argv[1]), int(sys.argv[2])
me = int(os.environ["KUBETRAIN_REPLICA_INDEX"])
print(f"replica {me} started", flush=True)
if me == index:
    print(f"replica {me} exiting with code {code}", file=sys.stderr, flush=True)
    sys.exit(code)
time.sleep(600)
"""

FAIL_FIRST_ATTEMPT = """\
import os, signal, sys
# Replica 1 fails on the first attempt only (a marker file remembers the attempt); `how` is an exit
# code or "sigkill". Every replica then succeeds.
marker, how = sys.argv[1], sys.argv[2]
me = int(os.environ["KUBETRAIN_REPLICA_INDEX"])
if me == 1 and not os.path.exists(marker):
    open(marker, "w").close()
    print("first attempt fails", flush=True)
    if how == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(int(how))
print(f"replica {me} succeeded", flush=True)
"""

ALWAYS_FAIL = """\
import sys
print("attempt failing", flush=True)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
"""

TICK = """\
import os, sys, time
# `count` lines `tick <i> <role>-<index>`, `pause` seconds apart.
count, pause = int(sys.argv[1]), float(sys.argv[2])
me = f"{os.environ['KUBETRAIN_ROLE']}-{os.environ['KUBETRAIN_REPLICA_INDEX']}"
for i in range(count):
    print(f"tick {i} {me}", flush=True)
    time.sleep(pause)
print(f"error-line from {me}", file=sys.stderr, flush=True)
"""

PRINT_ENV = """\
import json, os
# The replica's whole environment as one JSON line (tests pick the variables they check).
print("ENV " + json.dumps(dict(os.environ), sort_keys=True), flush=True)
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def document(spec: dict[str, Any], name: str = "job") -> dict[str, Any]:
    return {"apiVersion": "kubetrain.dev/v1alpha1", "kind": "TrainJob", "metadata": {"name": name}, "spec": spec}


def job_file(directory: Path, spec: dict[str, Any], name: str = "job", file: str = "job.yaml") -> Path:
    """A TrainJob YAML file in `directory` (the scripts it names live beside it)."""
    path = directory / file
    path.write_text(yaml.safe_dump(document(spec, name), sort_keys=False))
    return path


def make_job(spec: dict[str, Any], name: str = "job", *, image: str | None = None, **metadata: Any) -> TrainJob:
    """A TrainJob from its spec; `image` is the spec's image unless the spec names one (Kubernetes needs one, a
    local run does not), `metadata` the rest of its metadata beside the name (labels, annotations)."""
    if image is not None:
        spec = {"image": image, **spec}
    doc = document(spec, name)
    doc["metadata"].update(metadata)
    return from_dict(doc)


def exec_job(argv: list[str], name: str = "job", replicas: int = 1) -> TrainJob:
    """A generic job running `argv` as it is (`run.exec`) in every replica."""
    return make_job({"framework": "generic", "replicas": replicas, "run": {"exec": argv}}, name)


def cli(
    *args: str | Path,
    cwd: Path | None = None,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`kubetrain ARGS` as a user runs it, in a separate process (KUBETRAIN_HOME is inherited)."""
    return subprocess.run(
        [*CLI, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        input=stdin,
        check=False,
    )


def spawn_cli(*args: str | Path, cwd: Path | None = None) -> subprocess.Popen[str]:
    """`kubetrain ARGS` running in the background (for signals and followers)."""
    return subprocess.Popen(
        [*CLI, *map(str, args)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert "Traceback" not in result.stdout, result.stdout


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 60.0, interval: float = 0.05) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@contextmanager
def supervisor_arrives_after_first_look(
    monkeypatch: pytest.MonkeyPatch, backend: LocalBackend
) -> Iterator[list[object]]:
    """A detached supervisor records itself in the store a moment after it starts, and `resume` and `run --detach`
    look at the job right then. Inside this block the first read of a job's supervisor record through `backend`
    waits, before it answers, until the supervisor has recorded itself: that look's answer is then out of date
    (None) as soon as it is given. Yields the records that first read gave (one, once it happened)."""
    from kubetrain.backends.local.store import JobStore

    read = backend.store.supervisor_process
    first: list[object] = []

    def read_then_supervisor_arrives(job_id: str) -> tuple[int, int | None] | None:
        record = read(job_id)
        if not first:
            first.append(record)
            with JobStore(backend.store.db_path) as other:
                wait_for("the supervisor to record itself", lambda: other.supervisor_process(job_id))
        return record

    with monkeypatch.context() as patch:
        patch.setattr(backend.store, "supervisor_process", read_then_supervisor_arrives)
        yield first


def alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (dead, not yet reaped by its parent) counts as gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def wait_gone(pids: Iterable[int], timeout: float = 30.0) -> None:
    """Every pid has exited (fails naming the survivors). Not a timing assertion: a generous limit."""
    pids = list(pids)
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in pids if alive(p)]
        if not left:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"processes still running {timeout}s later: {left}")
        time.sleep(0.05)


def pidfiles(directory: Path) -> dict[str, int]:
    """Replica key -> pid, from the files PIDFILE_SLEEP writes."""
    if not directory.is_dir():
        return {}
    return {p.stem: int(p.read_text()) for p in directory.glob("*.pid")}


def wait_pids(directory: Path, count: int, timeout: float = 60.0) -> dict[str, int]:
    """Wait until `count` replicas have written their pid files; return them."""
    return wait_for(
        f"{count} pid files in {directory}",
        lambda: (lambda found: found if len(found) >= count else None)(pidfiles(directory)),
        timeout,
    )


@contextmanager
def local_backend() -> Iterator[LocalBackend]:
    backend = LocalBackend()
    try:
        yield backend
    finally:
        backend.close()


def status_of(job_id: str) -> JobStatus:
    with local_backend() as backend:
        return backend.status(job_id)


def wait_phase(job_id: str, *phases: JobPhase, timeout: float = 60.0) -> JobStatus:
    return wait_for(
        f"job {job_id} to reach {', '.join(p.value for p in phases)}",
        lambda: (lambda s: s if s.phase in phases else None)(status_of(job_id)),
        timeout,
    )


def run_job(job: TrainJob, base_dir: Path) -> JobStatus:
    """Run attached through the library (in this process) to the end; the final status."""
    import kubetrain

    result = kubetrain.run(job, base_dir=str(base_dir))
    assert result.status is not None, result
    return result.status


def create_job(backend: LocalBackend, job: TrainJob, base_dir: Path) -> str:
    """Record the job and its launch record, start nothing (a test then starts its supervisor its own way)."""
    job_id, _record = job_start.create_job(backend.store, job, base_dir, preload=backend.preload, gpus=backend.gpus)
    return job_id


def start_detached(job: TrainJob, base_dir: Path) -> tuple[str, int]:
    """Create the job and start its supervisor in the background, as `kubetrain run --detach` does.
    Returns the job id and the supervisor's pid."""
    with local_backend() as backend:
        job_id = create_job(backend, job, base_dir)
        return job_id, job_start.start_detached(backend.store, job_id)


def supervisor_pid(job_id: str) -> int | None:
    with local_backend() as backend:
        return backend.store.live_supervisor_pid(job_id)


def log_lines(job_id: str, role: str | None = None, index: int | None = None) -> dict[str, list[str]]:
    """Replica (process) key -> the lines in its log file, stdout and stderr as they were logged."""
    with local_backend() as backend:
        paths = backend._log_paths(job_id, role, index)
    return {key: [rec.text for rec in iter_log(path)] if path.exists() else [] for key, path in paths.items()}


def checksums(lines: Iterable[str]) -> dict[int, str]:
    """rank -> the parameter checksum printed by examples/pytorch-ddp/train.py (as text: exact)."""
    out: dict[int, str] = {}
    for line in lines:
        parts = line.split()
        if "final-params-checksum" in parts:
            at = parts.index("final-params-checksum")
            out[int(parts[at + 1])] = parts[at + 2]
    return out


def env_lines(lines: Iterable[str]) -> list[dict[str, str]]:
    """The environments printed by PRINT_ENV."""
    return [json.loads(line.split("ENV ", 1)[1]) for line in lines if "ENV {" in line]


def parse_json_lines(lines: Sequence[str]) -> list[Any]:
    out = []
    for line in lines:
        text = line.split("] ", 1)[1] if line.startswith("[") else line
        try:
            out.append(json.loads(text))
        except ValueError:
            continue
    return out


def processes_of(home: Path) -> list[int]:
    """Live processes started with KUBETRAIN_HOME=`home`: a test's supervisors, watchdogs and replicas
    (every test has its own home, so these are this test's and no one else's)."""
    needle = f"KUBETRAIN_HOME={home}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
        except OSError:  # gone, or a zombie
            continue
        if needle in environ.split(b"\0") and alive(int(name)):
            found.append(int(name))
    return found


@pytest.fixture(autouse=True)
def no_process_left_behind(kubetrain_home: Path) -> Iterator[None]:
    """After each test: nothing the test's jobs started still runs (given time to finish exiting). What
    is left is killed, and the test errors: a job that outlives its test is a bug."""
    yield
    left = processes_of(kubetrain_home)
    deadline = time.monotonic() + 30
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = processes_of(kubetrain_home)
    if left:
        described = []
        for pid in left:
            with contextlib.suppress(OSError):
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                described.append(f"{pid}: {cmdline.decode(errors='replace')}")
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        pytest.fail("processes left behind:\n" + "\n".join(described))


def generic(run: list[str], replicas: int = 2, **spec: Any) -> dict[str, Any]:
    """The `spec` of a generic job running a python script in every replica."""
    return {"framework": "generic", "replicas": replicas, "run": {"python": run}, **spec}


def running_sleepers(directory: Path, name: str = "job") -> tuple[str, int, dict[str, int]]:
    """A detached job of two replicas that sleep until stopped (PIDFILE_SLEEP, pid files in `directory`/pids),
    returned once both run: its id, its supervisor's pid, and the replicas' pids by key."""
    write(directory / "sleep.py", PIDFILE_SLEEP)
    pids = directory / "pids"
    job_id, supervisor = start_detached(make_job(generic(["sleep.py", str(pids)]), name), directory)
    found = wait_pids(pids, 2)
    wait_phase(job_id, JobPhase.RUNNING)
    return job_id, supervisor, found


def signal_supervisor(job_id: str, signum: int) -> int:
    """Send `signum` to the job's live supervisor (as the store records it); its pid."""
    pid = supervisor_pid(job_id)
    assert pid is not None, f"job {job_id} has no live supervisor"
    os.kill(pid, signum)
    return pid


def assert_ddp_in_step(status: JobStatus, *replicas: str) -> dict[str, list[str]]:
    """The job succeeded and the parameter checksums that `replicas` (log keys, `worker-0`) printed are those of
    ranks 0 and 1, equal: the allreduce kept them in step. The job's log lines, for further checks."""
    logs = log_lines(status.job_id)
    shown = [line for replica in replicas for line in logs.get(replica, [])]
    assert status.phase is JobPhase.SUCCEEDED, "\n".join([status.summary_line(), *shown])
    sums = checksums(shown)
    assert sorted(sums) == [0, 1] and len(set(sums.values())) == 1, sums
    return logs


GATED_METRICS = """\
import sys, kubetrain.metrics as m
# Logs loss 1.0 at step 0, waits until the pipe sys.argv[1] is written to, then logs loss sys.argv[2] at step 1.
m.log(step=0, loss=1.0)
with open(sys.argv[1]) as f:  # blocks until the test opens the pipe for writing
    f.read()
m.log(step=1, loss=float(sys.argv[2]))
"""


def start_gated_metrics(directory: Path, second_loss: float) -> tuple[str, Path]:
    """A detached generic job of one replica running GATED_METRICS: its id and its gate, a FIFO that
    `open_gate` opens to let the replica log `second_loss` and end."""
    gate = directory / "gate"
    os.mkfifo(gate)
    write(directory / "gated.py", GATED_METRICS)
    job_id, _ = start_detached(make_job(generic(["gated.py", str(gate), repr(second_loss)], replicas=1)), directory)
    return job_id, gate


def open_gate(gate: Path) -> None:
    with open(gate, "w") as f:
        f.write("go")


@contextmanager
def attached_sleepers(
    directory: Path, name: str = "job"
) -> Iterator[tuple[subprocess.Popen[str], str, dict[str, int]]]:
    """`kubetrain run` of a job of two replicas that sleep until stopped (PIDFILE_SLEEP, pid files in
    `directory`/pids), attached in the background as on a user's terminal, entered once both replicas run: the
    run, the job's id (the only job of the test) and the replicas' pids by key. A run still going on the way
    out (the test failed first) is killed."""
    write(directory / "sleep.py", PIDFILE_SLEEP)
    pids = directory / "pids"
    run = spawn_cli("run", job_file(directory, generic(["sleep.py", str(pids)]), name))
    try:
        found = wait_pids(pids, 2)
        listed = wait_for("the job", lambda: cli("list", "-o", "name").stdout.split())
        assert len(listed) == 1, listed
        wait_phase(listed[0], JobPhase.RUNNING)
        yield run, listed[0], found
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
