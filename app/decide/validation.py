"""Steps 3 and 4 of decide (DESIGN §2): parse the body, then validate ``input`` against the
tool's contract (or size-check the input of a dynamic tool)."""

from __future__ import annotations

import json
from typing import Any

from app.bodies import parse_body
from app.contracts.registry import ContractRegistry
from app.contracts.upstream_schema import validate_upstream_input
from app.decide.stages import Authenticated, Parsed, ToolFacts, Validated, advance
from app.errors import ValidationFailed
from app.fingerprint import fingerprint
from app.models import DecideRequest
from app.settings import ContractSettings, RequestLimits


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a JSON value, stopping once ``limit`` is exceeded (iterative)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return deepest


def parse(stage: Authenticated, contracts: ContractRegistry, limits: RequestLimits) -> Parsed:
    """Body -> ``DecideRequest`` and the tool's contract. Raises ``ValidationFailed``: 400
    malformed, 422 envelope schema, 422 input nested deeper than ``max_input_depth``."""
    request = parse_body(DecideRequest, stage.call.body, "request does not match the decide schema")
    if _depth(request.input, limits.max_input_depth) > limits.max_input_depth:
        raise ValidationFailed(
            f"input is nested deeper than {limits.max_input_depth} levels",
            http_status=422,
            details={"problems": [{"path": "/input", "message": "too deeply nested"}]},
        )
    contract = contracts.get(request.tool, request.version, request.namespace)
    sensitive = contract.meta.sensitive_paths if contract else contracts.sensitive_paths(request.tool, request.namespace)
    return advance(stage, Parsed, request=request, contract=contract, sensitive_paths=sensitive)


def validate(stage: Parsed, settings: ContractSettings) -> Validated:
    """Validate the input against the contract, or check the input of a dynamic tool (one
    without a contract: assumed mutating and high risk): its size, and its upstream definition's
    input schema when the call has one (``DecideCall.tool_definition``). Raises
    ``ValidationFailed`` (422) with ``details.problems``."""
    request, contract = stage.request, stage.contract
    definition = stage.call.tool_definition
    annotations = definition.annotations if definition else None
    upstream = definition.upstream if definition else None
    if contract is None:
        size = len(json.dumps(request.input, separators=(",", ":"), ensure_ascii=False).encode())
        limit = settings.dynamic_tool_max_input_bytes
        if size > limit:
            raise ValidationFailed(
                "input of an unregistered tool is too large",
                http_status=422,
                details={"problems": [{"path": "/input", "message": f"larger than {limit} bytes"}]},
            )
        if definition is not None:
            validate_upstream_input(definition.input_schema, request.input)
        normalized = request.input
        tool = ToolFacts(request.tool, request.version, False, True, "high", annotations, request.namespace, upstream=upstream)
    else:
        normalized = contract.validate_input(request.input)
        meta = contract.meta
        tool = ToolFacts(meta.name, meta.version, True, meta.mutating, meta.risk, annotations, meta.namespace,
                         meta.output_labels, upstream)
    try:
        input_fingerprint: str | None = fingerprint(stage.subject.tenant, stage.subject.id, tool.qualified, tool.version, normalized)
    except ValidationFailed:
        input_fingerprint = None
    return advance(stage, Validated, tool=tool, normalized_input=normalized, fingerprint=input_fingerprint)


def require_fingerprint(stage: Validated) -> str:
    """The call's fingerprint, for what must be bound to it (an idempotency record). Raises the
    ``ValidationFailed`` (422) of ``app.fingerprint`` when the input has no RFC 8785 form."""
    if stage.fingerprint is not None:
        return stage.fingerprint
    subject, tool = stage.subject, stage.tool
    return fingerprint(subject.tenant, subject.id, tool.qualified, tool.version, stage.normalized_input)
