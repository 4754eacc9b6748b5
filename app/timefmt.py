"""Time formats: the one home of RFC 3339 formatting and parsing.

- API responses and the policy input: milliseconds, ``2025-01-02T03:04:05.678Z``
  (``rfc3339_ms``, ``now_rfc3339_ms``).
- Decision records: microseconds, ``2025-01-02T03:04:05.678901Z`` (``format_us`` /
  ``parse_us``, exact inverses), stored as integer microseconds since the epoch
  (``epoch_us`` / ``from_epoch_us``).
- Input from callers: any RFC 3339 date-time with an offset (``parse_rfc3339``), or, on the
  command line, also a bare date meaning midnight UTC (``parse_date_or_rfc3339``).
"""

from __future__ import annotations

import datetime as dt
import re
import time

UTC = dt.UTC
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
_US_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:[Zz]|([+-])(\d{2}):(\d{2}))$"
)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def rfc3339_ms(epoch_ms: int) -> str:
    """``2025-01-02T03:04:05.678Z`` for Unix epoch milliseconds."""
    seconds, ms = divmod(int(epoch_ms), 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ms:03d}Z"


def now_ms() -> int:
    """The current Unix time in milliseconds."""
    return time.time_ns() // 1_000_000


def now_rfc3339_ms() -> str:
    """The current time as ``rfc3339_ms``."""
    return rfc3339_ms(now_ms())


def utc_now() -> dt.datetime:
    """The current time, UTC, microsecond resolution."""
    return dt.datetime.now(UTC)


def format_us(value: dt.datetime) -> str:
    """RFC 3339 UTC with microseconds: ``2025-01-31T12:00:00.123456Z``."""
    return value.astimezone(UTC).strftime(_US_FORMAT)


def parse_us(text: str) -> dt.datetime:
    """Inverse of ``format_us``. Raises ``ValueError`` for any other form."""
    return dt.datetime.strptime(text, _US_FORMAT).replace(tzinfo=UTC)


def epoch_us(value: dt.datetime) -> int:
    """Microseconds since the Unix epoch of an aware datetime."""
    return (value - _EPOCH) // dt.timedelta(microseconds=1)


def from_epoch_us(value: int) -> dt.datetime:
    """The aware UTC datetime ``value`` microseconds after the Unix epoch."""
    return _EPOCH + dt.timedelta(microseconds=value)


def parse_rfc3339(value: str) -> dt.datetime:
    """An RFC 3339 date-time (offset required; fractions beyond microseconds are cut; a leap
    second counts as :59) -> aware UTC datetime. Raises ``ValueError``."""
    m = _RFC3339.match(value)
    if not m:
        raise ValueError("must be an RFC 3339 date-time with an offset, e.g. 2025-01-31T12:00:00Z")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    micro = int((m[7] or ".0")[1:7].ljust(6, "0"))
    offset = dt.timedelta(hours=int(m[9] or 0), minutes=int(m[10] or 0)) * (-1 if m[8] == "-" else 1)
    try:
        local = dt.datetime(year, month, day, hour, minute, min(second, 59), micro, tzinfo=dt.timezone(offset))
        return local.astimezone(UTC)
    except OverflowError:
        raise ValueError("date-time out of range") from None


def parse_date_or_rfc3339(text: str) -> dt.datetime:
    """``2025-01-31`` (midnight UTC) or an RFC 3339 date-time with an offset -> aware datetime.
    Raises ``ValueError``."""
    if _DATE.match(text):
        return dt.datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    return parse_rfc3339(text)
