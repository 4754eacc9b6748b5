"""``ToolgateClient``: every endpoint a tool service, an approver or an auditor calls.

    with ToolgateClient("http://127.0.0.1:8080", token=my_token) as client:
        decision = client.decide("readFile", {"path": "/srv/reports/q1.csv"})

Each method is one logical call under the client's ``RetryPolicy`` (``toolgate_client.retry``;
pass ``retry=`` to a method to change it for that call) and returns a typed view
(``toolgate_client.models``) or raises a ``ToolgateClientError``.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any, Self
from urllib.parse import quote

import httpx

from toolgate_client.errors import ApprovalTimeout, RetryableToolError
from toolgate_client.guarded import (
    FailureReason,
    GuardedTool,
    ToolFunction,
    exception_name,
)
from toolgate_client.models import (
    Approval,
    ApprovalList,
    ApprovalResult,
    Decision,
    DecisionPage,
    DecisionRecord,
    ExecutionReport,
    ToolDescription,
    ToolList,
    parse,
)
from toolgate_client.retry import Deadline, RetryEvent, RetryPolicy
from toolgate_client.transport import TokenSource, Transport

#: Filters of ``query_decisions`` (the gateway's ``GET /v1/decisions`` parameters).
DECISION_FILTERS = (
    "tenant", "subject", "tool", "decision", "event", "error_code", "request_id", "approval_id",
    "idempotency_key", "since", "until",
)


class ToolgateClient:
    """A client of one gateway for one caller.

    ``base_url``: the gateway, e.g. ``http://127.0.0.1:8080``. ``token``: the caller's bearer
    token, or a function returning a current one. ``retry``: the default ``RetryPolicy``.
    ``http``: an ``httpx.Client`` to send with (not closed by ``close``). ``on_retry``: called
    with a ``RetryEvent`` before every retry (for logs and metrics).
    """

    def __init__(
        self,
        base_url: str,
        token: TokenSource,
        *,
        retry: RetryPolicy | None = None,
        http: httpx.Client | None = None,
        on_retry: Callable[[RetryEvent], None] | None = None,
    ) -> None:
        self.transport = Transport(base_url, token, retry=retry, http=http, on_retry=on_retry)

    def __repr__(self) -> str:
        return f"ToolgateClient({self.transport.base_url!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.transport.close()

    # decisions and reports -----------------------------------------------------------------

    def decide(
        self,
        tool: str,
        input: Mapping[str, Any],
        *,
        version: str = "1",
        tool_call_id: str | None = None,
        idempotency_key: str | None = None,
        context: Mapping[str, Any] | None = None,
        approval: Mapping[str, str] | None = None,
        dry_run: bool = False,
        request_id: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> Decision:
        """``POST /v1/decide``. ``idempotency_key`` is required by mutating tools and sent on
        every attempt; ``approval`` is ``{"approval_id", "grant"}`` when repeating an approved
        call. A deny or user-approval is a ``Decision``, not an exception."""
        body: dict[str, Any] = {"tool": tool, "version": version, "input": dict(input)}
        if tool_call_id is not None:
            body["tool_call_id"] = tool_call_id
        if context:
            body["context"] = dict(context)
        if approval is not None:
            body["approval"] = dict(approval)
        if dry_run:
            body["dry_run"] = True
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else {}
        answer = self.transport.call("POST", "/v1/decide", body=body, headers=headers, retry=retry,
                                     request_id=request_id)
        return parse(Decision, answer)

    def complete(self, key: str, result: Any, *, reservation_token: str | None = None,
                 retry: RetryPolicy | None = None) -> ExecutionReport:
        """``POST /v1/executions/<key>/complete``: the tool ran and returned ``result`` (JSON).
        A repeated identical report is answered the same, so it is retried like ``decide``."""
        body: dict[str, Any] = {"result": result}
        if reservation_token is not None:
            body["reservation_token"] = reservation_token
        return parse(ExecutionReport, self.transport.call("POST", _execution_path(key, "complete"), body=body, retry=retry))

    def fail(self, key: str, *, retryable: bool, reason: str, reservation_token: str | None = None,
             retry: RetryPolicy | None = None) -> ExecutionReport:
        """``POST /v1/executions/<key>/fail``: ``retryable=True`` releases the key (a retry runs
        the tool), ``False`` keeps the failure for retries to replay. ``reason``: 1-500 characters."""
        body: dict[str, Any] = {"retryable": retryable, "reason": reason}
        if reservation_token is not None:
            body["reservation_token"] = reservation_token
        return parse(ExecutionReport, self.transport.call("POST", _execution_path(key, "fail"), body=body, retry=retry))

    # tools -----------------------------------------------------------------------------------

    def capabilities(self, *, retry: RetryPolicy | None = None) -> list[ToolDescription]:
        """``GET /v1/capabilities``: the registered tools the caller's policy lets it use at
        all (offer only these to a model), sorted by name then version. A call is still
        decided in full by ``decide``."""
        return parse(ToolList, self.transport.call("GET", "/v1/capabilities", retry=retry)).tools

    # approvals -----------------------------------------------------------------------------

    def list_approvals(self, *, limit: int = 100, retry: RetryPolicy | None = None) -> list[Approval]:
        """``GET /v1/approvals?state=pending``: the pending approvals the caller may answer,
        soonest expiry first (``limit`` 1-500). Needs an approver role (else ``Forbidden``)."""
        answer = self.transport.call("GET", "/v1/approvals", params={"state": "pending", "limit": str(limit)}, retry=retry)
        return parse(ApprovalList, answer).approvals

    def get_approval(self, approval_id: str, *, retry: RetryPolicy | None = None) -> ApprovalResult:
        """``GET /v1/approvals/<id>`` as its requester or an approver; the requester gets the
        ``grant`` while the approval is approved and unused."""
        return parse(ApprovalResult, self.transport.call("GET", "/v1/approvals/" + quote(approval_id, safe=""), retry=retry))

    def answer_approval(self, approval_id: str, *, approved: bool, reason: str = "",
                        retry: RetryPolicy | None = None) -> ApprovalResult:
        """``POST /v1/approvals/<id>`` as an approver: ``approved`` with a ``reason`` (<= 500
        characters; a denial's reason becomes the next decide call's deny reason). Not
        idempotent: after a lost answer it is retried only if the request was never sent."""
        answer = self.transport.call(
            "POST", "/v1/approvals/" + quote(approval_id, safe=""), body={"approved": approved, "reason": reason},
            idempotent=False, retry=retry,
        )
        return parse(ApprovalResult, answer)

    def wait_for_approval(self, approval_id: str, *, timeout_s: float = 900.0, poll_interval_s: float = 1.0) -> ApprovalResult:
        """Read the approval every ``poll_interval_s`` (+/- 20 % jitter) until it is no longer
        ``pending``, and return that answer (approved with the grant, denied, expired or used).
        Raises ``ApprovalTimeout`` when it is still pending after ``timeout_s``."""
        deadline = Deadline(timeout_s)
        rng = random.Random()
        while True:
            policy = self.transport.retry
            left_s = deadline.left_s()
            shown = self.get_approval(approval_id, retry=_within(policy, max(left_s, policy.min_attempt_s)))
            if shown.approval.state != "pending":
                return shown
            pause_s = poll_interval_s * rng.uniform(0.8, 1.2)
            if pause_s >= deadline.left_s():
                raise ApprovalTimeout(approval_id, deadline.elapsed_s())
            time.sleep(pause_s)

    # the decision log ------------------------------------------------------------------------

    def query_decisions(self, *, limit: int = 100, cursor: str | None = None, retry: RetryPolicy | None = None,
                        **filters: str | dt.datetime | None) -> DecisionPage:
        """``GET /v1/decisions`` (auditor roles): one page, newest first. ``filters`` are
        ``DECISION_FILTERS``; ``since``/``until`` take RFC 3339 text or an aware datetime."""
        unknown = sorted(set(filters) - set(DECISION_FILTERS))
        if unknown:
            raise TypeError(f"unknown decision filters: {', '.join(unknown)}")
        params = {name: _query_value(value) for name, value in filters.items() if value is not None}
        params["limit"] = str(limit)
        if cursor is not None:
            params["cursor"] = cursor
        return parse(DecisionPage, self.transport.call("GET", "/v1/decisions", params=params, retry=retry))

    def iter_decisions(self, *, page_size: int = 100, **filters: str | dt.datetime | None) -> Iterator[DecisionRecord]:
        """Every matching record, newest first, following ``next_cursor`` page by page."""
        cursor: str | None = None
        while True:
            page = self.query_decisions(limit=page_size, cursor=cursor, retry=None, **filters)
            yield from page.records
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def get_decision(self, decision_id: str, *, retry: RetryPolicy | None = None) -> DecisionRecord:
        """``GET /v1/decisions/<id>`` (auditor roles)."""
        answer = self.transport.call("GET", "/v1/decisions/" + quote(decision_id, safe=""), retry=retry)
        record = answer.get("record")
        return parse(DecisionRecord, record if isinstance(record, dict) else {})

    # guarded tools ---------------------------------------------------------------------------

    def guarded(
        self,
        tool_fn: ToolFunction,
        *,
        tool: str,
        version: str = "1",
        retryable_errors: tuple[type[BaseException], ...] = (RetryableToolError,),
        failure_reason: FailureReason = exception_name,
    ) -> GuardedTool:
        """``tool_fn`` wrapped so that it runs only when the gateway allows it, at most once per
        idempotency key; see ``toolgate_client.guarded.GuardedTool``."""
        return GuardedTool(self, tool_fn, tool=tool, version=version, retryable_errors=retryable_errors,
                           failure_reason=failure_reason)


def _execution_path(key: str, report: str) -> str:
    return f"/v1/executions/{quote(key, safe='')}/{report}"


def _query_value(value: str | dt.datetime) -> str:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise ValueError("since/until datetimes must be timezone-aware")
        return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    return value


def _within(policy: RetryPolicy, seconds: float) -> RetryPolicy:
    """``policy`` with its deadline cut to ``seconds`` (for calls inside a longer wait)."""
    return replace(policy, deadline_s=min(policy.deadline_s, seconds))
