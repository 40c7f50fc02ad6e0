"""The names a user picks from: backends, Kubernetes flavors, frameworks.

Written here, as plain tuples, so the CLI's parser offers them without importing the registries behind
them (`kubetrain --help` stays fast). Tests hold each tuple equal to its registry:
`backends.base.BACKENDS`, `backends.kubernetes.flavors.FLAVORS`. The frameworks' names are read from their
records (`contract.frameworks`) when first asked for: `import kubetrain`, which reads this module, and a
replica's `import kubetrain.metrics` load no dataclasses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

BACKENDS = ("local", "kubernetes")
DEFAULT_BACKEND = "local"
"""Where a job runs when no backend is named: this machine."""
BACKEND_ALIASES = {"k8s": "kubernetes"}
"""Other names a backend answers to (kubectl's habit of short names)."""

FLAVORS = ("job", "jobset", "volcano", "kubeflow")
DEFAULT_FLAVOR = "job"
"""The flavor `render` uses when none is given: needs nothing but Kubernetes."""

if TYPE_CHECKING:
    FRAMEWORKS: tuple[str, ...]
    """The frameworks' names, in the order of their records."""
else:

    def __getattr__(name: str) -> tuple[str, ...]:
        if name != "FRAMEWORKS":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from .frameworks import RECORDS

        globals()[name] = names = tuple(framework.value for framework in RECORDS)
        return names


__all__ = ["BACKENDS", "BACKEND_ALIASES", "DEFAULT_BACKEND", "DEFAULT_FLAVOR", "FLAVORS", "FRAMEWORKS"]
