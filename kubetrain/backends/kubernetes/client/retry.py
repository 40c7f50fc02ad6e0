"""The retry policy: capped exponential backoff with jitter, honouring ``Retry-After``.

urllib3's own retries are off (see :mod:`.config`); idempotent verbs are retried by :mod:`.transport`,
creates by :mod:`..submit` (which first checks whether the lost request landed).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .errors import ApiError


@dataclass(frozen=True)
class RetryPolicy:
    """Capped exponential backoff with jitter: ``base * 2**n``, at most ``cap`` seconds, ``attempts`` tries."""

    attempts: int = 6
    base: float = 0.2
    cap: float = 5.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)

    def delay(self, attempt: int, error: ApiError | None = None) -> float:
        """Seconds to wait before try ``attempt + 1`` (``attempt`` counts from 0)."""
        if error is not None and error.retry_after is not None:
            return min(self.cap, max(0.0, error.retry_after))
        step = min(self.cap, self.base * (2**attempt))
        return step * (0.5 + random.random() / 2)

    def wait(self, attempt: int, error: ApiError | None = None) -> None:
        self.sleep(self.delay(attempt, error))


__all__ = ["RetryPolicy"]
