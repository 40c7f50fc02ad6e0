"""What can go wrong talking to the API server: the backend's error family and the server's Status answers."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ....contract.errors import EXIT_USAGE, KubetrainError

#: Status codes worth another try: throttling, server trouble, timeouts at the gateway.
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})


class KubernetesError(KubetrainError):
    """Something the Kubernetes backend cannot do, with a message for the user (no traceback needed)."""


class ConfigError(KubernetesError):
    """No usable kubeconfig / in-cluster configuration."""

    exit_code = EXIT_USAGE


@dataclass(frozen=True)
class Cause:
    """One item of a Status's ``details.causes``: which field, and what is wrong with it."""

    field: str | None
    message: str
    reason: str | None = None

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class ApiError(KubernetesError):
    """An answer other than 2xx (``status`` 0: the connection dropped or could not be made)."""

    def __init__(
        self,
        status: int,
        reason: str = "",
        message: str = "",
        *,
        causes: Sequence[Cause] = (),
        retry_after: float | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.causes = list(causes)
        self.retry_after = retry_after
        self.details = dict(details or {})
        super().__init__(self.describe())

    @property
    def transient(self) -> bool:
        return self.status == 0 or self.status in TRANSIENT_STATUS

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def gone(self) -> bool:
        return self.status == 410

    def describe(self) -> str:
        head = f"{self.status} {self.reason}".strip() if self.status else "connection lost"
        text = f"{head}: {self.message}" if self.message else head
        if self.causes and not all(c.message in self.message for c in self.causes):
            text += "".join(f"\n  {c}" for c in self.causes)
        return text

    @classmethod
    def from_response(cls, status: int, data: bytes, headers: Mapping[str, str] | None = None) -> ApiError:
        retry_after: float | None = None
        if headers is not None:
            raw = headers.get("Retry-After")
            if raw is not None:
                try:
                    retry_after = float(raw)
                except ValueError:
                    retry_after = None
        try:
            body = json.loads(data) if data else {}
        except ValueError:
            body = {}
        if not isinstance(body, dict) or body.get("kind") != "Status":
            text = data.decode("utf-8", "replace").strip()[:500]
            return cls(status, "", text, retry_after=retry_after)
        details = body.get("details") or {}
        causes = [
            Cause(c.get("field"), c.get("message") or "", c.get("reason"))
            for c in details.get("causes") or []
            if isinstance(c, dict)
        ]
        if retry_after is None and details.get("retryAfterSeconds") is not None:
            retry_after = float(details["retryAfterSeconds"])
        return cls(
            int(body.get("code") or status),
            body.get("reason") or "",
            body.get("message") or "",
            causes=causes,
            retry_after=retry_after,
            details=details,
        )


class ConnectionLost(ApiError):
    def __init__(self, error: BaseException) -> None:
        super().__init__(0, "ConnectionError", f"{type(error).__name__}: {error}")


__all__ = ["TRANSIENT_STATUS", "ApiError", "Cause", "ConfigError", "ConnectionLost", "KubernetesError"]
