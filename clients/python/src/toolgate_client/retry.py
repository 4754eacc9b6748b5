"""The one retry behaviour of the client: which failures are retried, and when.

A logical call (one ``decide``, one report, ...) makes attempts until one succeeds or the rules
below say stop; the last failure is then raised with ``attempts`` set.

- Retried: an error body that says ``retryable: true`` (409 CONFLICT in flight, 429, 503), and
  a ``TransportError`` (no response). A call that is not idempotent (answering an approval) is
  retried after a transport error only when the request was never sent (connect phase).
- Never retried, whatever the body says: VALIDATION_ERROR, UNAUTHENTICATED, FORBIDDEN, and a
  CONFLICT marked ``retryable: false`` (422 key reused, 409 outcome unknown). Nor is a response
  without the gateway's error body.
- Backoff: exponential with full jitter, ``uniform(0, min(max_delay_s, base_delay_s * 2**n))``
  before the n-th retry (n from 0). ``Retry-After`` (header, or ``retry_after_seconds``) is a
  floor: the wait is never shorter.
- At most ``max_attempts`` attempts inside one ``deadline_s`` counted from the call's start.
  A retry is started only when its wait plus the time an attempt needs (the longer of the last
  attempt's duration and ``min_attempt_s``) ends before the deadline; otherwise the call gives
  up at once instead of sleeping into the deadline. Each attempt's timeouts are capped by the
  time left.

The caller keeps the same ``Idempotency-Key`` on every attempt (``toolgate_client.transport``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from toolgate_client.errors import ApiError, ToolgateClientError, TransportError

T = TypeVar("T")

#: Error codes never retried, even if a body claimed ``retryable: true``.
NEVER_RETRIED = frozenset({"VALIDATION_ERROR", "UNAUTHENTICATED", "FORBIDDEN"})


@dataclass(frozen=True)
class RetryPolicy:
    """Limits of one logical call. Seconds throughout.

    ``max_attempts`` >= 1 (1 turns retries off); ``deadline_s`` bounds the whole call, waits
    included; ``base_delay_s``/``max_delay_s`` shape the backoff; ``attempt_timeout_s`` bounds
    each phase (connect, send, receive) of one attempt; ``min_attempt_s`` is the least time a
    retry must have left to be started.
    """

    max_attempts: int = 4
    deadline_s: float = 10.0
    base_delay_s: float = 0.2
    max_delay_s: float = 5.0
    attempt_timeout_s: float = 5.0
    min_attempt_s: float = 0.05

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        for name in ("deadline_s", "attempt_timeout_s", "min_attempt_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.base_delay_s < 0 or self.max_delay_s < self.base_delay_s:
            raise ValueError("need 0 <= base_delay_s <= max_delay_s")

    def backoff_s(self, retry_index: int, rng: random.Random) -> float:
        """Full-jitter backoff before retry number ``retry_index`` (0 for the first retry)."""
        ceiling = min(self.max_delay_s, self.base_delay_s * (2**retry_index))
        return rng.uniform(0.0, ceiling)


@dataclass(frozen=True)
class RetryEvent:
    """Passed to ``on_retry`` before each wait: the failed ``attempt`` (1-based), its
    ``error``, the ``delay_s`` about to be slept and the seconds ``elapsed_s`` since the call began."""

    attempt: int
    error: ToolgateClientError
    delay_s: float
    elapsed_s: float


def is_retryable(error: ToolgateClientError, *, idempotent: bool) -> bool:
    """Whether the rules above allow another attempt after ``error``."""
    if isinstance(error, TransportError):
        return idempotent or not error.sent
    if isinstance(error, ApiError):
        return error.retryable and error.code not in NEVER_RETRIED
    return False


class Deadline:
    """Time left of one logical call, on the monotonic clock."""

    def __init__(self, seconds: float) -> None:
        self.started = time.monotonic()
        self.ends = self.started + seconds

    def left_s(self) -> float:
        return max(0.0, self.ends - time.monotonic())

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started


def run_with_retries(
    attempt: Callable[[int, float], T],
    policy: RetryPolicy,
    *,
    idempotent: bool,
    on_retry: Callable[[RetryEvent], None] | None = None,
    rng: random.Random | None = None,
) -> T:
    """Call ``attempt(number, timeout_s)`` (number from 1; ``timeout_s`` = the per-attempt
    timeout capped by the time left) until it returns, or raise its last
    ``ToolgateClientError`` with ``attempts`` set. Other exceptions propagate at once."""
    rng = rng or random.Random()
    deadline = Deadline(policy.deadline_s)
    number = 0
    while True:
        number += 1
        started = time.monotonic()
        try:
            return attempt(number, max(policy.min_attempt_s, min(policy.attempt_timeout_s, deadline.left_s())))
        except ToolgateClientError as error:
            error.attempts = number
            took_s = time.monotonic() - started
            if number >= policy.max_attempts or not is_retryable(error, idempotent=idempotent):
                raise
            delay_s = policy.backoff_s(number - 1, rng)
            if isinstance(error, ApiError) and error.retry_after_s is not None:
                delay_s = max(delay_s, error.retry_after_s)
            if delay_s + max(took_s, policy.min_attempt_s) > deadline.left_s():
                raise
            if on_retry is not None:
                on_retry(RetryEvent(attempt=number, error=error, delay_s=delay_s, elapsed_s=deadline.elapsed_s()))
            time.sleep(delay_s)
