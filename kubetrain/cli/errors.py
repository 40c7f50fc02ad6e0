"""How the CLI reports problems: one clear message on stderr and an exit status, never a traceback for
bad input. An unexpected error (a bug) keeps its traceback, so it can be reported."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """A user-facing error: printed as `error: <message>`."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def run_handler(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    from ..backends.local.backend import LocalError
    from ..backends.local.store import StoreError
    from ..jobspec.errors import SpecError

    try:
        return handler(args)
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0
    except (StoreError, LocalError) as exc:  # unknown or ambiguous job ids, a job in the wrong phase
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:
        # The cluster backend's errors can only come from it once imported: importing it just to compare
        # would cost every local command ~0.4 s.
        cluster = sys.modules.get("kubetrain.backends.kubernetes.client")
        if cluster is not None and isinstance(exc, cluster.KubernetesError):
            print(f"error: {exc}", file=sys.stderr)
            return int(exc.exit_code)
        raise
