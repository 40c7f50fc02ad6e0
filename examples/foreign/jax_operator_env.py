"""A JAXJob replica's program, runnable here without jax: it reads the variables the Kubeflow training operator
gives every JAXJob replica — COORDINATOR_ADDRESS and COORDINATOR_PORT (worker 0), NUM_PROCESSES, PROCESS_ID —
as `jax.distributed.initialize(coordinator_address=f"{addr}:{port}", num_processes=int(...),
process_id=int(...))` would, and prints them as one line of JSON. Exits 1 when one is missing.
"""

from __future__ import annotations

import json
import os
import sys

REQUIRED = ("COORDINATOR_ADDRESS", "COORDINATOR_PORT", "NUM_PROCESSES", "PROCESS_ID")


def main() -> int:
    missing = [k for k in REQUIRED if k not in os.environ]
    if missing:
        print(f"missing: {', '.join(missing)}", file=sys.stderr)
        return 1
    seen = {
        "coordinator_address": f"{os.environ['COORDINATOR_ADDRESS']}:{int(os.environ['COORDINATOR_PORT'])}",
        "num_processes": int(os.environ["NUM_PROCESSES"]),
        "process_id": int(os.environ["PROCESS_ID"]),
    }
    print(json.dumps(seen, sort_keys=True, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
