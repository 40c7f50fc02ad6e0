"""A Run:ai TrainingWorkload's program: prints what the job gave each replica (index, count, env from the
workload and its template), then a few steps of work. Standard library only, so it runs anywhere."""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args(argv)
    index = os.environ.get("KUBETRAIN_REPLICA_INDEX")
    count = os.environ.get("KUBETRAIN_NUM_REPLICAS")
    print(f"replica {index}/{count} team={os.environ.get('TEAM')} greeting={os.environ.get('GREETING')}", flush=True)
    total = sum(step * step for step in range(args.steps))
    print(f"replica {index} done: {total}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
