"""Replay recorded tool calls against a running gateway: how a security team dry-runs policies.

Input lines (JSONL), one call each:
- ``{"tool", "version"?, "namespace"?, "input", "context"?, "subject"?, "tenant"?, "roles"?,
  "tool_call_id"?}``, or
- the AgentDojo format ``{"function", "args", "task_text", "task_id", ...}`` (``function`` is
  the tool, ``args`` the input).
A line without a version means version ``"1"``. ``context`` (an object: the user's prompt, the
conversation id, whatever the agent sends) is sent as the call's context; ``prompt_field``
names a line member (AgentDojo's ``task_text``) sent as ``context.user_prompt`` (refused on a
line whose ``task_kind`` is ``"injection"``: its ``task_text`` is the attacker's goal; such calls
are replayed inside their user task, ``app.replay.trajectories``) and
``conversation_field`` one (``task_id``) sent as ``context.conversation_id``, unless the
line's own context has them. Every call is sent with ``dry_run: true``: the policy decides, but
no idempotency key is reserved and no approval is created, and the decision log keeps it as a
``decide_dry_run`` record (not in ``input.history``).

Identity: with a ``token`` (``--token`` / ``--token-file``: a token of the gateway's identity
provider) every call carries it, and a line that names its own subject, tenant or roles is an
error (a token speaks for one identity). Without one, each identity (the line's
subject/tenant/roles, else the command's) gets a development token, and only for a gateway
that says it is a development gateway (``GET /healthz`` answers ``"development": true``;
production never does): against any other gateway replay refuses (``ReplayRefused``).
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


class ReplayRefused(Exception):
    """Replay cannot run as asked (development tokens for a gateway that is not a development
    one); the message says why and what to do."""


@dataclass(frozen=True)
class ReplayOptions:
    """How lines become calls: the line members mapped into the context (None: none)."""

    prompt_field: str | None = None
    conversation_field: str | None = None


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


def _context(data: dict[str, Any], options: ReplayOptions) -> dict[str, Any]:
    context = data.get("context", {})
    if not isinstance(context, dict):
        raise ValueError("context must be an object")
    mapped = dict(context)
    if options.prompt_field is not None and "user_prompt" not in mapped and data.get("task_kind") == "injection":
        # AgentDojo's injection lines carry the attacker's goal in task_text: never the user's prompt.
        raise ValueError(
            f"an injection line's {options.prompt_field} is the attacker's goal, not the user's prompt:"
            " replay the injection inside its user task (toolgate replay --trajectory)"
        )
    for field_name, member in ((options.prompt_field, "user_prompt"), (options.conversation_field, "conversation_id")):
        if field_name is None or member in mapped or field_name not in data:
            continue
        value = data[field_name]
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            raise ValueError(f"{field_name} must be a string to become context.{member}")
        mapped[member] = str(value)
    return mapped


def parse_line(line: str, options: ReplayOptions = ReplayOptions()) -> dict[str, Any]:
    """One JSONL line -> ``{tool, version, namespace, input, context, identity overrides,
    tool_call_id}``.

    Raises ``ValueError`` when the line is not an object with a tool name and an input object,
    or has a context that is not an object.
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
        "namespace": data.get("namespace"),
        "input": tool_input,
        "context": _context(data, options),
        "tool_call_id": data.get("tool_call_id"),
        "subject": data.get("subject"),
        "tenant": data.get("tenant"),
        "roles": data.get("roles"),
    }


def _names_identity(call: dict[str, Any]) -> bool:
    return any(call[member] is not None for member in ("subject", "tenant", "roles"))


def require_development_gateway(session: requests.Session, url: str, timeout_s: float) -> None:
    """Raise ``ReplayRefused`` unless the gateway at ``url`` says it is a development gateway
    (``GET /healthz``: ``"development": true``). A gateway that does not answer is let through:
    its calls fail with "no answer" and no token reaches anyone."""
    try:
        resp = session.get(url.rstrip("/") + "/healthz", timeout=timeout_s)
    except requests.RequestException:
        return
    try:
        body = resp.json()
    except ValueError:
        body = None
    if not (isinstance(body, dict) and body.get("development") is True):
        raise ReplayRefused(
            f"{url} is not a development gateway: development tokens are only for one; pass a token of its"
            " identity provider with --token-file FILE (or --token TOKEN)"
        )


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
    path: Path,
    url: str,
    identity: ReplayIdentity,
    *,
    settings: Settings,
    timeout_s: float = 10.0,
    token: str | None = None,
    options: ReplayOptions = ReplayOptions(),
) -> ReplayReport:
    """Send every call in ``path`` to ``url``/v1/decide and collect the answers; with
    ``token`` every call carries it, else development tokens are minted (see the module
    docstring).

    Raises ``OSError`` when the file cannot be read, ``ReplayRefused`` when development tokens
    would go to a gateway that is not a development one, and ``RuntimeError`` when no
    development token can be minted (production settings).
    """
    report = ReplayReport()
    tokens: dict[ReplayIdentity, str] = {}
    endpoint = url.rstrip("/") + "/v1/decide"
    with requests.Session() as session, path.open(encoding="utf-8") as lines:
        if token is None:
            require_development_gateway(session, url, timeout_s)
        for index, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                call = parse_line(line, options)
            except ValueError as exc:
                report.results.append(ReplayResult(index, None, None, [], 0, f"unreadable line: {exc}"))
                continue
            if token is not None and _names_identity(call):
                error = "the line names a subject, tenant or roles, but --token speaks for one identity"
                report.results.append(ReplayResult(index, call["tool"], None, [], 0, error))
                continue
            if token is None:
                who = _identity(call, identity)
                if who not in tokens:
                    tokens[who] = mint_dev_token(settings, sub=who.sub, tenant=who.tenant, roles=list(who.roles))
                bearer = tokens[who]
            else:
                bearer = token
            body = {"tool": call["tool"], "version": call["version"], "input": call["input"],
                    "tool_call_id": call["tool_call_id"] or f"replay-{index}", "dry_run": True}
            if call["namespace"] is not None:
                body["namespace"] = call["namespace"]
            if call["context"]:
                body["context"] = call["context"]
            headers = {"Authorization": f"Bearer {bearer}"}
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
