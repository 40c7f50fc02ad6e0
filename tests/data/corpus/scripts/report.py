"""Stand-in for a training program that reads what its controller gives it: prints one line
`CORPUS {json}` with the environment variables named after --env (null when unset), the contents of the
files named after --file (null when missing) and the fieldRef-fed variables it was told to read.

    python report.py --env RANK WORLD_SIZE --file /etc/volcano/worker.host
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", nargs="*", default=[])
    parser.add_argument("--file", nargs="*", default=[])
    parser.add_argument("--tag", default=None, help="a word the report carries (which command ran it)")
    args = parser.parse_args()
    report: dict[str, object] = {name: os.environ.get(name) for name in args.env}
    for path in args.file:
        try:
            with open(path, encoding="utf-8") as handle:
                report[f"file:{os.path.basename(path)}"] = handle.read()
        except OSError:
            report[f"file:{os.path.basename(path)}"] = None
    if args.tag is not None:
        report["tag"] = args.tag
    sys.stdout.write("CORPUS " + json.dumps(report, sort_keys=True) + "\n")  # one write: ranks may share the pipe
    sys.stdout.flush()


if __name__ == "__main__":
    main()
