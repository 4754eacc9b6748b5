"""Replay recorded tool calls against a running gateway: how a security team dry-runs policies.

Input lines (JSONL), one call each:
- ``{"tool", "version"?, "input", "subject"?, "tenant"?, "roles"?, "tool_call_id"?}``, or
- the AgentDojo format ``{"function", "args", ...}`` (``function`` is the tool, ``args`` the input).
A line without a version means version ``"1"``. Each call gets a development token for its
identity (the line's subject/tenant/roles, else the command's) and is sent with
``dry_run: true``: the policy decides, but no idempotency key is reserved and no approval is
created, and the decision log keeps it as a ``decide_dry_run`` record (not in ``input.history``).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from app.auth.dev_tokens import mint_dev_token
from app.settings import Settings
from app.terminal import json_printable, printable


@dataclass(frozen=True)
class ReplayIdentity:
    """Who the minted token speaks for."""

    sub: str
    tenant: str
    roles: tuple[str, ...] = ()


@dataclass
class ReplayResult:
    """The outcome of one line: a decision, or an error with its HTTP status (0: no answer)."""

    index: int
    tool: str | None
    decision: str | None
    reasons: list[str]
    http_status: int
    error: str | None = None


@dataclass
class ReplayReport:
    """All results and the counts per decision."""

    results: list[ReplayResult] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def decided(self) -> int:
        return sum(1 for r in self.results if r.decision is not None)

    @property
    def errors(self) -> int:
        return self.total - self.decided

    def by_decision(self) -> dict[str, int]:
        return dict(sorted(Counter(r.decision for r in self.results if r.decision).items()))

    def as_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "decided": self.decided,
            "errors": self.errors,
            "by_decision": self.by_decision(),
            "results": [
                {"index": r.index, "tool": r.tool, "decision": r.decision, "reasons": r.reasons,
                 "http_status": r.http_status, **({"error": r.error} if r.error else {})}
                for r in self.results
            ],
        }


def parse_line(line: str) -> dict[str, Any]:
    """One JSONL line -> ``{tool, version, input, identity overrides, tool_call_id}``.

    Raises ``ValueError`` when the line is not an object with a tool name and an input object.
    """
    data = json.loads(line)
    if not isinstance(data, dict):
        raise ValueError("line is not a JSON object")
    tool = data.get("tool", data.get("function"))
    tool_input = data.get("input", data.get("args", {}))
    if not isinstance(tool, str) or not isinstance(tool_input, dict):
        raise ValueError("line needs a string tool (or function) and an object input (or args)")
    return {
        "tool": tool,
        "version": str(data.get("version", "1")),
        "input": tool_input,
        "tool_call_id": data.get("tool_call_id"),
        "subject": data.get("subject"),
        "tenant": data.get("tenant"),
        "roles": data.get("roles"),
    }


def _identity(call: dict[str, Any], default: ReplayIdentity) -> ReplayIdentity:
    roles = call["roles"]
    if isinstance(roles, str):
        roles = roles.split()
    return ReplayIdentity(
        sub=call["subject"] if isinstance(call["subject"], str) else default.sub,
        tenant=call["tenant"] if isinstance(call["tenant"], str) else default.tenant,
        roles=tuple(roles) if isinstance(roles, list) else default.roles,
    )


def replay_file(
    path: Path, url: str, identity: ReplayIdentity, *, settings: Settings, timeout_s: float = 10.0
) -> ReplayReport:
    """Send every call in ``path`` to ``url``/v1/decide and collect the answers.

    Raises ``OSError`` when the file cannot be read and ``RuntimeError`` when no development
    token can be minted (production settings).
    """
    report = ReplayReport()
    tokens: dict[ReplayIdentity, str] = {}
    endpoint = url.rstrip("/") + "/v1/decide"
    with requests.Session() as session, path.open(encoding="utf-8") as lines:
        for index, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                call = parse_line(line)
            except ValueError as exc:
                report.results.append(ReplayResult(index, None, None, [], 0, f"unreadable line: {exc}"))
                continue
            who = _identity(call, identity)
            if who not in tokens:
                tokens[who] = mint_dev_token(settings, sub=who.sub, tenant=who.tenant, roles=list(who.roles))
            body = {"tool": call["tool"], "version": call["version"], "input": call["input"],
                    "tool_call_id": call["tool_call_id"] or f"replay-{index}", "dry_run": True}
            headers = {"Authorization": f"Bearer {tokens[who]}"}
            report.results.append(_send(session, endpoint, index, call["tool"], body, headers, timeout_s))
    return report


def _send(session: requests.Session, endpoint: str, index: int, tool: str, body: dict, headers: dict, timeout_s: float) -> ReplayResult:
    try:
        resp = session.post(endpoint, json=body, headers=headers, timeout=timeout_s)
    except requests.RequestException as exc:
        return ReplayResult(index, tool, None, [], 0, f"no answer: {type(exc).__name__}")
    try:
        data = resp.json()
    except ValueError:
        data = {}
    if resp.status_code == 200 and isinstance(data, dict) and data.get("decision"):
        return ReplayResult(index, tool, data["decision"], list(data.get("reasons") or []), 200)
    error = data.get("error", {}) if isinstance(data, dict) else {}
    return ReplayResult(index, tool, None, [], resp.status_code, f"{error.get('code', 'HTTP')}: {error.get('message', resp.reason)}")


def format_report(report: ReplayReport, *, as_json: bool = False) -> str:
    """One line per call (index, tool, decision or error, first reason) and a summary table;
    or the JSON document ``{total, decided, errors, by_decision, results}``. Text from the
    calls and the gateway's answers is escaped (``app.terminal.printable``)."""
    if as_json:
        return json_printable(json.dumps(report.as_json(), indent=2))
    lines = []
    for r in report.results:
        outcome = printable(r.decision or f"ERROR {r.http_status} {r.error}")
        reason = printable(r.reasons[0]) if r.reasons else ""
        lines.append(f"{r.index:>4}  {printable(str(r.tool)):<32} {outcome:<14} {reason}".rstrip())
    lines.append("")
    lines.append(f"{'decision':<16}{'count':>6}")
    for word, count in report.by_decision().items():
        lines.append(f"{printable(word):<16}{count:>6}")
    lines.append(f"{'errors':<16}{report.errors:>6}")
    lines.append(f"{'total':<16}{report.total:>6}")
    return "\n".join(lines)
