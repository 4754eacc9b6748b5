"""The work deadline of one request (``TOOLGATE_REQUEST_DEADLINE_MS``).

An endpoint that loops over work the caller chose (an AuthZEN batch) checks its deadline before
each step, so that the work stops when it would outlast what the caller and the proxy wait for,
rather than keeping a worker thread busy long after the proxy answered 503.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from app.errors import DependencyUnavailable


class Deadline:
    """A point in monotonic time, ``budget_ms`` milliseconds after it was made."""

    def __init__(self, budget_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._budget_ms = budget_ms
        self._clock = clock
        self._ends_at = clock() + budget_ms / 1000

    def check(self) -> None:
        """Raise ``DependencyUnavailable`` (503, retryable, ``details.deadline_ms``) once the
        deadline has passed."""
        if self._clock() >= self._ends_at:
            raise DependencyUnavailable(
                "the request did not finish within its deadline; retry later, with less work per request",
                details={"deadline_ms": self._budget_ms},
            )
