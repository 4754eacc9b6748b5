"""One ``tools/call`` through ``toolgate mcp``: decide it in-process, then forward, answer or
ask for approval.

    find the tool -> decide (the pipeline of app.decide, same contracts, policies, keys,
    approvals and decision log) -> deny: error result | user-approval: elicitation or an
    error result with the approval id | allow: replay, or forward and record the result

Idempotency: a call that may change something (a contract that says ``mutating``; a tool
without one whose ``readOnlyHint`` is not true) always has a key, so one request never runs
twice: ``_meta["toolgate/idempotencyKey"]`` when the client sends one, the contract's key
field when the arguments hold it, else one derived from what identifies the request: the
caller, the tool, the arguments, the MCP session and the JSON-RPC request id (a transport
retry repeats the id in the same session; a new request, or a client that reconnected, is
another call; a 2026-07-28 request has no session and is its own call). Two different
requests are never merged (docs/design.md §4).

The upstream's result is stored as the call's execution report, unless it is an error result
(``isError``): that releases the key (the call may run again once its cause is fixed), except
for a contract with ``error_results_final``. A call sent upstream that did not end with a
valid result is recorded as failed and not run again (its outcome is unknown); one that could
not be sent releases its key and is a retryable ``INTERNAL_ERROR``.

Errors: the gateway's own refusals (arguments against the schema, key conflicts) are error
results the model can act on; a policy or store outage, and an upstream failure, are MCP
errors (``INTERNAL_ERROR``), each recorded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from cachetools import TTLCache
from mcp import MCPError
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.message import ServerMessageMetadata
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from app.decide import reports
from app.decide.deps import Deps
from app.decide.events import RequestFacts
from app.decide.phases import Phases
from app.decide.pipeline import decide
from app.decide.stages import DecideCall, Progress, ToolDefinition
from app.errors import DependencyUnavailable, ToolgateError, Unauthenticated, ValidationFailed
from app.idempotency.keys import validate_key
from app.mcp import results
from app.mcp.relay import Relays
from app.mcp.upstreams import UpstreamFailed, UpstreamPool, UpstreamTool, UpstreamUnavailable
from app.models import DecideResponse, Subject

log = logging.getLogger(__name__)

IDEMPOTENCY_KEY_META = "toolgate/idempotencyKey"
TOOL_CALL_ID_META = "toolgate/toolCallId"
CONTEXT_META = "toolgate/context"
APPROVAL_META = "toolgate/approval"
#: The key of the gateway's elicitation among a 2026-07-28 ``InputRequiredResult``'s requests.
APPROVAL_INPUT = "toolgate/approval"
#: Calls remembered per gateway process (grants used, approvals opened).
_KEPT = 10_000
#: ``data`` of the MCP error of a call that was not sent: it may be sent again.
_UNSENT = {"retryable": True}


@dataclass(frozen=True)
class Caller:
    """The authenticated client of one MCP message: its verified subject and the
    ``Authorization`` values the decide pipeline verifies again (cached)."""

    subject: Subject
    authorization: tuple[str, ...]


@dataclass(frozen=True)
class ToolCall:
    """What one ``tools/call`` asks, resolved: the tool, the contract version it is decided
    under, the arguments, and the decide facts taken from ``_meta``."""

    tool: UpstreamTool
    version: str
    arguments: dict[str, Any]
    tool_call_id: str | None
    context: dict[str, Any]
    key: str | None
    #: Identifies "the same call" (caller, tool, call id, arguments) whether or not it has a key:
    #: the approval a retried call belongs to is found by it.
    ref: str


@dataclass(frozen=True)
class Exchange:
    """What identifies one request on the wire: the MCP session it came on (the HTTP
    ``Mcp-Session-Id``; over stdio, the one connection of the process; a request without a
    session is a session of its own) and its JSON-RPC request id."""

    session: str
    request_id: str | int | None
    #: Whether ``session`` is one the client keeps (not made up for a request without one).
    stateful: bool = True


def _meta(params: types.CallToolRequestParams) -> dict[str, Any]:
    return dict(params.meta or {})


def _digest(material: list[Any]) -> str:
    return "mcp-" + hashlib.sha256(json.dumps(material, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def call_ref(subject: Subject, tool: str, version: str, tool_call_id: str | None, arguments: dict[str, Any]) -> str:
    """``mcp-`` and the SHA-256 of the caller, the tool, the call id and the arguments
    (sorted-key JSON): the same call, asked again."""
    return _digest([subject.id, tool, version, tool_call_id, arguments])


def derived_key(ref: str, exchange: Exchange) -> str:
    """The idempotency key of a call that sends none: the call's ``ref`` within one request
    (its session and JSON-RPC id)."""
    return _digest([ref, exchange.session, exchange.request_id])


def _request_id() -> str:
    return "mcp-" + uuid.uuid4().hex


async def run_decide(
    deps: Deps, caller: Caller, body: dict[str, Any], key: str | None, definition: ToolDefinition
) -> DecideResponse:
    """One run of the decide pipeline with the decide ``body`` (in a worker thread: it is
    synchronous). Raises what ``decide`` raises."""
    decide_call = DecideCall(request_id=_request_id(), authorization=caller.authorization,
                             body=json.dumps(body).encode(), idempotency_key=key, tool_definition=definition)
    return await anyio.to_thread.run_sync(partial(decide, deps, Progress(decide_call), Phases()))


def _progress_relay(ctx: Any, params: types.CallToolRequestParams) -> ProgressFnT | None:
    """What passes the upstream's progress of a call on to the client, under the client's own
    progress token; None when the client asked for no progress."""
    token = (params.meta or {}).get("progress_token")
    if not isinstance(token, str | int):
        return None

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        await ctx.session.send_progress_notification(token, progress, total, message, related_request_id=ctx.request_id)

    return relay


def _elicitation_supported(ctx: Any) -> bool:
    """The client declared form elicitation (``elicitation: {}`` counts as form, as MCP says)."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


