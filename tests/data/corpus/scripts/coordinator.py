"""Stand-in for `jax.distributed.initialize()` as the JAXJob examples call it: the coordinator's address,
the process count and this process's id read from the training operator's variables with int(), then every
process checks in at the coordinator (process 0 serves a TCP store there) and waits for all the others.
Reports `CORPUS {"process_id": i, "num_processes": n, "joined": n}`."""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta

from torch.distributed import TCPStore


def main() -> None:
    address = os.environ["COORDINATOR_ADDRESS"]
    port = int(os.environ["COORDINATOR_PORT"])
    count = int(os.environ["NUM_PROCESSES"])
    me = int(os.environ["PROCESS_ID"])
    store = TCPStore(address, port, count, is_master=me == 0, timeout=timedelta(seconds=120))
    store.add("joined", 1)
    store.set(f"seen-{me}", "1")
    store.wait([f"seen-{i}" for i in range(count)], timedelta(seconds=120))
    joined = int(store.add("joined", 0))
    sys.stdout.write("CORPUS " + json.dumps({"process_id": me, "num_processes": count, "joined": joined}) + "\n")
    sys.stdout.flush()
    # The coordinator's store must outlive the others' last read: process 0 leaves last.
    if me == 0:
        store.wait([f"left-{i}" for i in range(1, count)], timedelta(seconds=120))
    else:
        store.set(f"left-{me}", "1")


if __name__ == "__main__":
    main()
