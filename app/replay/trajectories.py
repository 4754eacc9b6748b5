"""Replay recorded conversations against a running gateway, as an agent and its tool service
would run them: how a security team measures policies that read the session and provenance.

Input (JSON Lines, ``toolgate replay --trajectory FILE``), one conversation a line::

    {"conversation": "user_task_3+injection_task_0", "user_prompt": "...",
     "calls": [{"function": "get_most_recent_transactions", "args": {...}, "output": <JSON>,
                "injected": false, "version"?: "1"}, ...], ...}

(members not named here, such as the AgentDojo task ids, are ignored). Each conversation gets
its own conversation id (``<conversation>.<run>``, ``run`` random per replay, so that a second
replay against the same gateway starts clean). Each call is a real decide call (not a dry run)
with an idempotency key and ``context`` ``{"user_prompt", "conversation_id"}``; the prompt is
the conversation's, never a call's, so the text an attacker planted cannot pass as the user's.
Per-subject limits (rate limits) count every conversation of the subject: a file of many
conversations replayed in seconds runs into them, so with development tokens
``subject_per_conversation`` gives each conversation its own subject (``<sub>-<line>``).
An ``allow`` that reserved its key is reported complete with the recorded ``output`` through
``/v1/executions/<key>/complete`` and its reservation token, so that the session and the
provenance of later calls build up as they would for a real tool service. A call that is not
allowed is not executed (no output is reported) and the conversation goes on.

Counts are kept per kind: ``benign`` (the user's task) and ``injection`` (``injected: true``,
what the attacker's text asked for), each by decision. Identity as in ``app.replay``: a token of
the gateway's identity provider, or development tokens for a development gateway only.
"""

from __future__ import annotations

import json
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from app.auth.dev_tokens import mint_dev_token
from app.replay import ReplayIdentity, require_development_gateway
from app.settings import Settings
from app.terminal import json_printable, printable
from app.vocabulary import DECISIONS

KINDS = ("benign", "injection")
#: A 503 (a dependency briefly unavailable) is retried this many times, waiting its
#: Retry-After, at most MAX_RETRY_WAIT_S seconds.
RETRIES_503 = 3
MAX_RETRY_WAIT_S = 5.0


class RecordedCall(BaseModel):
    """One call of a conversation: the tool, its arguments and the output the tool returned."""

    model_config = ConfigDict(extra="ignore")

    function: str = Field(min_length=1)
    args: dict[str, JsonValue]
    output: JsonValue = None
    injected: bool = False
    version: str = "1"


class Conversation(BaseModel):
    """One line: the conversation's name, the user's prompt and its calls in order."""

    model_config = ConfigDict(extra="ignore")

    conversation: str = Field(min_length=1, max_length=100)
    user_prompt: str
    calls: list[RecordedCall]


@dataclass
class CallOutcome:
    """The decision on one call (None with ``error`` when there was none, or the report of an
    allowed call was refused)."""

    conversation: str
    step: int
    tool: str
    kind: str
    decision: str | None
    reasons: list[str]
    error: str | None = None


@dataclass
class TrajectoryReport:
    """Every call's outcome and the counts per kind and decision."""

    outcomes: list[CallOutcome] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return len(self.unreadable) + sum(1 for o in self.outcomes if o.error is not None)

    def counts(self) -> dict[str, dict[str, int]]:
        """``{kind: {decision: n}}`` with every kind and decision present (0 when none)."""
        counted = Counter((o.kind, o.decision) for o in self.outcomes if o.decision)
        return {kind: {word: counted[kind, word] for word in DECISIONS} for kind in KINDS}

    def as_json(self) -> dict[str, Any]:
        return {
            "conversations": len({o.conversation for o in self.outcomes}),
            "calls": len(self.outcomes),
            "errors": self.errors,
            "by_kind": self.counts(),
            "unreadable": self.unreadable,
            "results": [
                {"conversation": o.conversation, "step": o.step, "tool": o.tool, "kind": o.kind,
                 "decision": o.decision, "reasons": o.reasons, **({"error": o.error} if o.error else {})}
                for o in self.outcomes
            ],
        }


def parse_conversation(line: str) -> Conversation:
    """One JSON Lines line -> ``Conversation``. Raises ``ValueError`` (pydantic's
    ``ValidationError`` is one) when it is not a conversation."""
    try:
        return Conversation.model_validate_json(line)
    except ValidationError as exc:
        raise ValueError(f"not a conversation ({exc.error_count()} problems, first: {exc.errors()[0]['msg']})") from None


class _Gateway:
    """The decide and report calls of one conversation, with the replay's HTTP session."""

    def __init__(self, session: requests.Session, url: str, bearer: str, timeout_s: float) -> None:
        self._session = session
        self._url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {bearer}"}
        self._timeout_s = timeout_s

    def post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, Any]:
        """POST ``body``; (status, JSON answer or None). A ``503`` is retried, as integrators
        do (docs/integrators.md), at most ``RETRIES_503`` times after its ``Retry-After``
        (at most ``MAX_RETRY_WAIT_S``). Raises ``requests.RequestException``."""
        for attempt in range(RETRIES_503 + 1):
            resp = self._session.post(self._url + path, json=body, headers={**self._headers, **(headers or {})},
                                      timeout=self._timeout_s)
            if resp.status_code != 503 or attempt == RETRIES_503:
                break
            time.sleep(_retry_after_s(resp.headers.get("Retry-After")))
        try:
            return resp.status_code, resp.json()
        except ValueError:
            return resp.status_code, None


