"""What the local backend says when it cannot do what was asked, and when this machine cannot run a job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...contract.errors import EXIT_USAGE, KubetrainError

if TYPE_CHECKING:
    from ...jobspec import FieldError


class LocalError(KubetrainError):
    """A request the local backend cannot carry out, with a message for the user."""


class DeletedWhileFollowed(LocalError, LookupError):
    """The job followed by `logs -f`, `metrics --watch` or a page was deleted meanwhile: by `delete`, or by
    its runPolicy.ttlSecondsAfterFinished once it had finished (a sweep of any kubetrain call on this
    machine). Both followers end with it, saying which, where they said only "no job" before."""


class LocalRefusal(LocalError):
    """A job this machine cannot run as written, refused before anything is created: every problem with its
    field path (`errors`, as a `SpecError`'s, and the same exit status as the Kubernetes render's refusals)."""

    exit_code = EXIT_USAGE

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = list(errors)
        if len(self.errors) == 1:
            text = str(self.errors[0])
        else:
            text = "\n".join([f"{len(self.errors)} problems:", *("  " + str(e).replace("\n", "\n  ") for e in errors)])
        super().__init__(text)

    @property
    def paths(self) -> list[str]:
        from ...jobspec import format_path

        return [format_path(e.path) for e in self.errors]
