"""``GuardedTool``: a tool function that runs only when the gateway allows it, once per key.

    pay = client.guarded(send_payment, tool="processPayment")
    try:
        receipt = pay({"amount": 1500, "currency": "EUR", "recipient": "acct_42"},
                      idempotency_key="pay-inv-2291", tool_call_id="call_7")
    except ApprovalRequired as needed:
        receipt = needed.pending.retry(timeout_s=600)   # waits for the approver, then runs

One call asks ``decide`` and then, by the answer:

- ``allow`` with state ``reserved``: runs ``tool_fn(normalized_input)`` and reports
  ``complete`` with the result and the reservation token; when the tool raises, reports
  ``fail`` (``retryable`` for ``retryable_errors``, final otherwise) and re-raises.
- ``allow`` without a key (read-only tools): runs the tool; nothing to report.
- ``allow`` with state ``replayed``: returns the stored result without running the tool, or
  raises ``ReplayedFailure`` for a stored failure.
- ``deny``: raises ``ToolCallDenied`` (reasons, decision id); the tool does not run.
- ``user-approval``: raises ``ApprovalRequired`` whose ``pending`` (``PendingApproval``) waits
  for the answer (read by the requester from ``GET /v1/approvals/<id>``) and repeats the call
  with the grant and the same key.

The tool gets the input as the contract normalized it (what the policy decided on) and must
return a JSON value: a replay returns the decoded JSON that was stored. Errors of the gateway
(after the retry rules) propagate before the tool runs. ``KeyboardInterrupt`` and other
non-``Exception`` exits are not reported: the outcome is unknown, the lease runs out, and
retries get ``CONFLICT`` until someone settles the key.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolgate_client.errors import (
    ApprovalNotUsable,
    ApprovalRequired,
    ReplayedFailure,
    ReportFailed,
    RetryableToolError,
    ToolCallDenied,
    ToolgateClientError,
    UnexpectedResponse,
    ValidationFailed,
)
from toolgate_client.inputs import executable_input
from toolgate_client.models import ApprovalInfo, Decision, IdempotencyInfo

if TYPE_CHECKING:
    from toolgate_client.client import ToolgateClient

ToolFunction = Callable[[dict[str, Any]], Any]
FailureReason = Callable[[BaseException], str]

#: The reason the gateway gives for a denial without one; used for the same case here.
DENIED_WITHOUT_REASON = "the approver rejected this call"
_NOT_JSON = "the tool's result is not a JSON value"
_OUTPUT_REJECTED = "the tool's result does not match the contract's output schema"


def exception_name(exc: BaseException) -> str:
    """The default failure reason: the exception's class name only (its message may hold
    data that must not reach the decision log)."""
    return f"tool raised {type(exc).__name__}"


@dataclass(frozen=True)
class ToolCall:
    """One logical call: what is sent on the first decide and on every repeat."""

    input: Mapping[str, Any]
    idempotency_key: str | None = None
    tool_call_id: str | None = None
    context: Mapping[str, Any] | None = None


class GuardedTool:
    """See the module docstring. ``retryable_errors``: exception types reported as
    ``fail(retryable=True)``; ``failure_reason(exc)`` makes the reported reason (1-500
    characters, stored in the decision log)."""

    def __init__(
        self,
        client: ToolgateClient,
        tool_fn: ToolFunction,
        *,
        tool: str,
        version: str = "1",
        retryable_errors: tuple[type[BaseException], ...] = (RetryableToolError,),
        failure_reason: FailureReason = exception_name,
    ) -> None:
        self.client = client
        self.tool_fn = tool_fn
        self.tool = tool
        self.version = version
        self.retryable_errors = retryable_errors
        self.failure_reason = failure_reason

    def __repr__(self) -> str:
        return f"GuardedTool({self.tool!r}, version={self.version!r})"

    def __call__(
        self,
        input: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        tool_call_id: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> Any:
        """Decide, then run, replay or refuse (module docstring). Returns the tool's result."""
        return self.run(ToolCall(input, idempotency_key, tool_call_id, context))

    def run(self, call: ToolCall, *, approval: Mapping[str, str] | None = None) -> Any:
        """One decide for ``call`` (with ``approval`` = ``{"approval_id", "grant"}`` when
        repeating an approved call) and its consequence."""
        decision = self.client.decide(
            self.tool, call.input, version=self.version, tool_call_id=call.tool_call_id,
            idempotency_key=call.idempotency_key, context=call.context, approval=approval,
        )
        if decision.decision == "deny":
            raise ToolCallDenied(tool=self.tool, reasons=decision.reasons, decision_id=decision.decision_id,
                                 request_id=decision.request_id)
        if decision.decision == "user-approval":
            raise ApprovalRequired(PendingApproval(self, call, decision))
        idempotency = decision.idempotency
        if idempotency is None:
            if call.idempotency_key is not None:
                raise UnexpectedResponse("allow without idempotency state for a call with a key", status=200,
                                         request_id=decision.request_id)
            return self.tool_fn(executable_input(decision.input, call.input))
        if idempotency.state == "replayed":
            if idempotency.outcome == "failed":
                raise ReplayedFailure(key=idempotency.key, failure_reason=idempotency.failure_reason)
            return idempotency.result
        return self._run_reserved(decision, idempotency, call)

    def _run_reserved(self, decision: Decision, reserved: IdempotencyInfo, call: ToolCall) -> Any:
        try:
            result = self.tool_fn(executable_input(decision.input, call.input))
        except Exception as exc:
            self._report_failure(reserved, retryable=isinstance(exc, self.retryable_errors),
                                 reason=self.failure_reason(exc)[:500] or exception_name(exc), result=None)
            raise
        try:
            json.dumps(result, allow_nan=False)
        except (TypeError, ValueError):
            self._report_failure(reserved, retryable=False, reason=_NOT_JSON, result=result)
            raise
        try:
            self.client.complete(reserved.key, result, reservation_token=reserved.reservation_token)
        except ValidationFailed:
            self._report_failure(reserved, retryable=False, reason=_OUTPUT_REJECTED, result=result)
            raise
        except ToolgateClientError as exc:
            raise ReportFailed(key=reserved.key, result=result) from exc
        return result

    def _report_failure(self, reserved: IdempotencyInfo, *, retryable: bool, reason: str, result: Any) -> None:
        try:
            self.client.fail(reserved.key, retryable=retryable, reason=reason,
                             reservation_token=reserved.reservation_token)
        except ToolgateClientError as exc:
            raise ReportFailed(key=reserved.key, result=result) from exc


