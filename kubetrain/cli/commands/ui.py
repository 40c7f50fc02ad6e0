"""`kubetrain ui`: serve the web view of jobs (local, Kubernetes, or both at once) until Ctrl-C.

`--backend` may be given more than once: `--backend local --backend kubernetes -n team-a` shows this
machine's jobs and the namespace's in one table. Binds to 127.0.0.1. The page needs a token, printed once
at start in the address to open (as Jupyter's): other users of this machine reach 127.0.0.1 too, and the page
shows env values and can cancel jobs. Needs the optional extra `kubetrain[ui]` (Starlette, uvicorn).
"""

from __future__ import annotations

import argparse
import contextlib
import os

from ...contract.choices import BACKEND_ALIASES, BACKENDS
from ...contract.env_names import UI_TOKEN
from ..errors import CliError
from ..options import add_cluster, open_backend_for


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=8265, help="port to listen on (default: 8265)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1, this machine only)",
    )
    p.add_argument(
        "--token",
        default=os.environ.get(UI_TOKEN),
        help=f"the key to the page, instead of a fresh one per start (default: ${UI_TOKEN}); keep it private",
    )
    p.add_argument(
        "--backend",
        action="append",
        choices=[*BACKENDS, *BACKEND_ALIASES],
        help="whose jobs to show; repeat for several (default: local)",
    )
    add_cluster(p)


def run(args: argparse.Namespace) -> int:
    from ...backends.base import backend_name
    from ...ui import INSTALL_HINT, missing_dependencies

    missing = missing_dependencies()
    if missing:
        raise CliError(f"kubetrain ui needs {' and '.join(missing)}: {INSTALL_HINT}")
    if not 0 < args.port < 65536:
        raise CliError(f"--port {args.port}: give a port from 1 to 65535", code=2)
    names = list(dict.fromkeys(backend_name(b) for b in (args.backend or ["local"])))
    from ...ui.server import serve

    with contextlib.ExitStack() as stack:
        backends = []
        for name in names:
            one = argparse.Namespace(**{**vars(args), "backend": name})
            backends.append(stack.enter_context(open_backend_for(one)))
        return serve(backends, args.host, args.port, token=args.token)
