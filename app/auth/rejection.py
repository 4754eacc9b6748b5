"""The one 401 of authentication: a generic message for the caller, the reason for the log."""

from __future__ import annotations

from app.errors import Unauthenticated

_LOG_DETAIL_MAX = 300


def reject(reason: str, *, presented: bool = True) -> Unauthenticated:
    """The 401 error; ``reason`` goes to ``log_detail`` only (truncated, never the token).
    ``presented=False``: the request carried no credentials at all."""
    return Unauthenticated(log_detail=reason[:_LOG_DETAIL_MAX], presented=presented)


def exception_text(exc: BaseException) -> str:
    """``Type: message`` of ``exc``, cut to a log-safe length."""
    return f"{type(exc).__name__}: {exc}"[:_LOG_DETAIL_MAX]
