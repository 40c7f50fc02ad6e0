"""The root of every error kubetrain raises for the user, and the exit statuses the CLI maps them to.

Each family (`SpecError`, `KubernetesError`, `LocalError`, `StoreError`, ...) subclasses
`KubetrainError`, so a caller catches one class, and the CLI prints any of them as `error: <message>`
with the family's `exit_code`, without importing the backend that raised it. Anything else that escapes
is a bug and keeps its traceback.
"""

from __future__ import annotations

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""128 + SIGINT: a command ended by Ctrl-C, as a shell reports it; SIGTERM gives 143 (`Interrupted.exit_status`)."""


class KubetrainError(Exception):
    """Something kubetrain cannot do, with a message for the user (no traceback needed)."""

    exit_code: int = EXIT_FAILED
    """The CLI's exit status: 1 (failed) unless the input was at fault (2)."""


class UsageError(KubetrainError, ValueError):
    """A bad argument: an unknown backend, flavor or framework, a malformed duration."""

    exit_code = EXIT_USAGE


class JobNotFound(KubetrainError, LookupError):
    """No job of that id or name where it was looked for. A `LookupError` on every backend (and in the web
    view), so a caller tells "gone" from "could not answer" by its type alone."""


class Interrupted(KeyboardInterrupt):
    """The CLI's SIGINT or SIGTERM (`cli.signals`), raised in the main thread wherever it is: a KeyboardInterrupt,
    so every path that ends a run on Ctrl-C (a local job not started yet is recorded Cancelled, a followed
    Kubernetes job is cancelled, `metrics --watch` prints its latest table) ends it on SIGTERM the same way,
    and the exit status says which signal it was."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """128 + the signal's number, as a shell reports a command a signal ended: 130 for SIGINT, 143 for
        SIGTERM."""
        return 128 + self.signum


def interrupted_status(exc: BaseException) -> int:
    """The exit status of a command ended by `exc`, a KeyboardInterrupt: the signal's (`Interrupted`), else 130
    (Python's own Ctrl-C)."""
    return exc.exit_status if isinstance(exc, Interrupted) else EXIT_INTERRUPTED


__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "Interrupted",
    "KubetrainError",
    "UsageError",
    "interrupted_status",
]