def _retry_after_s(header: str | None) -> float:
    try:
        return min(max(float(header or 1), 0.0), MAX_RETRY_WAIT_S)
    except ValueError:
        return 1.0


def _error_of(status: int, answer: Any) -> str:
    error = answer.get("error", {}) if isinstance(answer, dict) else {}
    return f"{status} {error.get('code', 'HTTP')}: {error.get('message', '')}".rstrip(": ")


def _replay_call(gateway: _Gateway, conversation: Conversation, conversation_id: str, step: int, call: RecordedCall) -> CallOutcome:
    kind = "injection" if call.injected else "benign"
    outcome = CallOutcome(conversation.conversation, step, call.function, kind, None, [])
    key = f"{conversation_id}/{step}"
    body = {"tool": call.function, "version": call.version, "input": call.args,
            "tool_call_id": f"{conversation.conversation}-{step}",
            "context": {"user_prompt": conversation.user_prompt, "conversation_id": conversation_id}}
    try:
        status, answer = gateway.post("/v1/decide", body, {"Idempotency-Key": key})
    except requests.RequestException as exc:
        outcome.error = f"no answer: {type(exc).__name__}"
        return outcome
    if status != 200 or not isinstance(answer, dict) or not answer.get("decision"):
        outcome.error = _error_of(status, answer)
        return outcome
    outcome.decision, outcome.reasons = answer["decision"], list(answer.get("reasons") or [])
    reservation = answer.get("idempotency") or {}
    if outcome.decision != "allow" or reservation.get("state") != "reserved":
        return outcome
    report = {"result": call.output, "reservation_token": reservation.get("reservation_token")}
    try:
        status, answer = gateway.post(f"/v1/executions/{quote(key, safe='')}/complete", report)
    except requests.RequestException as exc:
        outcome.error = f"report not delivered: {type(exc).__name__}"
        return outcome
    if status != 200:
        outcome.error = "report refused: " + _error_of(status, answer)
    return outcome


def replay_trajectories(
    path: Path,
    url: str,
    identity: ReplayIdentity,
    *,
    settings: Settings,
    timeout_s: float = 10.0,
    token: str | None = None,
    subject_per_conversation: bool = False,
) -> TrajectoryReport:
    """Replay every conversation of ``path`` against ``url`` (see the module docstring).

    Raises ``OSError`` when the file cannot be read, ``ReplayRefused`` when development tokens
    would go to a gateway that is not a development one, ``ValueError`` for
    ``subject_per_conversation`` with a ``token`` (a token speaks for one subject), and
    ``RuntimeError`` when no development token can be minted (production settings).
    """
    if token is not None and subject_per_conversation:
        raise ValueError("a subject per conversation needs development tokens: a token speaks for one subject")
    report = TrajectoryReport()
    run = secrets.token_hex(4)
    with requests.Session() as session, path.open(encoding="utf-8") as lines:
        if token is None:
            require_development_gateway(session, url, timeout_s)

        def bearer(number: int) -> str:
            if token is not None:
                return token
            sub = f"{identity.sub}-{number}" if subject_per_conversation else identity.sub
            return mint_dev_token(settings, sub=sub, tenant=identity.tenant, roles=list(identity.roles))

        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                conversation = parse_conversation(line)
            except ValueError as exc:
                report.unreadable.append(f"line {number}: {exc}")
                continue
            conversation_id = f"{conversation.conversation}.{run}"
            gateway = _Gateway(session, url, bearer(number), timeout_s)
            for step, call in enumerate(conversation.calls):
                report.outcomes.append(_replay_call(gateway, conversation, conversation_id, step, call))
    return report


def format_trajectory_report(report: TrajectoryReport, *, as_json: bool = False) -> str:
    """One line per call (conversation, step, tool, kind, decision or error, first reason) and a
    table of decisions per kind; or the JSON document of ``TrajectoryReport.as_json``. Text from
    the file and the gateway's answers is escaped (``app.terminal.printable``)."""
    if as_json:
        return json_printable(json.dumps(report.as_json(), indent=2))
    lines = [f"unreadable {printable(problem)}" for problem in report.unreadable]
    for o in report.outcomes:
        outcome = printable(o.decision or "ERROR")
        detail = printable(o.error) if o.error else (printable(o.reasons[0]) if o.reasons else "")
        lines.append(f"{printable(o.conversation):<34} {o.step:>2} {printable(o.tool):<30} {o.kind:<9} {outcome:<14} {detail}".rstrip())
    counts = report.counts()
    lines += ["", f"{'kind':<10}" + "".join(f"{word:>14}" for word in DECISIONS) + f"{'total':>8}"]
    for kind in KINDS:
        row = counts[kind]
        lines.append(f"{kind:<10}" + "".join(f"{row[word]:>14}" for word in DECISIONS) + f"{sum(row.values()):>8}")
    lines.append(f"{'errors':<10}{report.errors:>14}")
    return "\n".join(lines)
