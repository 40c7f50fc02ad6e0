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


class KubetrainError(Exception):
    """Something kubetrain cannot do, with a message for the user (no traceback needed)."""

    exit_code: int = EXIT_FAILED
    """The CLI's exit status: 1 (failed) unless the input was at fault (2)."""


class UsageError(KubetrainError, ValueError):
    """A bad argument: an unknown backend, flavor or framework, a malformed duration."""

    exit_code = EXIT_USAGE


__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_USAGE", "KubetrainError", "UsageError"]
