"""Capabilities: the tools a caller may use at all (DESIGN §3 "Capabilities").

A caller *may* use a tool when neither its role grants nor a rule that does not depend on the
call's input deny it. The policy says so in its capability document (``capability_path``,
default ``data.toolgate.capability``), asked once per tool with the input

    {"subject": {"id", "tenant", "roles"}, "tool": {"name", "version", "registered",
     "mutating", "risk", "annotations"?, "upstream"?}}

(no ``call``, ``context``, ``history`` or ``approval``: nothing the call would bring). Its
result has the shape of a decision (``{"decision": "allow"|"deny", "reasons": [...]}``) and
goes through the same strict normalization: ``allow`` (or ``user-approval``: some approval
would let it through) means *may*; ``deny``, an undefined document or any malformed result
means *may not*. An evaluation error fails the whole list (``DependencyUnavailable``): an
outage lists nothing. Capabilities only decide what is listed; every call is still decided
in full by ``decide``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.contracts.contract import ToolContract
from app.contracts.registry import ContractRegistry
from app.decide.stages import ToolAnnotations, ToolFacts
from app.engine.base import PolicyEngine
from app.models import Subject


@dataclass(frozen=True)
class Capability:
    """The policy's answer for one tool: ``may`` and the reasons it gave."""

    tool: ToolFacts
    may: bool
    reasons: tuple[str, ...]


def capability_input(subject: Subject, tool: ToolFacts) -> dict[str, Any]:
    """The input document of the capability question for ``tool``."""
    return {
        "subject": {"id": subject.id, "tenant": subject.tenant, "roles": list(subject.roles)},
        "tool": tool.as_input(),
    }


def evaluate(engine: PolicyEngine, subject: Subject, tools: Sequence[ToolFacts]) -> list[Capability]:
    """The capability of each of ``tools`` for ``subject``, in order. Raises
    ``DependencyUnavailable`` (503) when any evaluation fails: then nothing may be listed."""
    answers = []
    for tool in tools:
        decision = engine.evaluate(capability_input(subject, tool))
        may = decision.decision in ("allow", "user-approval") and not decision.normalized_from_invalid
        answers.append(Capability(tool=tool, may=may, reasons=decision.reasons))
    return answers


def contract_facts(
    contract: ToolContract, annotations: ToolAnnotations | None = None, upstream: str | None = None
) -> ToolFacts:
    """What the policy is told about a registered tool."""
    meta = contract.meta
    return ToolFacts(meta.name, meta.version, True, meta.mutating, meta.risk, annotations, meta.namespace,
                     meta.output_labels, upstream)


def tool_facts(
    contracts: ContractRegistry, name: str, version: str, annotations: ToolAnnotations | None, upstream: str | None = None
) -> ToolFacts:
    """What ``decide`` tells the policy about tool ``name`` ``version`` (``validation.validate``):
    the contract's facts, or those of a dynamic tool (mutating, high risk); ``upstream`` names
    the MCP upstream that offers it."""
    contract = contracts.get(name, version)
    if contract is not None:
        return contract_facts(contract, annotations, upstream)
    return ToolFacts(name, version, False, True, "high", annotations, upstream=upstream)


def usable_contracts(engine: PolicyEngine, contracts: ContractRegistry, subject: Subject) -> list[ToolContract]:
    """The registered contracts ``subject`` may use, sorted by name then version. Raises
    ``DependencyUnavailable`` (503)."""
    every = contracts.all()
    answers = evaluate(engine, subject, [contract_facts(c) for c in every])
    return [contract for contract, answer in zip(every, answers, strict=True) if answer.may]
