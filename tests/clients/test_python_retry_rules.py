"""The retry rules as pure functions: which errors are retried, the backoff bounds, reading
``Retry-After``, and the attempt cap. Error objects are built directly where the real gateway
never sends them (a body claiming ``retryable: true`` for a code that is never retried)."""

from __future__ import annotations

import email.utils
import random
import time

import pytest
from toolgate_client import RetryPolicy
from toolgate_client.errors import (
    ERRORS_BY_CODE,
    ApiError,
    TransportError,
    UnexpectedResponse,
)
from toolgate_client.retry import is_retryable, run_with_retries
from toolgate_client.transport import parse_retry_after


def _error(code: str, *, retryable: bool, status: int = 400) -> ApiError:
    return ERRORS_BY_CODE[code](status=status, code=code, message="m", retryable=retryable, request_id="r")


@pytest.mark.parametrize("code", ["VALIDATION_ERROR", "UNAUTHENTICATED", "FORBIDDEN"])
def test_never_retried_codes_stay_so_even_if_the_body_says_retryable(code):
    assert not is_retryable(_error(code, retryable=True), idempotent=True)


@pytest.mark.parametrize(("code", "retryable", "expected"), [
    ("CONFLICT", True, True),            # 409 in flight
    ("CONFLICT", False, False),          # 422 key reused, 409 outcome unknown
    ("RATE_LIMITED", True, True),
    ("DEPENDENCY_UNAVAILABLE", True, True),
    ("INTERNAL_ERROR", False, False),
    ("NOT_FOUND", False, False),
])
def test_error_bodies_are_retried_by_their_flag(code, retryable, expected):
    assert is_retryable(_error(code, retryable=retryable), idempotent=True) is expected


def test_transport_errors_and_idempotency():
    assert is_retryable(TransportError("refused", sent=False), idempotent=False)
    assert is_retryable(TransportError("timeout", sent=True), idempotent=True)
    assert not is_retryable(TransportError("timeout", sent=True), idempotent=False)
    assert not is_retryable(UnexpectedResponse("proxy page", status=502, request_id=None), idempotent=True)


def test_full_jitter_backoff_stays_under_its_ceiling():
    policy = RetryPolicy(base_delay_s=0.1, max_delay_s=1.0)
    rng = random.Random(7)
    for n, ceiling in enumerate([0.1, 0.2, 0.4, 0.8, 1.0, 1.0]):
        delays = [policy.backoff_s(n, rng) for _ in range(200)]
        assert min(delays) >= 0 and max(delays) <= ceiling
        assert max(delays) > ceiling / 2  # jittered over the whole range, not a fixed wait


def test_retry_after_as_seconds_or_http_date():
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= (parse_retry_after(later) or 0) <= 31


def test_attempts_are_capped_and_counted():
    calls: list[float] = []

    def attempt(number: int, timeout_s: float) -> None:
        calls.append(timeout_s)
        raise _error("DEPENDENCY_UNAVAILABLE", retryable=True, status=503)

    policy = RetryPolicy(max_attempts=3, deadline_s=5.0, base_delay_s=0.01, max_delay_s=0.02, attempt_timeout_s=2.0)
    with pytest.raises(ApiError) as caught:
        run_with_retries(attempt, policy, idempotent=True)
    assert caught.value.attempts == 3 and len(calls) == 3
    assert all(0 < t <= 2.0 for t in calls)


def test_policy_limits_are_checked():
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(deadline_s=0)
    with pytest.raises(ValueError):
        RetryPolicy(base_delay_s=2.0, max_delay_s=1.0)
