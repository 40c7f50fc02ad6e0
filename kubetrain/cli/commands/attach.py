"""`kubetrain attach`: a shell with one local replica's environment and working directory.

Local only: on Kubernetes the same is `kubectl exec` into the replica's pod (runMode Debug writes the held
program's start script there).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from ..errors import CliError
from ..output import say


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job", metavar="ID")
    p.add_argument("replica", nargs="?", help="replica key such as worker-0 (default: the first)")
    p.add_argument("--print", action="store_true", help="print the environment and command instead of a shell")


def run(args: argparse.Namespace) -> int:
    from ...backends.base import open_backend

    with open_backend() as backend:  # this machine's jobs: a cluster's replica is a pod (kubectl exec)
        found = backend.processes(args.job)
    procs = found.processes
    if not procs:
        raise CliError(f"job {found.job_id} has no replica processes")
    chosen = next((p for p in procs if p.key == args.replica), None) if args.replica else procs[0]
    if chosen is None:
        keys = ", ".join(p.key for p in procs)
        raise CliError(f"no replica {args.replica!r} in job {found.job_id}; replicas: {keys}")
    argv = [sys.executable if chosen.argv[0] == "python" else chosen.argv[0], *chosen.argv[1:]]
    command = shlex.join(argv)
    cwd = chosen.cwd or os.getcwd()  # the role's own folder
    if args.print:
        for name, value in sorted(chosen.env.items()):
            if name.isidentifier() and name.isascii():
                print(f"export {name}={shlex.quote(value)}")
            else:  # a name no shell can export (`my.var`): the program gets it; a shell only through env(1)
                print(f"# not a shell name, run the program with: env {shlex.quote(f'{name}={value}')} ...")
        print(f"cd {shlex.quote(cwd)}")
        print(command)
        return 0
    say(f"replica {chosen.key} of {found.job_id}: its environment is set; run its program with:\n  {command}")
    shell = os.environ.get("SHELL", "/bin/sh")
    os.chdir(cwd)
    os.execvpe(shell, [shell], {**os.environ, **chosen.env})
