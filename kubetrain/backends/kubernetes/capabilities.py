"""What the cluster serves: which flavors can run there, and which one to pick when none is named.

One request (``/apis``, the APIGroupList) tells which API groups and versions are served; a flavor needs
its group at the version kubetrain renders (each flavor's ``group``/``version``, :mod:`.flavors`). For
``kubeflow`` the kind matters too (a cluster may serve PyTorchJob but not JAXJob), which takes one more
request (``/apis/kubeflow.org/v1``), made only for that flavor (``Flavor.check_served``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...contract.labels import KUEUE_QUEUE_LABEL
from .client.errors import ApiError
from .client.kube import Kube
from .client.resources import KUEUE_GROUP, Resource
from .flavors import AUTO_ORDER, FLAVORS, Flavor, FlavorUnavailable, get_flavor
from .served import Served


@dataclass
class Capabilities(Served):
    """What the cluster serves (:class:`.served.Served`), read against every flavor: which can run here, which
    to pick."""

    def flavors(self) -> list[str]:
        """Flavors this cluster can run (those that need nothing installed always)."""
        return [name for name, f in FLAVORS.items() if f.missing(self) is None]

    def missing(self, flavor: str | Flavor) -> str | None:
        """Why ``flavor`` cannot run here, or None."""
        return get_flavor(flavor).missing(self)

    def pick(self, preferred: tuple[str, ...] = AUTO_ORDER) -> str:
        for flavor in preferred:
            if self.missing(flavor) is None:
                return flavor
        return next(name for name, f in FLAVORS.items() if f.install is None)

    def summary(self) -> dict[str, object]:
        return {"flavors": self.flavors(), "kueue": self.kueue_version}


def detect(kube: Kube) -> Capabilities:
    """One request: ``/apis``."""
    data = kube.api_groups()
    caps = Capabilities()
    for group in data.get("groups") or []:
        name = group.get("name")
        if not name:
            continue
        caps.groups[name] = [v.get("version") for v in group.get("versions") or [] if v.get("version")]
        pref = (group.get("preferredVersion") or {}).get("version")
        if pref:
            caps.preferred[name] = pref
    return caps


def check_queue(kube: Kube, caps: Capabilities, root: Mapping[str, Any], namespace: str) -> None:
    """A job for a Kueue LocalQueue (``scheduling.queue``): the cluster must serve Kueue, and the queue must
    exist in the job's namespace (else the job would wait forever). A queue kubetrain may not read is let be."""
    queue = ((root.get("metadata") or {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL)
    if queue and not caps.kueue:
        raise FlavorUnavailable(
            f"scheduling.queue {queue!r} is a Kueue LocalQueue, but this cluster does not serve Kueue "
            f"({KUEUE_GROUP}): install Kueue or remove scheduling.queue")
    if queue and caps.kueue_version:
        lq = Resource(KUEUE_GROUP, caps.kueue_version, "localqueues", "LocalQueue")
        ns = (root.get("metadata") or {}).get("namespace") or namespace
        try:
            found = kube.find(lq, queue, ns)
        except ApiError:
            found = {}  # not allowed to read queues: let Kueue tell
        if found is None:
            raise FlavorUnavailable(f"scheduling.queue: LocalQueue {queue} does not exist in namespace {ns}; "
                                    "the job would wait forever (kubectl get localqueues -n " + ns + ")")


__all__ = ["AUTO_ORDER", "Capabilities", "FlavorUnavailable", "check_queue", "detect"]
