"""`python -m kubetrain.parity --markdown > docs/parity.md`: the parity table as Markdown;
`--counts`: rows per verdict and backend."""

from __future__ import annotations

import argparse
import sys

from .cells import BACKENDS, VERDICTS
from .markdown import counts, markdown


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kubetrain.parity", description=__doc__)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--markdown", action="store_true", help="docs/parity.md, on stdout")
    what.add_argument("--counts", action="store_true", help="rows per verdict and backend")
    args = p.parse_args(argv)
    if args.markdown:
        sys.stdout.write(markdown())
    else:
        table = counts()
        for backend in BACKENDS:
            print(f"{backend:<9}", "  ".join(f"{v} {table[backend][v]}" for v in VERDICTS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
