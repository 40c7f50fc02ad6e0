"""A small, dict-based layer over the official ``kubernetes`` client, one module per concern (in the manner of
kopf's ``_cogs/clients``): :mod:`.errors`, :mod:`.resources` (where kinds live), :mod:`.retry`,
:mod:`.config` (kubeconfig, in-cluster), :mod:`.transport` (one request), :mod:`.verbs` (get, create,
patch, delete, list), :mod:`.streams` (watch, pod logs), :mod:`.discovery`, and :mod:`.kube`, the client
that composes them. Import from the module; the names most callers use are re-exported here.

Nothing here imports the ``kubernetes`` package until a connection is made or a stream opened.
"""

from __future__ import annotations

from .config import connect
from .errors import ApiError, KubernetesError
from .kube import Kube
from .resources import PODS, Resource
from .retry import RetryPolicy
from .transport import JSON

__all__ = ["JSON", "PODS", "ApiError", "Kube", "KubernetesError", "Resource", "RetryPolicy", "connect"]
