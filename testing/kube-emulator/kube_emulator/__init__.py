"""A stateful Kubernetes API emulator for tests: a real HTTP server the official client talks to.

There is no cluster in CI. ``KubeEmulator`` serves the Kubernetes REST API on 127.0.0.1 (a free
port) from memory, with the semantics a job launcher depends on: resourceVersion/uid/generation,
namespaces, label and field selectors, 201/404/409/422 Status bodies, generateName, merge /
strategic-merge / JSON patches, the status subresource, watches that resume from a resourceVersion
(and answer 410 once it is compacted), pod logs with follow/previous/tailLines, dryRun, cascading
deletes, discovery of whichever CRDs a test installs, and fault injection that fails a request
before any state changes. Tests play scheduler, kubelet and controllers through the same object
(``set_pod_phase``, ``append_log``, ``add_event``, ``create_job_pods``, ``patch_status``), and
``controllers.Controllers`` plays the JobSet, Volcano and Kubeflow controllers on top of them.

Fixtures (``kube_emulator.pytest_plugin``): one server per test session, ``reset()`` per test.
See README.md in this directory for the full contract and the known gaps.
"""

from .controllers import Controllers
from .emulator import KubeEmulator
from .errors import ApiError, Cause
from .resources import ResourceType
from .store import ValidationFailure
from .transport import Fault, RequestRecord

__all__ = ["ApiError", "Cause", "Controllers", "Fault", "KubeEmulator", "RequestRecord", "ResourceType",
           "ValidationFailure"]
