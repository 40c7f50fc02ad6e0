"""A pytorch job's run.otherArgs are torchrun's, as the TrainJob documents them ("extra arguments for the
framework's launcher (torchrun, deepspeed, mpirun), before the program"), also with one process per replica and
no elastic block, where kubetrain needs no launcher: they were given to the Python interpreter."""

from __future__ import annotations

import json
from pathlib import Path

from kubetrain.status import JobPhase
from tests.support.helpers import make_job, no_process_left_behind, run_job, write  # noqa: F401 (autouse fixture)

TRAIN = """\
import json, os, sys
import torch.distributed as dist

dist.init_process_group("gloo")
with open(os.path.join(os.environ["OUT"], f"rank-{dist.get_rank()}.json"), "w") as f:
    json.dump({"world": dist.get_world_size(), "argv": sys.argv[1:]}, f)
dist.barrier()
dist.destroy_process_group()
"""


def test_other_args_go_to_torchrun_with_one_process_per_replica(tmp_path: Path) -> None:
    write(tmp_path / "train.py", TRAIN)
    out, logs = tmp_path / "out", tmp_path / "torchrun-logs"
    out.mkdir()
    job = make_job({"framework": "pytorch", "replicas": 2, "env": {"OUT": str(out)},
                    "run": {"python": ["train.py", "--steps", "3"], "otherArgs": ["--log-dir", str(logs)]}})
    status = run_job(job, tmp_path)
    assert status.phase is JobPhase.SUCCEEDED, status.summary_line()
    reports = [json.loads(p.read_text()) for p in sorted(out.glob("rank-*.json"))]
    assert reports == [{"world": 2, "argv": ["--steps", "3"]}] * 2  # the program saw only its own arguments
    assert any(logs.rglob("attempt_0")), "torchrun took --log-dir: its per-attempt folders are there"
