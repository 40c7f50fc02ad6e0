"""How the CLI reports problems: one clear message on stderr and an exit status, never a traceback for
bad input. An unexpected error (a bug) keeps its traceback, so it can be reported."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from ..contract.errors import EXIT_FAILED, KubetrainError, interrupted_status


class CliError(KubetrainError):
    """A user-facing error of the CLI itself: printed as `error: <message>`."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.exit_code = code


def run_handler(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a verb: any `KubetrainError` becomes `error: <message>` and its exit code."""
    try:
        return handler(args)
    except KubetrainError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM (`cli.signals`): 130 or 143, no traceback
        return interrupted_status(exc)
    except BrokenPipeError:
        return 0
