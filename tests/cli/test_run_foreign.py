"""`kubetrain run FOREIGN.yaml` end to end, as a user runs it: a DeepSpeedJob and a Kubeflow PyTorchJob run as
written, two real replicas over torch.distributed (gloo) that succeed, the conversion's notes on stderr with the
file and line of the field each is about."""

from __future__ import annotations

import re
from pathlib import Path

from kubetrain.status import JobPhase, ReplicaPhase
from tests.support.helpers import EXAMPLES, cli, local_backend, no_traceback

FOREIGN = EXAMPLES / "foreign"
TRAIN_DDP = EXAMPLES / "pytorch-ddp" / "train.py"

# A PyTorchJob as the training operator's users write one, with fields kubetrain cannot carry over as they are:
# each must be named on stderr, with its line, while the job still runs.
PYTORCHJOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: ddp-foreign
spec:
  runPolicy:
    managedBy: kubeflow.org/training-operator
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
              command: [python, {train}]
              args: [--steps, "3"]
    Worker:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
              command: [python, {train}]
              args: [--steps, "3"]
status:
  conditions: []
"""


def checksums(text: str) -> dict[int, str]:
    """Rank -> the parameters' checksum each replica printed last: equal when the allreduce kept them in step."""
    found = re.findall(r"final-params-checksum (\d+) (\S+)", text)
    return {int(rank): value for rank, value in found}


def succeeded_with_two_replicas(job_id: str) -> None:
    with local_backend() as backend:
        status = backend.status(job_id)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    assert [(r.phase, r.exit_code) for r in status.replicas] == [(ReplicaPhase.SUCCEEDED, 0)] * 2


def test_a_deepspeedjob_from_the_examples_runs_as_written() -> None:
    path = FOREIGN / "deepspeedjob.yaml"
    done = cli("run", path, timeout=300)
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    # Two workers, one torch.distributed world; the template's env reached them.
    sums = checksums(done.stdout)
    assert sorted(sums) == [0, 1] and sums[0] == sums[1], done.stdout
    assert done.stdout.count("env DS_EXAMPLE=from-the-template") == 2
    # What a local run cannot honour is said, not dropped: the container image and the resources.
    assert "not used locally" in done.stderr and "spec.image" in done.stderr
    (job_id,) = re.findall(r"job (bert-ds-\w+) succeeded", done.stderr)
    succeeded_with_two_replicas(job_id)


def test_a_pytorchjob_runs_with_the_conversions_notes_on_stderr(tmp_path: Path) -> None:
    path = tmp_path / "pytorchjob.yaml"
    path.write_text(PYTORCHJOB.format(train=TRAIN_DDP))
    done = cli("run", path, timeout=300)
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    sums = checksums(done.stdout)
    assert sorted(sums) == [0, 1] and sums[0] == sums[1], done.stdout
    # Each note names the file, the line and the foreign field, in the order of the file, before the job starts.
    lines = path.read_text().splitlines()
    managed_by = next(n for n, line in enumerate(lines, 1) if "managedBy:" in line)
    status = lines.index("status:") + 1
    notes = [line for line in done.stderr.splitlines() if line.startswith(f"warning: {path}:")]
    assert [note.split(": ")[1:3] for note in notes] == [
        [f"{path}:{managed_by}", "PyTorchJob spec.runPolicy.managedBy"],
        [f"{path}:{status}", "PyTorchJob status"],
    ], done.stderr
    started = done.stderr.index("2 processes (master×1, worker×1)")
    assert all(done.stderr.index(note) < started for note in notes)
    (job_id,) = re.findall(r"job (ddp-foreign-\w+) succeeded", done.stderr)
    succeeded_with_two_replicas(job_id)
