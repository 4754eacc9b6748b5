"""The error tree of toolgate (DESIGN §7). No Flask imports here.

Every error a caller can see is a ``ToolgateError`` with a stable ``code``, an HTTP status,
a ``retryable`` flag and a fixed, safe ``message``. Details that help the caller fix the
request (validation problems, the seconds to wait) go in ``details`` / ``retry_after_s``;
anything else (library exception text, stack traces, tokens, raw input) goes to the log only.

    ToolgateError
    ├── ValidationFailed        VALIDATION_ERROR        400 | 413 | 422, not retryable
    │   └── ContractMismatch    VALIDATION_ERROR        422: paths inside the input or result
    ├── Unauthenticated         UNAUTHENTICATED         401 + WWW-Authenticate, not retryable
    ├── Forbidden               FORBIDDEN               403, not retryable
    ├── NotFound                NOT_FOUND               404, not retryable
    ├── Conflict                CONFLICT                409 (retryable) | 422 (not retryable)
    ├── RateLimited             RATE_LIMITED            429 + Retry-After, retryable
    ├── DependencyUnavailable   DEPENDENCY_UNAVAILABLE  503 + Retry-After, retryable
    └── InternalError           INTERNAL_ERROR          500, not retryable
"""

from __future__ import annotations

from typing import Any


class ToolgateError(Exception):
    """Base of every error returned to a caller.

    Attributes: ``code`` (stable string), ``http_status`` (int), ``retryable`` (bool),
    ``message`` (safe, fixed text), ``details`` (JSON-serialisable or None),
    ``retry_after_s`` (whole seconds or None), ``headers`` (extra response headers).
    """

    code = "INTERNAL_ERROR"
    http_status = 500
    retryable = False
    default_message = "internal error"

    def __init__(
        self,
        message: str | None = None,
        *,
        details: Any = None,
        http_status: int | None = None,
        retryable: bool | None = None,
        retry_after_s: int | None = None,
        log_detail: str | None = None,
    ) -> None:
        self.message = message or self.default_message
        super().__init__(self.message)
        self.details = details
        if http_status is not None:
            self.http_status = http_status
        if retryable is not None:
            self.retryable = retryable
        self.retry_after_s = retry_after_s
        #: Text for the log only; never sent to the caller.
        self.log_detail = log_detail

    @property
    def headers(self) -> dict[str, str]:
        """Extra HTTP response headers (``Retry-After`` in whole seconds when set)."""
        if self.retry_after_s is None:
            return {}
        return {"Retry-After": str(max(0, int(self.retry_after_s)))}

    def to_body(self, request_id: str) -> dict[str, Any]:
        """The JSON error body: ``{"ok": false, "error": {...}, "request_id"}``."""
        error: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
        }
        if self.details is not None:
            error["details"] = self.details
        if self.retry_after_s is not None:
            error["retry_after_seconds"] = max(0, int(self.retry_after_s))
        return {"ok": False, "error": error, "request_id": request_id}


class ValidationFailed(ToolgateError):
    """The request is malformed (400), too large (413) or fails a schema (422)."""

    code = "VALIDATION_ERROR"
    http_status = 400
    default_message = "request is not valid"


class ContractMismatch(ValidationFailed):
    """An input or a result that fails its tool's schema (422); the paths of its
    ``details.problems`` are JSON Pointers inside that input or result, not the request body."""


class Unauthenticated(ToolgateError):
    """No valid bearer token (401). One generic message; the reason goes to the log only.
    ``presented``: the request carried credentials (which were refused)."""

    code = "UNAUTHENTICATED"
    http_status = 401
    default_message = "authentication required"

    def __init__(self, message: str | None = None, *, presented: bool = True, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.presented = presented

    @property
    def headers(self) -> dict[str, str]:
        """The challenge (RFC 6750 §3, §3.1): ``Bearer realm="toolgate", error="invalid_token"``
        for refused credentials; without an error attribute when the request carried none."""
        if not self.presented:
            return {"WWW-Authenticate": 'Bearer realm="toolgate"'}
        return {"WWW-Authenticate": 'Bearer realm="toolgate", error="invalid_token"'}


class Forbidden(ToolgateError):
    """The authenticated caller may not use this endpoint (403)."""

    code = "FORBIDDEN"
    http_status = 403
    default_message = "caller is not permitted to do this"


class NotFound(ToolgateError):
    """Unknown route, approval, execution or decision id (404)."""

    code = "NOT_FOUND"
    http_status = 404
    default_message = "not found"


class Conflict(ToolgateError):
    """Idempotency conflict: 409 in flight (retryable) or 422 key reused (not retryable)."""

    code = "CONFLICT"
    http_status = 409
    default_message = "conflict"


class RateLimited(ToolgateError):
    """Too many requests (429, retryable, with Retry-After)."""

    code = "RATE_LIMITED"
    http_status = 429
    retryable = True
    default_message = "too many requests"


class DependencyUnavailable(ToolgateError):
    """A dependency (OPA, Redis, decision log store, JWKS) is down or slow (503, retryable)."""

    code = "DEPENDENCY_UNAVAILABLE"
    http_status = 503
    retryable = True
    default_message = "a dependency is unavailable; retry later"

    def __init__(self, message: str | None = None, *, retry_after_s: int | None = 1, **kw: Any):
        super().__init__(message, retry_after_s=retry_after_s, **kw)


class InternalError(ToolgateError):
    """Anything unexpected (500). Logged with the request id; nothing leaked."""

    code = "INTERNAL_ERROR"
    http_status = 500
    default_message = "internal error"


#: Every code a caller can see, for docs and tests.
ERROR_CODES = {
    cls.code: cls
    for cls in (
        ValidationFailed,
        Unauthenticated,
        Forbidden,
        NotFound,
        Conflict,
        RateLimited,
        DependencyUnavailable,
        InternalError,
    )
}
