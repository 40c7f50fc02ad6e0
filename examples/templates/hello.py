"""Print who this replica is and what the templates gave it: `rank R of N: GREETING (log level L)`."""

from __future__ import annotations

import os
import sys


def main() -> int:
    rank, world = os.environ.get("RANK", "?"), os.environ.get("WORLD_SIZE", "?")
    greeting, level = os.environ.get("GREETING", ""), os.environ.get("LOG_LEVEL", "")
    print(f"rank {rank} of {world}: {greeting} (log level {level})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
