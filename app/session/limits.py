"""Counts, budgets and rate limits as the ADMIT script takes them (docs/session.md).

A limit's units are millionths: a count reserves 1,000,000 units per call, a budget the
amount at its ``amount_field`` times 1,000,000 rounded up; the maximum is rounded down. So
sums of decimal amounts are exact integers in Redis (up to 2**53 units, about 9 billion).
A rate limit of ``count`` per ``per_s`` seconds is a GCRA with an emission interval of
``per_s * 1000 / count`` ms and a burst of ``count``.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from app.models import LimitSpec, RateLimitSpec
from app.session.pointers import values_at
from app.settings import parse_rate

UNIT = 1_000_000
MAX_UNITS = 2**53


class UnmeasurableCall(ValueError):
    """The call's input holds no single non-negative number at a limit's ``amount_field``."""


def units(spec: LimitSpec, normalized_input: dict[str, Any]) -> int:
    """The units one call reserves under ``spec``. Raises ``UnmeasurableCall`` when the
    amount field is missing, not one number, negative or too large."""
    if spec.amount_field is None:
        return UNIT
    found = values_at(normalized_input, spec.amount_field)
    if len(found) != 1:
        raise UnmeasurableCall(f"{spec.amount_field} is not one value")
    value = found[0][1]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise UnmeasurableCall(f"{spec.amount_field} is not a non-negative number")
    reserved = math.ceil(Decimal(str(value)) * UNIT)
    if reserved > MAX_UNITS:
        raise UnmeasurableCall(f"{spec.amount_field} is too large")
    return reserved


def max_units(spec: LimitSpec) -> int:
    """``spec.max`` in units, rounded down."""
    return math.floor(Decimal(str(spec.max)) * UNIT)


def shown(units_: int) -> int | float:
    """Units as the number a policy author wrote (a count, an amount)."""
    value = Decimal(units_) / UNIT
    return int(value) if value == value.to_integral_value() else float(value)


def gcra(spec: RateLimitSpec) -> tuple[str, str]:
    """``(emission interval ms, period ms)`` of ``spec`` as ADMIT arguments."""
    period_ms = spec.per_s * 1000
    return f"{period_ms / spec.count:.3f}", str(period_ms)


def settings_rate_limit(text: str | None) -> RateLimitSpec | None:
    """``TOOLGATE_RATE_LIMIT_PER_SUBJECT`` as a subject rate limit with id
    ``settings.per_subject`` (None when unset)."""
    if text is None:
        return None
    count, per_s = parse_rate(text)
    return RateLimitSpec(id="settings.per_subject", scope="subject", count=count, per_s=per_s)