class ToolCalls:
    """Decides and runs the ``tools/call`` of ``toolgate mcp`` (see the module docstring)."""

    def __init__(self, deps: Deps, pool: UpstreamPool) -> None:
        self._deps = deps
        self._pool = pool
        self._relays = Relays(pool)
        #: The one client of a stdio gateway.
        self._stdio_session = uuid.uuid4().hex
        self._versions = dict(pair.split(":", 1) for pair in deps.settings.mcp_tool_versions if ":" in pair)
        retention = deps.settings.idempotency_retention_s
        #: Grants used by an attempt, by (tenant, subject, key): a retry of the attempt shows it again.
        self._grants: TTLCache[tuple[str, str, str], tuple[str, str]] = TTLCache(_KEPT, ttl=retention)
        #: The approval opened for a call, by (tenant, subject, call ref): its retry looks it up.
        self._opened: TTLCache[tuple[str, str, str], str] = TTLCache(_KEPT, ttl=retention)

    # --- resolving the call ---------------------------------------------------------------

    def version_of(self, name: str) -> str:
        """The contract version a tool is decided under (``TOOLGATE_MCP_TOOL_VERSIONS``, else 1)."""
        return self._versions.get(name, "1")

    def exchange(self, ctx: Any) -> Exchange:
        """The session and JSON-RPC id of the request ``ctx`` serves."""
        request = getattr(ctx, "request", None)
        if request is None:
            return Exchange(self._stdio_session, ctx.request_id)
        session = request.headers.get("mcp-session-id")
        return Exchange(session or uuid.uuid4().hex, ctx.request_id, stateful=session is not None)

    def _resolve(self, caller: Caller, tool: UpstreamTool, params: types.CallToolRequestParams, exchange: Exchange) -> ToolCall:
        meta = _meta(params)
        version = self.version_of(tool.name)
        arguments = params.arguments or {}
        call_id = meta.get(TOOL_CALL_ID_META)
        context = meta.get(CONTEXT_META) or {}
        if (call_id is not None and not isinstance(call_id, str)) or not isinstance(context, dict):
            raise ValidationFailed(
                "toolgate/toolCallId must be a string and toolgate/context an object", http_status=400
            )
        ref = call_ref(caller.subject, tool.name, version, call_id, arguments)
        explicit = meta.get(IDEMPOTENCY_KEY_META)
        if explicit is not None:
            key: str | None = validate_key(explicit) if isinstance(explicit, str) else validate_key("")
        else:
            key = derived_key(ref, exchange) if self._needs_key(tool, version, arguments) else None
        return ToolCall(tool, version, arguments, call_id, context, key, ref)

    def _needs_key(self, tool: UpstreamTool, version: str, arguments: dict[str, Any]) -> bool:
        """Whether the gateway derives a key: not for a read-only tool, nor when the pipeline
        takes the key from the arguments (the contract's key field)."""
        contract = self._deps.contracts.get(tool.name, version)
        if contract is not None:
            field = contract.meta.idempotency_key_field
            return contract.meta.mutating and not (field and arguments.get(field) is not None)
        return not tool.definition.annotations.read_only

    # --- deciding ----------------------------------------------------------------------------

    async def _decide(self, caller: Caller, call: ToolCall, approval: dict[str, str] | None = None) -> DecideResponse:
        """One run of the decide pipeline for ``call``. Raises what ``decide`` raises."""
        body: dict[str, Any] = {"tool": call.tool.name, "version": call.version, "input": call.arguments,
                                "context": call.context}
        if call.tool_call_id is not None:
            body["tool_call_id"] = call.tool_call_id
        if approval is not None:
            body["approval"] = approval
        return await run_decide(self._deps, caller, body, call.key, call.tool.definition)

    async def call(self, ctx: Any, caller: Caller, params: types.CallToolRequestParams) -> types.CallToolResult | types.InputRequiredResult:
        """Answer one ``tools/call`` (see the module docstring). Raises ``MCPError``:
        ``INVALID_PARAMS`` for an unknown tool, ``INVALID_REQUEST`` for a rejected token,
        ``INTERNAL_ERROR`` for an outage or an upstream failure (``data.retryable`` when nothing
        was sent)."""
        tool = await self._pool.find(params.name)
        if tool is None:
            if self._pool.incomplete:  # the tool may be on an upstream that cannot be reached now
                raise MCPError(INTERNAL_ERROR, "an upstream is unavailable", data=_UNSENT)
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name[:128]}")
        try:
            call = self._resolve(caller, tool, params, self.exchange(ctx))
            response = await self._decide(caller, call, await self._presented(caller, call, params))
            if response.decision == "user-approval":
                approved = await self._approval(ctx, caller, call, response, params)
                if not isinstance(approved, DecideResponse):
                    return approved
                response = approved
        except ToolgateError as error:
            return _answer_error(error)
        if response.decision == "deny":
            return results.denied(response)
        if response.decision == "user-approval":
            return results.approval_pending(response)
        return await self._execute(ctx, caller, call, response, _progress_relay(ctx, params))

    async def _presented(
        self, caller: Caller, call: ToolCall, params: types.CallToolRequestParams
    ) -> dict[str, str] | None:
        """The approval this call presents: the grant its attempt used before (a retry of it);
        else the approval named in ``_meta["toolgate/approval"]`` or opened for the same call
        earlier, once answered (its grant, or for a denial its id alone)."""
        subject = caller.subject
        if call.key is not None:
            kept = self._grants.get((subject.tenant, subject.id, call.key))
            if kept is not None:
                return {"approval_id": kept[0], "grant": kept[1]}
        named = _meta(params).get(APPROVAL_META)
        approval_id = named.get("approval_id") if isinstance(named, dict) else None
        if not isinstance(approval_id, str):
            approval_id = self._opened.get((subject.tenant, subject.id, call.ref))
        if approval_id is None:
            return None
        approval, grant = await anyio.to_thread.run_sync(self._deps.approvals.show, subject, approval_id)
        if approval.state == "approved" and grant is not None:
            self._keep(caller, call, approval_id, grant)
            return {"approval_id": approval_id, "grant": grant}
        return {"approval_id": approval_id} if approval.state == "denied" else None

    def _keep(self, caller: Caller, call: ToolCall, approval_id: str, grant: str) -> None:
        if call.key is not None:
            self._grants[(caller.subject.tenant, caller.subject.id, call.key)] = (approval_id, grant)

    # --- approvals ---------------------------------------------------------------------------

    async def _approval(
        self, ctx: Any, caller: Caller, call: ToolCall, response: DecideResponse, params: types.CallToolRequestParams
    ) -> DecideResponse | types.CallToolResult | types.InputRequiredResult:
        """A ``user-approval``: proceed with the grant once the approval is answered; else ask
        the client (elicitation) when it can be asked; else the pending approval's result."""
        assert response.approval is not None
        approval_id = response.approval.approval_id
        subject = caller.subject
        self._opened[(subject.tenant, subject.id, call.ref)] = approval_id
        approval, grant = await anyio.to_thread.run_sync(self._deps.approvals.show, subject, approval_id)
        if approval.state in ("approved", "denied"):
            return await self._with_answer(caller, call, approval_id, grant)
        if not _elicitation_supported(ctx):
            return results.approval_pending(response)
        # Never an answer from the requester's own session: the client is told whom to ask; a
        # requester who may confirm her own call does so with a step-up token (DESIGN §5).
        answer = await self._ask(ctx, params, response)
        if isinstance(answer, types.InputRequiredResult):
            return answer
        if answer is None or answer.action == "cancel":
            return results.approval_pending(response)
        if answer.action != "accept":
            return results.approval_pending(response)
        approval, grant = await anyio.to_thread.run_sync(self._deps.approvals.show, subject, approval_id)
        if approval.state in ("approved", "denied"):
            return await self._with_answer(caller, call, approval_id, grant)
        return results.approval_pending(response)

    async def _with_answer(self, caller: Caller, call: ToolCall, approval_id: str, grant: str | None) -> DecideResponse:
        """Decide again presenting the answered approval (its grant, or for a denial none: the
        pipeline then denies with the approver's reason). Keeps the grant for retries."""
        presented = {"approval_id": approval_id, **({"grant": grant} if grant else {})}
        if grant:
            self._keep(caller, call, approval_id, grant)
        return await self._decide(caller, call, presented)

    async def _ask(
        self, ctx: Any, params: types.CallToolRequestParams, response: DecideResponse
    ) -> types.ElicitResult | types.InputRequiredResult | None:
        """The client's answer to the approval elicitation: asked now on a handshake-era
        connection, or through an ``InputRequiredResult`` on a 2026-07-28 one (the answer comes
        with the retried request). None when the client answered something else. The client
        only acknowledges: the answer itself comes from an approver (or the requester's
        step-up token) through the approvals API."""
        assert response.approval is not None
        message = (
            f"This call of {response.tool.name} needs an approver's answer ({response.approval.request_reason}); "
            f"approval {response.approval.approval_id}. Accept once it is answered to continue."
        )
        schema: dict[str, Any] = {"type": "object", "properties": {}}
        # The approval in structured form too, under the same key as on a pending result.
        request = types.ElicitRequest(params=types.ElicitRequestFormParams.model_validate({
            "message": message, "requestedSchema": schema,
            "_meta": {APPROVAL_META: response.approval.model_dump(mode="json")},
        }))
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            answered = (params.input_responses or {}).get(APPROVAL_INPUT)
            if answered is None:
                return types.InputRequiredResult(input_requests={APPROVAL_INPUT: request})
            return answered if isinstance(answered, types.ElicitResult) else None
        return await ctx.session.send_request(request, types.ElicitResult,
                                              metadata=ServerMessageMetadata(related_request_id=ctx.request_id))

    # --- running -----------------------------------------------------------------------------

    async def _execute(
        self, ctx: Any, caller: Caller, call: ToolCall, response: DecideResponse, progress: ProgressFnT | None
    ) -> types.CallToolResult:
        """An allowed call: replay its stored outcome, or forward it (its progress to
        ``progress``, the upstream's requests to the client when it can answer them) and
        record the result."""
        idempotency = response.idempotency
        if idempotency is not None and idempotency.state == "replayed":
            return results.replayed(response)
        token = idempotency.reservation_token if idempotency is not None else None
        tool = call.tool
        try:
            result = await self._relayed(ctx, tool, call.arguments, progress)
            outcome = self._checked(call, result)
        except UpstreamUnavailable as exc:
            await self._failed(caller, call, token, retryable=True, reason=f"{exc}; the call was not sent")
            raise MCPError(INTERNAL_ERROR, f"upstream {tool.upstream.name} is unavailable", data=_UNSENT) from exc
        except UpstreamFailed as exc:
            unknown = "" if exc.sent_but_refused else "; whether it ran is unknown"
            await self._failed(caller, call, token, retryable=exc.sent_but_refused, reason=f"{exc}{unknown}")
            data = {"kind": exc.kind, **({"upstream_code": exc.code} if exc.code is not None else {})}
            raise MCPError(INTERNAL_ERROR, f"upstream {tool.upstream.name} failed ({exc.kind})", data=data) from exc
        if call.key is not None and token is not None:
            if result.is_error and not self._errors_final(call):
                reason = f"upstream {tool.upstream.name} answered an error result"
                await self._failed(caller, call, token, retryable=True, reason=reason)
            else:
                await self._completed(caller, call, response, outcome, token)
        return results.with_decision(result, response)

    async def _relayed(
        self, ctx: Any, tool: UpstreamTool, arguments: dict[str, Any], progress: ProgressFnT | None
    ) -> types.CallToolResult:
        """Call the tool upstream, through the client session's own connection when it gets one
        (``app.mcp.relay``). Raises as ``Upstream.call_tool``."""
        exchange = self.exchange(ctx)
        if not exchange.stateful:
            return await tool.upstream.call_tool(tool.tool.name, arguments, progress)
        upstream, relay = await self._relays.route(exchange.session, tool.upstream, ctx)
        if relay is not None:
            relay.serving = ctx
        try:
            return await upstream.call_tool(tool.tool.name, arguments, progress)
        finally:
            if relay is not None and relay.serving is ctx:
                relay.serving = None

    async def _completed(self, caller: Caller, call: ToolCall, response: DecideResponse, outcome: dict[str, Any], token: str) -> None:
        """Store the result as the outcome of the call's key. Raises ``MCPError`` when it
        cannot be stored (the tool ran)."""
        assert call.key is not None
        try:
            await anyio.to_thread.run_sync(
                partial(reports.record_complete, self._deps, RequestFacts(_request_id(), None), caller.subject,
                        call.key, outcome, token=token)
            )
        except ToolgateError as error:
            log.error("the result of an executed call could not be stored: %s", error.code,
                      extra={"event": "mcp_report_failed", "decision_id": response.decision_id, "code": error.code})
            raise MCPError(INTERNAL_ERROR, "the tool ran but its result could not be recorded") from error

    def _errors_final(self, call: ToolCall) -> bool:
        """Whether the tool's contract says its error results are outcomes (kept and replayed)."""
        contract = self._deps.contracts.get(call.tool.name, call.version)
        return contract is not None and contract.meta.error_results_final

    def _checked(self, call: ToolCall, result: types.CallToolResult) -> dict[str, Any]:
        """The stored form of an upstream result, after checking its structured content
        against the contract's output schema (when it has one and the result is no error).
        Raises ``UpstreamFailed`` (malformed)."""
        contract = self._deps.contracts.get(call.tool.name, call.version)
        if contract is not None and contract.output_schema is not None and not result.is_error:
            try:
                contract.validate_output(result.structured_content)
            except ValidationFailed as exc:
                raise UpstreamFailed("malformed", "the upstream result does not match the tool's output schema") from exc
        return results.stored(result)

    async def _failed(self, caller: Caller, call: ToolCall, token: str | None, *, retryable: bool, reason: str) -> None:
        """Record an upstream failure: on the call's key (``retryable`` releases it), or, for a
        call without one, as a failure record of its own."""
        facts = RequestFacts(_request_id(), None)
        try:
            if call.key is not None and token is not None:
                await anyio.to_thread.run_sync(
                    partial(reports.record_failure, self._deps, facts, caller.subject, call.key,
                            retryable=retryable, reason=reason[:500], token=token)
                )
            else:
                await anyio.to_thread.run_sync(
                    partial(reports.record_unkeyed_failure, self._deps, facts, caller.subject, call.tool.name,
                            call.version, reason[:500])
                )
        except ToolgateError as error:
            log.error("an upstream failure could not be recorded: %s", error.code,
                      extra={"event": "mcp_failure_unrecorded", "code": error.code})


def _answer_error(error: ToolgateError) -> types.CallToolResult:
    """A ``ToolgateError`` of the decide pipeline as the answer to a ``tools/call``: outages
    and rejected tokens are MCP errors; refusals the caller can fix are error results."""
    if isinstance(error, Unauthenticated):
        raise MCPError(INVALID_REQUEST, "authentication failed") from error
    if isinstance(error, DependencyUnavailable) or error.http_status >= 500:
        data = {"code": error.code, "retryable": error.retryable}
        raise MCPError(INTERNAL_ERROR, "authorization service unavailable", data=data) from error
    return results.refused(error)
