"""`kubetrain ui`: serve the web view of jobs (local, Kubernetes, or both at once) until Ctrl-C.

`--backend` may be given more than once: `--backend local --backend kubernetes -n team-a` shows this
machine's jobs and the namespace's in one table. Binds to 127.0.0.1. The page needs a token, printed once
at start in the address to open (as Jupyter's): other users of this machine reach 127.0.0.1 too, and the page
shows env values and can cancel jobs. Needs the optional extra `kubetrain[ui]`: the pages are Starlette
routes with Jinja2 templates, served by uvicorn (its h11 protocol, bounded: `ui/connections.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from ...contract.choices import DEFAULT_BACKEND
from ...contract.env_names import UI_TOKEN
from ...ui.connections import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_LOG_READERS,
    DEFAULT_LOG_VIEWERS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_METRIC_NAMES,
    DEFAULT_METRIC_SAMPLES,
    LOG_BATCH_LINES,
    LOG_BUFFER_BYTES,
    LOG_BUFFER_LINES,
)
from ..errors import CliError
from ..options import add_backend, backend_options

EPILOG = f"""\
the key to the page:
  The address printed at start carries a token after '#' (http://127.0.0.1:8265/#token=...): the browser
  keeps that part to itself, the page keeps the token for this address and sends it with every request.
  Scripts send it as 'Authorization: Bearer <token>'. A fresh token is made at each start; to keep one
  across restarts (open pages keep working after one), give it as a file or in the environment, where other
  users cannot see it:
    python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > ~/.kubetrain-ui-token
    chmod 600 ~/.kubetrain-ui-token
    kubetrain ui --token-file ~/.kubetrain-ui-token
  Where it is taken from: --token-file, else --token, else ${UI_TOKEN}, else a fresh one. A token has at
  least 32 characters of A-Z a-z 0-9 - _. --token works too, but every user of this machine can read a
  command's arguments (ps, /proc): it is said with a warning.

limits (anyone who can connect meets them, token or not; see docs/ui.md):
  --idle-timeout: a connection that has not sent a whole request head that many seconds after it opened, or
  after its previous response, is closed (a byte now and then does not count).
  --max-connections: at most that many at once, and never more than half of the open files left after 256
  (the open-file limit is raised to its hard limit at start where allowed). Over it, the connection idle
  longest is closed; when all of them are busy, a new one is answered 503.
  --max-log-viewers: at most that many pages have a job's log open at once (each holds a reader thread and
  a buffer); the next ones show the job's status and plots at once and their log when one of those is
  closed or has read its log to the end (the page says it waits).
  --log-readers: of those, at most that many threads read at once, taking turns by {LOG_BATCH_LINES:,} lines,
  so many pages on a big log each get their first lines soon and the server still answers; a reader waiting
  at the end of a running job's output takes no turn.
  A log's stream holds at most {LOG_BUFFER_LINES:,} lines or {LOG_BUFFER_BYTES >> 20} MiB for its page
  (fixed): past that it reads on once the page has taken some, so a slow page costs that much and no more,
  and no line is left out.
  The page's grep (fixed): 1 s of search per line; an expression whose repeats would expand past 100,000
  pieces when compiled, or nests groups over 50 deep, is refused before it is compiled, saying what to change.

