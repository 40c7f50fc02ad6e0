"""`kubetrain` entry point: parses the verb, imports only that verb's module, runs it.

The top-level parser lists every verb from `cli.registry` without importing any of them, so
`kubetrain --help` pays for no verb, no pydantic, no Kubernetes client and no framework; `kubetrain VERB
...` imports `kubetrain.cli.commands.<module>`, whose `add_arguments` declares the verb's options.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from .registry import COMMANDS

EPILOG = """\
examples:
  kubetrain run examples/pytorch-ddp/job.yaml          run a job here, output attached
  kubetrain run --framework pytorch --replicas 2 -- python train.py --steps 20
  kubetrain list                                      jobs of this machine
  kubetrain logs demo-x7k2q -f --role worker          follow one role's output
  kubetrain validate job.yaml                         check a spec, with file:line errors
  kubetrain explain spec.resources                    what a field means
  kubetrain render job.yaml --flavor jobset           Kubernetes manifests (dry run)
  kubetrain list --backend k8s -n team-a              the same verbs on a cluster
"""


def command_module(verb: str) -> ModuleType:
    return importlib.import_module(f"kubetrain.cli.commands.{COMMANDS[verb].module}")


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The parser, with the arguments of `verb` (only its module is imported) when one is given."""
    parser = argparse.ArgumentParser(
        prog="kubetrain",
        description="Define, launch, watch and manage distributed training jobs: local processes or Kubernetes.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="verb", metavar="COMMAND")
    for name, command in COMMANDS.items():
        p = sub.add_parser(name, help=command.summary, description=command.summary)
        if name == verb:
            command_module(name).add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None, *, own_process: bool = False) -> int:
    """Run one verb; ``own_process``: this process is kubetrain's own and ends when it returns (`command`)."""
    from ..contract.errors import interrupted_status
    from ..contract.pause import pause_point
    from .signals import interruptible

    # SIGINT and SIGTERM raise `Interrupted` from here on, whatever the verb is doing (`cli.signals`).
    with interruptible():
        try:
            pause_point("cli:start")
            return _main(argv, own_process)
        except KeyboardInterrupt as exc:  # before a verb ran (parsing, importing it): nothing to end
            return interrupted_status(exc)


def _main(argv: Sequence[str] | None, own_process: bool = False) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["__complete"]:  # the completion scripts' question (`cli.completion`), not a verb
        from .completion import complete

        return complete(args_list[1:])
    # Everything after `--` is the program of `kubetrain run`'s quick form, taken verbatim.
    command: list[str] = []
    if "--" in args_list:
        cut = args_list.index("--")
        args_list, command = args_list[:cut], args_list[cut + 1 :]
    # A bare --dry-run means client (kubectl's default), so the job file after it stays the file.
    args_list = ["--dry-run=client" if a == "--dry-run" else a for a in args_list]
    verb = next((a for a in args_list if not a.startswith("-")), None)
    if verb not in COMMANDS or not COMMANDS[verb].brief:
        return _run(args_list, command, verb)
    # A brief verb holds what it reads until it prints (a thousand pods are ~100,000 dicts and lists, none of
    # them in a reference cycle): the cyclic collector would scan them again and again for nothing, a sixth of
    # `status`'s time at 1,000 replicas. Reference counting still frees everything as usual.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(args_list, command, verb)
    finally:
        if own_process:
            gc.freeze()  # the process ends now: its last collection need not scan what the verb leaves either
        elif was_enabled:
            gc.enable()  # a program calling `main` gets its collector back


def _run(args_list: list[str], command: list[str], verb: str | None) -> int:
    """Parse the arguments of ``verb`` and run it."""
    parser = build_parser(verb if verb in COMMANDS else None)
    args = parser.parse_args(args_list)
    if command and args.verb != "run":
        parser.error("a program after -- is only taken by `kubetrain run`")
    args.command = command
    if args.version:
        args.verb = "version"
    if not args.verb:
        parser.print_help()
        return 2
    from .errors import run_handler

    return run_handler(command_module(args.verb).run, args)


def command() -> int:
    """The `kubetrain` command itself (its console script, `python -m kubetrain.cli.main`): `main` in a process
    that is kubetrain's own, so a job it runs attached may adopt the job's orphans (`contract.ownership`).
    A program (or a test) that calls `main` in its own process does not claim it."""
    from ..contract.ownership import claim_process

    claim_process()
    return main(own_process=True)


if __name__ == "__main__":
    sys.exit(command())
