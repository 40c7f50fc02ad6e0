"""`kubetrain metrics`: what a job's training scripts logged with `kubetrain.metrics.log`.

The default view is a table: each metric's latest value, its step, who logged it and a sparkline of its curve
(per metric: the first rank's; `--per-rank`: a row per rank). `--watch` redraws it as samples arrive, from
the backend's own follow, until the job ends. `-o csv|json` gives every sample, for scripts;
`--tensorboard DIR` writes them as TensorBoard event files.
"""

from __future__ import annotations

import argparse
import csv
import json
import queue
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TextIO

from ...metrics.sample import MetricSample
from ...metrics.summary import format_value, series, sparkline
from ..options import add_backend, add_output, open_backend_for
from ..output import say

EPILOG = """\
examples:
  kubetrain metrics 3f2a            latest value and a sparkline per metric
  kubetrain metrics 3f2a --watch    redrawn as the replicas log, until the job ends
  kubetrain metrics 3f2a --per-rank -o csv > metrics.csv
  kubetrain metrics 3f2a --tensorboard runs/3f2a && tensorboard --logdir runs

In a training script: import kubetrain.metrics; kubetrain.metrics.log(step=step, loss=loss, samples_per_s=rate)"""

SPARK_WIDTH = 24
REDRAW_EVERY = 0.1
"""Seconds `--watch` gathers arriving samples before it redraws (a burst is drawn once)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("job", metavar="ID", help="job id (locally, an unambiguous prefix will do)")
    p.add_argument("-w", "--watch", action="store_true", help="redraw as samples arrive, until the job ends")
    p.add_argument("--per-rank", action="store_true", help="a row per metric and rank (default: the first rank's)")
    p.add_argument("--tensorboard", metavar="DIR", help="write TensorBoard event files under DIR (a run per rank)")
    add_output(p, ["table", "csv", "json"], "table")
    add_backend(p)


def run(args: argparse.Namespace) -> int:
    with open_backend_for(args) as backend:
        if args.watch and args.output == "table" and not args.tensorboard:
            return watch(backend.metrics(args.job, follow=True), args.per_rank, sys.stdout)
        samples = list(backend.metrics(args.job, follow=args.watch))
    if args.tensorboard:
        from ...metrics.tensorboard import export

        files = export(samples, args.tensorboard)
        say(
            f"kubetrain: {len(samples)} samples in {len(files)} run{'s' if len(files) != 1 else ''} under "
            f"{args.tensorboard} (tensorboard --logdir {args.tensorboard})"
        )
        return 0
    if args.output == "csv":
        write_csv(samples, sys.stdout)
    elif args.output == "json":
        json.dump([s.to_dict() for s in samples], sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif not samples:
        say(
            f"kubetrain: job {args.job} has logged no metrics (in the script: kubetrain.metrics.log(step=..., "
            "loss=...))"
        )
    else:
        print(table(samples, args.per_rank))
    return 0


def table(samples: Iterable[MetricSample], per_rank: bool = False) -> str:
    """The latest value of each metric (of each rank with `per_rank`) and its sparkline."""
    rows = [("METRIC", "LATEST", "STEP", "SOURCE", "SAMPLES", "CURVE")]
    for one in series(samples, per_source=per_rank):
        last = one.latest
        rows.append(
            (
                one.name,
                format_value(last.value),
                "" if last.step is None else str(last.step),
                one.source,
                str(len(one.samples)),
                sparkline(one.values, SPARK_WIDTH),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1] for row in rows
    )


def write_csv(samples: Iterable[MetricSample], out: TextIO) -> None:
    """Every sample as a row: time, step, name, value, role, index, rank."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["time", "step", "name", "value", "role", "index", "rank"])
    for s in samples:
        writer.writerow(
            [
                f"{s.time:.6f}",
                "" if s.step is None else s.step,
                s.name,
                repr(s.value),
                s.role or "",
                "" if s.index is None else s.index,
                "" if s.rank is None else s.rank,
            ]
        )


def _batches(samples: Iterator[MetricSample]) -> Iterator[list[MetricSample]]:
    """Samples in batches as they arrive, at most one batch per `REDRAW_EVERY` seconds (a burst is drawn once,
    a lone sample at once)."""
    arrived: queue.Queue[MetricSample | None] = queue.Queue()
    failed: list[Exception] = []

    def pump() -> None:
        try:
            for s in samples:
                arrived.put(s)
        except Exception as exc:  # raised again below, in the command's own thread
            failed.append(exc)
        finally:
            arrived.put(None)

    threading.Thread(target=pump, name="kubetrain-metrics", daemon=True).start()
    last = 0.0
    while True:
        item = arrived.get()
        batch: list[MetricSample] = []
        while item is not None:
            batch.append(item)
            left = last + REDRAW_EVERY - time.monotonic()
            try:
                item = arrived.get(timeout=left) if left > 0 else arrived.get_nowait()
            except queue.Empty:
                break
        if batch:
            yield batch
            last = time.monotonic()
        if item is None:
            if failed:
                raise failed[0]
            return


def watch(samples: Iterator[MetricSample], per_rank: bool, out: TextIO) -> int:
    """The table, redrawn in place on a terminal as samples arrive; elsewhere printed once, at the job's end."""
    tty = out.isatty()
    seen: list[MetricSample] = []
    drawn = 0
    if tty:
        out.write("waiting for metrics (Ctrl-C to stop)\n")
        out.flush()
        drawn = 1
    try:
        for batch in _batches(samples):
            seen += batch
            if tty:
                text = table(seen, per_rank)
                # Back to the first line drawn, clear to the end of the screen, draw again.
                out.write(f"\x1b[{drawn}F\x1b[J{text}\n")
                out.flush()
                drawn = text.count("\n") + 1
    except KeyboardInterrupt:
        return 130
    if not tty:
        out.write((table(seen, per_rank) if seen else "no metrics") + "\n")
    return 0
