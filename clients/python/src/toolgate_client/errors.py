"""Every exception this package raises, in one tree.

::

    ToolgateClientError                  base of everything below
    ├── ApiError                         the gateway answered with its error body
    │   ├── ValidationFailed             VALIDATION_ERROR         400 | 405 | 413 | 422   never retried
    │   ├── Unauthenticated              UNAUTHENTICATED          401                     never retried
    │   ├── Forbidden                    FORBIDDEN                403                     never retried
    │   ├── NotFound                     NOT_FOUND                404
    │   ├── Conflict                     CONFLICT                 409 retryable | 422 not
    │   ├── RateLimited                  RATE_LIMITED             429 + Retry-After
    │   ├── DependencyUnavailable        DEPENDENCY_UNAVAILABLE   503 + Retry-After
    │   └── InternalError                INTERNAL_ERROR (and any code this version does not know)
    ├── TransportError                   no response: refused, reset, timed out
    ├── UnexpectedResponse               a response that is not the gateway's JSON (a proxy's page)
    ├── ToolCallDenied                   guarded: the policy (or the approver) said no
    ├── ApprovalRequired                 guarded: a person must approve; carries the pending approval
    ├── ApprovalNotUsable                waiting: the approval expired or its grant was used
    ├── ApprovalTimeout                  waiting: no answer within the wait
    ├── ReplayedFailure                  guarded: the call ran before and failed for good
    └── ReportFailed                     guarded: the tool ran but its outcome could not be reported

``ApiError``, ``TransportError`` and ``UnexpectedResponse`` carry ``attempts``: how many
requests the logical call made before it gave up (see ``toolgate_client.retry``).
"""

from __future__ import annotations

from typing import Any


class ToolgateClientError(Exception):
    """Base of every exception raised by ``toolgate_client``. ``attempts`` is the number of
    requests the logical call made (1 unless retried)."""

    attempts: int = 1


class ApiError(ToolgateClientError):
    """An error body ``{"ok": false, "error": {code, message, retryable, details?,
    retry_after_seconds?}, "request_id"}`` from the gateway.

    Attributes: ``status`` (HTTP status), ``code`` (stable string), ``message`` (the gateway's
    safe text), ``retryable`` (the body's flag), ``details`` (JSON or None), ``request_id``
    (the gateway's id of the last attempt), ``retry_after_s`` (seconds from ``Retry-After`` or
    the body, or None), ``attempts`` (requests made for this logical call).
    """

    code = "INTERNAL_ERROR"

    def __init__(
        self,
        *,
        status: int,
        code: str,
        message: str,
        retryable: bool,
        request_id: str | None,
        details: Any = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(f"{code} ({status}): {message} [request {request_id}]")
        self.status = status
        self.code = code
        self.message = message
        self.retryable = retryable
        self.request_id = request_id
        self.details = details
        self.retry_after_s = retry_after_s


class ValidationFailed(ApiError):
    """VALIDATION_ERROR: the request or the tool input is not valid (``details.problems``)."""


class Unauthenticated(ApiError):
    """UNAUTHENTICATED: the bearer token was missing or refused."""


class Forbidden(ApiError):
    """FORBIDDEN: the caller may not use this endpoint (e.g. answering without an approver role)."""


class NotFound(ApiError):
    """NOT_FOUND: unknown approval, execution key or decision id (or another tenant's)."""


class Conflict(ApiError):
    """CONFLICT: 409 a call with this key is in flight (retryable); 422 the key was used with
    another request; 409 not retryable: the key's outcome is unknown or a report was refused."""


class RateLimited(ApiError):
    """RATE_LIMITED: too many calls; ``retry_after_s`` says when to come back."""


class DependencyUnavailable(ApiError):
    """DEPENDENCY_UNAVAILABLE: OPA, Redis, the JWKS or the decision log is down; retryable."""


class InternalError(ApiError):
    """INTERNAL_ERROR, or an error code this client version does not know."""


ERRORS_BY_CODE: dict[str, type[ApiError]] = {
    "VALIDATION_ERROR": ValidationFailed,
    "UNAUTHENTICATED": Unauthenticated,
    "FORBIDDEN": Forbidden,
    "NOT_FOUND": NotFound,
    "CONFLICT": Conflict,
    "RATE_LIMITED": RateLimited,
    "DEPENDENCY_UNAVAILABLE": DependencyUnavailable,
    "INTERNAL_ERROR": InternalError,
}


class TransportError(ToolgateClientError):
    """No response arrived: the connection was refused or reset, or an attempt timed out.
    ``sent`` is False when the request certainly did not reach the gateway (connect phase)."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent
        self.retryable = True


class UnexpectedResponse(ToolgateClientError):
    """A response without the gateway's JSON body (e.g. a proxy's 502 page, gunicorn's own
    400 for an oversized header) or a success body of the wrong shape. Never retried."""

    def __init__(self, message: str, *, status: int, request_id: str | None) -> None:
        super().__init__(f"{message} (HTTP {status}) [request {request_id}]")
        self.status = status
        self.request_id = request_id


class ToolCallDenied(ToolgateClientError):
    """The call was refused: by the policy (``decision: deny``) or by the approver.
    ``reasons`` are the gateway's stable sentences; ``decision_id`` names the record."""

    def __init__(self, *, tool: str, reasons: list[str], decision_id: str | None, request_id: str | None) -> None:
        super().__init__(f"{tool} denied: {'; '.join(reasons) or 'no reason given'}")
        self.tool = tool
        self.reasons = reasons
        self.decision_id = decision_id
        self.request_id = request_id


class ApprovalRequired(ToolgateClientError):
    """The policy asked for a person's approval. ``pending`` (a ``PendingApproval``) waits
    for the answer and repeats the call with the grant."""

    def __init__(self, pending: Any) -> None:
        super().__init__(f"approval required: {pending.request_reason} (approval {pending.approval_id})")
        self.pending = pending


class ApprovalNotUsable(ToolgateClientError):
    """The approval can no longer give a grant: ``state`` is ``expired``, or ``used`` (its
    grant went to another call)."""

    def __init__(self, approval_id: str, state: str) -> None:
        super().__init__(f"approval {approval_id} is {state}")
        self.approval_id = approval_id
        self.state = state


class ApprovalTimeout(ToolgateClientError):
    """The approval was still pending when the wait ended."""

    def __init__(self, approval_id: str, waited_s: float) -> None:
        super().__init__(f"approval {approval_id} still pending after {waited_s:.1f} s")
        self.approval_id = approval_id
        self.waited_s = waited_s


class ReplayedFailure(ToolgateClientError):
    """The call with this idempotency key ran before and failed for good; the gateway replays
    the failure instead of running the tool again."""

    def __init__(self, *, key: str, failure_reason: str | None) -> None:
        super().__init__(f"call {key!r} failed before: {failure_reason or 'no reason recorded'}")
        self.key = key
        self.failure_reason = failure_reason


class ReportFailed(ToolgateClientError):
    """The tool ran (``result`` holds what it returned, None after a failure) but the
    gateway did not take the report; the cause is chained (``__cause__``). Until someone
    settles the key, retries get ``CONFLICT``: nothing runs twice."""

    def __init__(self, *, key: str, result: Any) -> None:
        super().__init__(f"the outcome of call {key!r} could not be reported")
        self.key = key
        self.result = result


class RetryableToolError(Exception):
    """Raise it (or a subclass) from a guarded tool for a transient failure: the key is
    released and a retry of the call runs the tool again. Any other exception is reported
    as a final failure, which retries replay."""
