"""The names a user picks from: backends, Kubernetes flavors, frameworks.

Written here, as plain tuples, so the CLI's parser offers them without importing the registries behind
them (`kubetrain --help` stays fast). Tests hold each tuple equal to its registry:
`backends.base.BACKENDS`, `backends.kubernetes.flavors.FLAVORS`. The frameworks' registry is itself here, in
`contract.frameworks` (standard library only), and their names are read from it.
"""

from __future__ import annotations

from .frameworks import RECORDS

BACKENDS = ("local", "kubernetes")
DEFAULT_BACKEND = "local"
"""Where a job runs when no backend is named: this machine."""
BACKEND_ALIASES = {"k8s": "kubernetes"}
"""Other names a backend answers to (kubectl's habit of short names)."""

FLAVORS = ("job", "jobset", "volcano", "kubeflow")
DEFAULT_FLAVOR = "job"
"""The flavor `render` uses when none is given: needs nothing but Kubernetes."""

FRAMEWORKS = tuple(name.value for name in RECORDS)

__all__ = ["BACKENDS", "BACKEND_ALIASES", "DEFAULT_BACKEND", "DEFAULT_FLAVOR", "FLAVORS", "FRAMEWORKS"]
