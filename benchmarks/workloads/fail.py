"""Rank 1 exits 1 two seconds after init (writing the time it does so); the others wait."""

import os
import sys
import time

import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    time.sleep(2)
    with open(os.environ["FAIL_STAMP"], "w") as f:
        f.write(repr(time.time()))
    sys.exit(1)
time.sleep(120)