@dataclass
class PendingApproval:
    """A call waiting for a person's answer. ``approval_id``, ``request_reason`` (what the
    approver is shown) and ``expires_at`` come from the ``user-approval`` ``decision``.
    ``grant`` is kept once read, so a repeated ``retry`` presents the same grant and key and
    gets the stored result instead of a second run."""

    tool: GuardedTool
    call: ToolCall
    decision: Decision
    grant: str | None = field(default=None, repr=False)

    @property
    def approval_id(self) -> str:
        return self._info().approval_id

    @property
    def request_reason(self) -> str:
        return self._info().request_reason

    @property
    def expires_at(self) -> str:
        return self._info().expires_at

    def _info(self) -> ApprovalInfo:
        if self.decision.approval is None:
            raise UnexpectedResponse("user-approval without an approval", status=200, request_id=self.decision.request_id)
        return self.decision.approval

    def wait(self, *, timeout_s: float = 900.0, poll_interval_s: float = 1.0) -> str:
        """The grant, once the approver approved. Raises ``ToolCallDenied`` with the
        approver's reason for a denial, ``ApprovalNotUsable`` when it expired or its grant was
        used elsewhere, ``ApprovalTimeout`` when still pending after ``timeout_s``."""
        if self.grant is not None:
            return self.grant
        shown = self.tool.client.wait_for_approval(self.approval_id, timeout_s=timeout_s, poll_interval_s=poll_interval_s)
        approval = shown.approval
        if approval.state == "denied":
            answer = approval.answer
            raise ToolCallDenied(
                tool=self.tool.tool, reasons=[(answer.reason if answer else "") or DENIED_WITHOUT_REASON],
                decision_id=answer.decision_id if answer else None, request_id=shown.request_id,
            )
        if approval.state != "approved" or shown.grant is None:
            raise ApprovalNotUsable(approval.approval_id, approval.state)
        self.grant = shown.grant
        return shown.grant

    def retry(self, *, timeout_s: float = 900.0, poll_interval_s: float = 1.0) -> Any:
        """Wait for the grant (``wait``), then repeat the call with it: the tool runs once
        (or its stored result comes back). Raises what ``GuardedTool.run`` raises."""
        grant = self.wait(timeout_s=timeout_s, poll_interval_s=poll_interval_s)
        return self.tool.run(self.call, approval={"approval_id": self.approval_id, "grant": grant})
