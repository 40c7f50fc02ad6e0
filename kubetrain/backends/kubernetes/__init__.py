"""Kubernetes backend: render a job to manifests for a flavor (job, jobset, volcano, kubeflow) and drive them
through the API.

Importing this package costs nothing: the names below are imported on first use (the backend pulls in the
``kubernetes`` client when it connects; render pulls in pydantic and the planner).

- ``KubernetesBackend`` (:mod:`.backend`): the `kubetrain.backends.base.Backend` on a cluster;
- ``FLAVORS`` (:mod:`.flavors`): the one list of flavors;
- ``render_manifests``, ``Rendered`` (:mod:`.render`): the render's one entry point and what it gives.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import KubernetesBackend
    from .client.errors import KubernetesError
    from .flavors import FLAVORS
    from .render import Rendered, render_manifests

_EXPORTS = {
    "KubernetesBackend": "backend",
    "KubernetesError": "client.errors",
    "FLAVORS": "flavors",
    "Rendered": "render",
    "render_manifests": "render",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["FLAVORS", "KubernetesBackend", "KubernetesError", "Rendered", "render_manifests"]