served by: uvicorn (h11) with Starlette routes and Jinja2 templates, on one process and one event loop; the
backends' calls and the logs' readers run on threads.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--port", type=int, default=8265, help="port to listen on (default: 8265)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1, this machine only)",
    )
    p.add_argument(
        "--token-file",
        metavar="PATH",
        type=Path,
        help="read the key to the page from PATH's first line, so it stays the same across restarts "
        f"(default: ${UI_TOKEN}, else a fresh one per start); keep the file private (chmod 600)",
    )
    p.add_argument(
        "--token",
        help="the key itself; visible to every user of this machine in the process list: prefer --token-file",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help=f"connections at once, at most (default: {DEFAULT_MAX_CONNECTIONS}, lowered to half of the open "
        "files left after 256)",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        metavar="SECONDS",
        default=DEFAULT_IDLE_TIMEOUT,
        help=f"close a connection that sends no whole request within SECONDS (default: {DEFAULT_IDLE_TIMEOUT:g})",
    )
    p.add_argument(
        "--max-log-viewers",
        type=int,
        metavar="N",
        default=DEFAULT_LOG_VIEWERS,
        help="pages with a job's log open at once, at most; the next ones wait their turn "
        f"(default: {DEFAULT_LOG_VIEWERS})",
    )
    p.add_argument(
        "--log-readers",
        type=int,
        metavar="N",
        default=DEFAULT_LOG_READERS,
        help=f"threads reading logs at once, in turns (default: {DEFAULT_LOG_READERS})",
    )
    p.add_argument(
        "--max-metric-names",
        type=int,
        metavar="N",
        default=DEFAULT_METRIC_NAMES,
        help=f"metric names kept per job; further ones are counted, not plotted (default: {DEFAULT_METRIC_NAMES:,})",
    )
    p.add_argument(
        "--max-metric-samples",
        type=int,
        metavar="N",
        default=DEFAULT_METRIC_SAMPLES,
        help="samples held per job over all its metrics; past it the longest series are thinned evenly "
        f"(default: {DEFAULT_METRIC_SAMPLES:,}, about 100 MB)",
    )
    add_backend(p, "ui", help_text=f"whose jobs to show; repeat for several (default: {DEFAULT_BACKEND})", several=True)


def chosen_token(args: argparse.Namespace) -> str | None:
    """The token the user gives (checked: `BadToken` says what is wrong), or None for a fresh one.

    Flags before the environment, as everywhere: `--token-file`, else `--token`, else `$KUBETRAIN_UI_TOKEN`.
    Both flags at once is a mistake, not a choice to make for the user."""
    from ...ui.security import check_token, read_token_file

    if args.token_file is not None and args.token is not None:
        raise CliError("give the token once: --token-file or --token, not both", code=2)
    if args.token_file is not None:
        token, warning = read_token_file(args.token_file.expanduser())
        if warning:
            print(warning, file=sys.stderr, flush=True)
        return token
    if args.token is not None:
        print(
            "warning: --token is visible to every user of this machine in the process list (ps, /proc/PID/cmdline);"
            f" give it with --token-file PATH or ${UI_TOKEN} instead",
            file=sys.stderr,
            flush=True,
        )
        return check_token(args.token, "--token")
    from_env = os.environ.get(UI_TOKEN)
    if from_env:
        return check_token(from_env, f"${UI_TOKEN}")
    return None


def run(args: argparse.Namespace) -> int:
    from ...backends.base import backend_name, open_backend
    from ...ui import INSTALL_HINT, missing_dependencies

    missing = missing_dependencies()
    if missing:
        raise CliError(f"kubetrain ui needs {' and '.join(missing)}: {INSTALL_HINT}")
    if not 0 < args.port < 65536:
        raise CliError(f"--port {args.port}: give a port from 1 to 65535", code=2)
    if args.max_connections is not None and args.max_connections < 1:
        raise CliError(f"--max-connections {args.max_connections}: give a number from 1", code=2)
    if args.max_log_viewers < 1:
        raise CliError(f"--max-log-viewers {args.max_log_viewers}: give a number from 1", code=2)
    if args.log_readers < 1:
        raise CliError(f"--log-readers {args.log_readers}: give a number from 1", code=2)
    metric_bounds = (("--max-metric-names", args.max_metric_names), ("--max-metric-samples", args.max_metric_samples))
    for flag, value in metric_bounds:
        if value < 1:
            raise CliError(f"{flag} {value}: give a number from 1", code=2)
    if not 0 < args.idle_timeout < 86400:
        raise CliError(f"--idle-timeout {args.idle_timeout:g}: give seconds above 0 and below a day", code=2)
    token = chosen_token(args)
    names = list(dict.fromkeys(backend_name(b) for b in (args.backend or [DEFAULT_BACKEND])))
    from ...ui.metrics_tracker import MetricLimits
    from ...ui.server import serve

    with contextlib.ExitStack() as stack:
        backends = [stack.enter_context(open_backend(backend_options(args, name))) for name in names]
        return serve(
            backends,
            args.host,
            args.port,
            token=token,
            max_connections=args.max_connections,
            idle_timeout=args.idle_timeout,
            log_viewers=args.max_log_viewers,
            log_readers=args.log_readers,
            metric_limits=MetricLimits(args.max_metric_names, args.max_metric_samples),
        )
