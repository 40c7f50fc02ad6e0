"""Print the TF_CONFIG this replica sees, as one line of JSON (keys sorted). Needs no TensorFlow.

Exits 1 when TF_CONFIG is missing or is not a JSON object, so a broken contract fails the job.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    raw = os.environ.get("TF_CONFIG")
    if raw is None:
        print("TF_CONFIG is not set", file=sys.stderr)
        return 1
    try:
        config = json.loads(raw)
    except ValueError as exc:
        print(f"TF_CONFIG is not JSON: {exc}: {raw!r}", file=sys.stderr)
        return 1
    if not isinstance(config, dict):
        print(f"TF_CONFIG is not a JSON object: {raw!r}", file=sys.stderr)
        return 1
    print(json.dumps(config, sort_keys=True, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
