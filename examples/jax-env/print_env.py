"""Print the JAX env contract this replica sees, as one line of JSON (keys sorted). Needs no JAX.

Keys: JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID and every KUBETRAIN_* variable.
Exits 1 when one of the JAX variables is missing.
"""

from __future__ import annotations

import json
import os
import sys

REQUIRED = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")


def main() -> int:
    seen = {k: v for k, v in os.environ.items() if k in REQUIRED or k.startswith(("JAX_", "KUBETRAIN_"))}
    print(json.dumps(seen, sort_keys=True, separators=(",", ":")), flush=True)
    missing = [k for k in REQUIRED if k not in os.environ]
    if missing:
        print(f"missing: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
