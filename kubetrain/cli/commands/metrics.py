"""`kubetrain metrics`: what a job's training scripts logged with `kubetrain.metrics.log`.

The default view is a table: each metric's latest value, its step, who logged it and a sparkline of its curve
(per metric: the first rank's; `--per-rank`: a row per rank). `--watch` redraws it as samples arrive, from
the backend's own follow, until the job ends; where the output is not a terminal (a pipe, a CI log) it
prints the table again after each burst of samples instead, at most once a second. `-o csv|json` gives every
sample, for scripts; `--tensorboard DIR` writes them as TensorBoard event files.
"""

from __future__ import annotations

import argparse
import json
import math
import queue
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TextIO

from ...contract.errors import interrupted_status
from ...contract.pause import pause_point
from ...metrics.csv_rows import write_csv
from ...metrics.sample import MetricSample
from ...metrics.summary import display_name, format_value, series, sparkline
from ..options import add_backend, add_output, open_backend_for
from ..output import plural, say

EPILOG = """\
examples:
  kubetrain metrics 3f2a            latest value and a sparkline per metric
  kubetrain metrics 3f2a --watch    redrawn as the replicas log, until the job ends
  kubetrain metrics 3f2a --per-rank -o csv > metrics.csv
  kubetrain metrics 3f2a --tensorboard runs/3f2a && tensorboard --logdir runs

--watch on a terminal redraws the table in place; piped (not a terminal) it prints the whole table again
after each burst of new samples, at most once a second. Ctrl-C prints the latest table and exits 130.

-o json: JSON has no NaN or infinity, so a non-finite value is "value": null with "special": "nan", "inf"
or "-inf" ("special" is null beside a number). -o csv writes them as nan, inf, -inf.

--tensorboard DIR: a run folder per rank, each with one event file that exporting again replaces (no
duplicated points); values beyond float32 are written as +-inf, as TensorFlow does.

In a training script: import kubetrain.metrics; kubetrain.metrics.log(step=step, loss=loss, samples_per_s=rate)"""

SPARK_WIDTH = 24
REDRAW_EVERY = 0.1
"""Seconds `--watch` gathers arriving samples before it redraws on a terminal (a burst is drawn once)."""
REPRINT_EVERY = 1.0
"""Seconds between tables `--watch` prints when not on a terminal: a log gets a table per burst, not per
sample."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("job", metavar="ID", help="job id (locally, an unambiguous prefix will do)")
    p.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="redraw as samples arrive, until the job ends (not on a terminal: the table again per burst)",
    )
    p.add_argument("--per-rank", action="store_true", help="a row per metric and rank (default: the first rank's)")
    p.add_argument("--tensorboard", metavar="DIR", help="write TensorBoard event files under DIR (a run per rank)")
    add_output(p, ["table", "csv", "json"], "table")
    add_backend(p, "metrics")


def run(args: argparse.Namespace) -> int:
    with open_backend_for(args) as backend:
        if args.watch and args.output == "table" and not args.tensorboard:
            return watch(backend.metrics(args.job, follow=True), args.per_rank, sys.stdout)
        samples = list(backend.metrics(args.job, follow=args.watch))
    if args.tensorboard:
        from ...metrics.tensorboard import export

        if not samples:
            say(f"kubetrain: job {args.job} has logged no metrics: nothing to export, {args.tensorboard} left as is")
            return 0
        files = export(samples, args.tensorboard)  # an ExportError is `error: <path>: <cause>`, exit 1
        say(
            f"kubetrain: {plural(len(samples), 'sample')} in {plural(len(files), 'run')} under "
            f"{args.tensorboard}, replacing any earlier export of those runs (tensorboard --logdir "
            f"{args.tensorboard})"
        )
        return 0
    if args.output == "csv":
        # On a terminal a name's escape sequences would be commands to it (an OSC 52 writes the clipboard):
        # shown escaped there; into a file or a pipe, written whole.
        write_csv(samples, sys.stdout, escape=sys.stdout.isatty())
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
    """The latest value of each metric (of each rank with `per_rank`) and its sparkline; names escaped and cut
    to fit (`display_name`): csv and json give them whole."""
    rows = [("METRIC", "LATEST", "STEP", "SOURCE", "SAMPLES", "CURVE")]
    for one in series(samples, per_source=per_rank):
        last = one.latest
        rows.append(
            (
                display_name(one.name),
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


class _Arrivals:
    """The samples a follow yields, gathered by a thread of their own, so the command's thread can draw a
    burst at once and, on Ctrl-C, take what arrived but was not drawn yet."""

    def __init__(self, samples: Iterator[MetricSample]) -> None:
        self.queue: queue.Queue[MetricSample | None] = queue.Queue()
        self.failed: list[Exception] = []
        self.ended = False
        threading.Thread(target=self._pump, args=(samples,), name="kubetrain-metrics", daemon=True).start()

    def _pump(self, samples: Iterator[MetricSample]) -> None:
        try:
            for s in samples:
                self.queue.put(s)
        except Exception as exc:  # raised again in the command's own thread, by `batches`
            self.failed.append(exc)
        finally:
            self.queue.put(None)

    def batches(self, every: float) -> Iterator[list[MetricSample]]:
        """Samples in batches as they arrive, at most one batch per `every` seconds (a burst is drawn once, a
        lone sample at once)."""
        last = -math.inf
        while not self.ended:
            item = self.queue.get()
            batch: list[MetricSample] = []
            while item is not None:
                batch.append(item)
                left = last + every - time.monotonic()
                try:
                    item = self.queue.get(timeout=left) if left > 0 else self.queue.get_nowait()
                except queue.Empty:
                    break
            if item is None:
                self.ended = True
            if batch:
                yield batch
                last = time.monotonic()
        if self.failed:
            raise self.failed[0]

    def pending(self) -> list[MetricSample]:
        """What arrived and was not taken yet."""
        out: list[MetricSample] = []
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return out
            if item is not None:
                out.append(item)


def watch(samples: Iterator[MetricSample], per_rank: bool, out: TextIO) -> int:
    """The table as samples arrive: redrawn in place on a terminal; elsewhere printed again after each burst
    (at most once per `REPRINT_EVERY`), so a pipe or a log shows progress while the job runs. Ctrl-C shows
    the latest table (what arrived included) and returns 130 (143 after a SIGTERM)."""
    tty = out.isatty()
    seen: list[MetricSample] = []
    drawn = 0
    if tty:
        out.write("waiting for metrics (Ctrl-C to stop)\n")
        out.flush()
        drawn = 1

    def show() -> None:
        nonlocal drawn
        text = table(seen, per_rank) if seen else "no metrics"
        if tty:
            # Back to the first line drawn, clear to the end of the screen, draw again.
            out.write(f"\x1b[{drawn}F\x1b[J{text}\n")
            drawn = text.count("\n") + 1
        else:
            out.write(text + "\n\n")
        out.flush()

    arrivals = _Arrivals(samples)
    try:
        pause_point("metrics:watch")  # a test hook (env_names.PAUSE_AT): following, nothing shown yet
        for batch in arrivals.batches(REDRAW_EVERY if tty else REPRINT_EVERY):
            seen += batch
            show()
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (`cli.signals`): the same end, 130 or 143
        seen += arrivals.pending()
        show()
        return interrupted_status(exc)
    if not seen:
        show()
    return 0
