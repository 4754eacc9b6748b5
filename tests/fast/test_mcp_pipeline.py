"""The decide pipeline's MCP facts (a tool's upstream definition: input schema and
annotations) and the capability answers, over in-memory stand-ins."""

from __future__ import annotations

import json

from app.decide import capabilities
from app.decide.phases import Phases
from app.decide.pipeline import decide
from app.decide.stages import DecideCall, Progress, ToolAnnotations, ToolDefinition, ToolFacts
from app.errors import ValidationFailed
from app.models import PolicyDecision, Subject
from tests.support import fakes

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": False}
HINTS = ToolAnnotations(read_only=True, destructive=False)


def run(deps, tool_input, definition):
    call = DecideCall(request_id="r-1", authorization=(fakes.bearer(deps.settings),),
                      body=json.dumps({"tool": "read_note", "input": tool_input}).encode(), tool_definition=definition)
    try:
        return decide(deps, Progress(call), Phases())
    except ValidationFailed as exc:
        return exc


def test_annotations_reach_the_policy_and_the_upstream_schema_validates_a_dynamic_tool(deps, engine) -> None:
    assert run(deps, {"name": "welcome"}, ToolDefinition(SCHEMA, HINTS)).decision == "allow"
    assert engine.inputs[0]["tool"] == {
        "name": "read_note", "version": "1", "namespace": "", "registered": False, "mutating": True, "risk": "high", "output_labels": [],
        "annotations": {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": False, "openWorldHint": True},
    }
    refused = run(deps, {"name": 7, "extra": True}, ToolDefinition(SCHEMA, HINTS))
    assert isinstance(refused, ValidationFailed) and refused.http_status == 422
    assert [p["path"] for p in refused.details["problems"]] == ["", "/name"]
    assert len(engine.inputs) == 1  # refused before the policy
    [_, record] = fakes.records(deps)
    assert record.error_code == "VALIDATION_ERROR" and record.tool == "read_note"


def test_an_unusable_upstream_schema_refuses_the_call(deps, engine) -> None:
    refused = run(deps, {"name": "x"}, ToolDefinition({"type": "string"}, HINTS))
    assert isinstance(refused, ValidationFailed) and engine.inputs == []


def test_without_a_definition_the_policy_input_is_unchanged(deps, engine) -> None:
    run(deps, {"name": "welcome"}, None)
    assert "annotations" not in engine.inputs[0]["tool"]


def test_may_is_allow_or_user_approval_and_anything_else_is_may_not() -> None:
    answers = {"a": "allow", "b": "user-approval", "c": "deny"}
    engine = fakes.ScriptedEngine(lambda doc: PolicyDecision(decision=answers[doc["tool"]["name"]]))
    tools = [ToolFacts(name, "1", False, True, "high") for name in ("a", "b", "c")]
    got = capabilities.evaluate(engine, Subject(id="u", tenant="t", roles=("r",)), tools)
    assert [c.may for c in got] == [True, True, False]
    assert engine.inputs[0] == {"subject": {"id": "u", "tenant": "t", "roles": ["r"]},
                                "tool": {"name": "a", "version": "1", "namespace": "", "registered": False, "mutating": True, "risk": "high",
                                         "output_labels": []}}


def test_a_normalized_invalid_result_is_may_not() -> None:
    invalid = PolicyDecision(decision="deny", reasons=("no policy decision",), normalized_from_invalid=True)
    engine = fakes.ScriptedEngine(lambda _: invalid)
    [answer] = capabilities.evaluate(engine, Subject(id="u", tenant="t"), [ToolFacts("a", "1", True, False, "low")])
    assert answer.may is False
