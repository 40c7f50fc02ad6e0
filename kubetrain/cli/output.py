"""Printing data the way kubectl does: `-o yaml|json`."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

# json and datetime are imported where used: every verb imports this module, and they cost `--help` ~4 ms.
if TYPE_CHECKING:
    from datetime import timedelta

    from ..contract.logs import LogRecord
    from ..status import JobStatus
    from ..terminal import OutputSink


def dump(data: Any, fmt: str) -> str:
    if fmt == "json":
        import json

        return json.dumps(data, indent=2, sort_keys=False) + "\n"
    import yaml

    return str(yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=120))


def emit(data: Any, fmt: str) -> None:
    sys.stdout.write(dump(data, fmt))


def say(text: str, *, quiet: bool = False) -> None:
    """kubetrain's own messages go to stderr, so stdout carries only the replicas' output."""
    if not quiet:
        print(text, file=sys.stderr, flush=True)


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 replica`, `2 replicas`."""
    return f"{count} {noun if count == 1 else (nouns or noun + 's')}"


def print_jobs(jobs: Sequence[JobStatus], fmt: str | None) -> None:
    """`kubetrain list` for any backend: a kubectl-style table, `-o wide|json|yaml|name`."""
    from ..status_text import format_table

    if fmt in ("json", "yaml"):
        emit({"items": [j.to_dict() for j in jobs]}, fmt)
    elif fmt == "name":
        for j in jobs:
            print(j.job_id)
    else:
        print(format_table(list(jobs), wide=fmt == "wide"))


def log_filters(args: argparse.Namespace) -> tuple[timedelta | None, re.Pattern[str] | None]:
    """`--since` and `--grep` of `kubetrain logs`, checked."""
    from ..contract.errors import EXIT_USAGE
    from ..contract.grep_bounds import GrepRefused, check_nesting
    from ..contract.logs import parse_duration
    from .errors import CliError

    since = parse_duration(args.since) if args.since else None
    if not args.grep:
        return since, None
    shown = args.grep if len(args.grep) <= 60 else args.grep[:57] + "..."
    # `re` keeps a repeat's count as a count (no gigabytes from `a{4294967294}`, unlike the web view's `regex`),
    # but recurses per group: hundreds of nested groups would end in a RecursionError.
    try:
        check_nesting(args.grep)
        grep = re.compile(args.grep)
    except GrepRefused as exc:
        raise CliError(f"--grep {shown!r}: {exc}", EXIT_USAGE) from None
    except re.error as exc:
        raise CliError(f"--grep {shown!r}: {exc}", EXIT_USAGE) from None
    return since, grep


def print_records(records: Iterable[LogRecord], args: argparse.Namespace, sink: OutputSink) -> None:
    """Log records as `kubetrain logs` shows them on every backend: prefixed, or bare with --no-prefix.
    `--timestamps` as kubectl's, RFC 3339 with nanoseconds: a time copied from it into `--until` or `--since`
    falls exactly on its line."""
    from ..contract.logs import format_timestamp

    for rec in records:
        text = f"{format_timestamp(rec.time_ns).decode()} {rec.text}" if args.timestamps else rec.text
        if args.no_prefix:
            if not sink.raw:
                from ..terminal import sanitize

                text = sanitize(text)
            (sys.stderr if rec.stream == "stderr" else sys.stdout).write(text + "\n")
        else:
            sink.line(rec.key, rec.stream, text)
            sink.flush()
    sink.flush()
