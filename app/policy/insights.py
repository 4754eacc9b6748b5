"""Approval analytics over the decision log (``toolgate policy insights``, the console's
insights page): which rules escalate, how people answer, and what they approve.

An **escalation** is a ``decide`` record whose decision is ``user-approval`` and that opened an
approval (it names an ``approval_id``); it counts once under every approval rule it matched
(``matched_rules`` of effect ``approval``) and its tool. Its **outcome** comes from the
``approval_answer`` records of its approval: ``denied`` when an approver said no, else
``approved`` when one said yes; without an answer, ``expired`` once its record is older than the
approval TTL (``ttl_s``), else ``pending``. The **time to answer** is from the decide record to
the first answer, in seconds.

The **approved values** of a group are the argument values of its approved escalations, from
the input the record keeps (values at the contract's sensitive paths are redacted there and
never counted): ``counterparty`` (the contract's ``counterparty_fields``), ``domain`` (the host
of an e-mail address or http(s) URL in any string argument, lowercase) and ``path_root`` (the
first two segments of an absolute path argument, e.g. ``/srv/reports``).
"""

from __future__ import annotations

import datetime as dt
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.audit.records import AuditRecord
from app.timefmt import utc_now

#: The approval TTL when none is given (``Settings.approval_default_ttl_s``'s default).
DEFAULT_TTL_S = 900
#: How many approved values a group lists per kind.
TOP_VALUES = 5
REDACTED = "[REDACTED]"
_EMAIL = re.compile(r"^[^@\s<>]+@([A-Za-z0-9.-]+\.[A-Za-z]{2,})$")
_URL = re.compile(r"^https?://(?:[^@/\s]*@)?([A-Za-z0-9.-]+)", re.IGNORECASE)
VALUE_KINDS = ("counterparty", "domain", "path_root")


@dataclass(frozen=True)
class Escalation:
    """One escalation (see the module docstring): its decide record, the approval rule ids,
    its outcome and the seconds to its first answer (None: unanswered)."""

    record: AuditRecord
    rules: tuple[str, ...]
    outcome: str
    answer_s: float | None


@dataclass
class RuleInsight:
    """The escalations of one approval rule on one tool, their outcomes, the median time to
    answer (seconds, None without answers) and the most approved values per kind."""

    rule: str
    tool: str
    outcomes: Counter[str] = field(default_factory=Counter)
    answer_s: list[float] = field(default_factory=list)
    values: dict[str, Counter[str]] = field(default_factory=lambda: {kind: Counter() for kind in VALUE_KINDS})

    @property
    def escalations(self) -> int:
        return sum(self.outcomes.values())

    def rate(self, outcome: str) -> float:
        return self.outcomes[outcome] / self.escalations if self.escalations else 0.0

    @property
    def median_answer_s(self) -> float | None:
        return statistics.median(self.answer_s) if self.answer_s else None

    def top_values(self) -> dict[str, list[tuple[str, int]]]:
        return {kind: counts.most_common(TOP_VALUES) for kind, counts in self.values.items() if counts}

    def as_json(self) -> dict[str, Any]:
        median = self.median_answer_s
        return {
            "rule": self.rule, "tool": self.tool, "escalations": self.escalations,
            **{outcome: self.outcomes[outcome] for outcome in ("approved", "denied", "expired", "pending")},
            "approve_rate": round(self.rate("approved"), 4), "deny_rate": round(self.rate("denied"), 4),
            "expire_rate": round(self.rate("expired"), 4),
            "median_answer_s": round(median, 3) if median is not None else None,
            "approved_values": {kind: [{"value": v, "approved": n} for v, n in top]
                                for kind, top in self.top_values().items()},
        }


def _answers(records: Iterable[AuditRecord]) -> tuple[list[AuditRecord], dict[str, list[AuditRecord]]]:
    escalations: list[AuditRecord] = []
    answers: dict[str, list[AuditRecord]] = {}
    for record in records:
        if record.event == "decide" and record.decision == "user-approval" and record.approval_id:
            escalations.append(record)
        elif record.event == "approval_answer" and record.approval_id and record.decision is not None:
            answers.setdefault(record.approval_id, []).append(record)
    return escalations, answers


def escalations(records: Iterable[AuditRecord], *, ttl_s: int = DEFAULT_TTL_S,
                now: dt.datetime | None = None) -> Iterator[Escalation]:
    """The escalations among ``records`` (decide and answer records, any order) with their
    outcomes (see the module docstring), oldest first."""
    now = now or utc_now()
    asked, answers = _answers(records)
    for record in sorted(asked, key=lambda r: r.time):
        given = sorted(answers.get(record.approval_id or "", []), key=lambda r: r.time)
        if any(a.decision == "deny" for a in given):
            outcome = "denied"
        elif given:
            outcome = "approved"
        else:
            outcome = "expired" if (now - record.time).total_seconds() > ttl_s else "pending"
        answer_s = (given[0].time - record.time).total_seconds() if given else None
        rules = tuple(sorted(r["id"] for r in record.matched_rules if r.get("effect") == "approval"))
        yield Escalation(record, rules or ("-",), outcome, answer_s)


def _host_of(text: str) -> str | None:
    match = _EMAIL.match(text.strip().split("<")[-1].rstrip(">")) or _URL.match(text.strip())
    return match.group(1).lower().rstrip(".") if match else None


def _strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}/{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}/{index}")


def approved_values(record: AuditRecord, counterparty_fields: Iterable[str]) -> Iterator[tuple[str, str]]:
    """``(kind, value)`` of the arguments a decide record keeps (see the module docstring)."""
    fields = tuple(counterparty_fields)
    for path, text in _strings(record.input or {}):
        if text == REDACTED or path in record.redacted_paths:
            continue
        if _matches(path, fields):
            yield "counterparty", text
        host = _host_of(text)
        if host:
            yield "domain", host
        elif text.startswith("/") and len(text) > 1:
            segments = [s for s in text.split("/") if s]
            yield "path_root", "/" + "/".join(segments[:2])


def _matches(path: str, pointers: tuple[str, ...]) -> bool:
    """``path`` is one of ``pointers``, where a ``*`` segment stands for any key or index."""
    parts = path.split("/")
    return any(len(p.split("/")) == len(parts) and all(a in ("*", b) for a, b in zip(p.split("/"), parts, strict=True))
               for p in pointers)


def insights(found: Iterable[Escalation], counterparty_fields: Mapping[str, Iterable[str]]) -> list[RuleInsight]:
    """Per approval rule and tool (sorted by escalations, most first, then rule and tool);
    ``counterparty_fields``: the contract's counterparty pointers by tool name."""
    groups: dict[tuple[str, str], RuleInsight] = {}
    for escalation in found:
        tool = escalation.record.tool or "-"
        values = list(approved_values(escalation.record, counterparty_fields.get(tool, ())))
        for rule in escalation.rules:
            group = groups.setdefault((rule, tool), RuleInsight(rule, tool))
            group.outcomes[escalation.outcome] += 1
            if escalation.answer_s is not None:
                group.answer_s.append(escalation.answer_s)
            if escalation.outcome == "approved":
                for kind, value in values:
                    group.values[kind][value] += 1
    return sorted(groups.values(), key=lambda g: (-g.escalations, g.rule, g.tool))


def format_insights(rows: list[RuleInsight]) -> str:
    """A table per rule and tool, each followed by its most approved values."""
    from app.terminal import printable

    if not rows:
        return "no escalations in the range"
    lines = [f"{'RULE':<36} {'TOOL':<24} {'ESC':>5} {'APPR':>6} {'DENY':>6} {'EXP':>6} {'PEND':>5} {'MEDIAN':>8}"]
    for row in rows:
        median = f"{row.median_answer_s:.1f} s" if row.median_answer_s is not None else "-"
        lines.append(f"{printable(row.rule):<36} {printable(row.tool):<24} {row.escalations:>5} "
                     f"{row.rate('approved'):>6.0%} {row.rate('denied'):>6.0%} {row.rate('expired'):>6.0%} "
                     f"{row.outcomes['pending']:>5} {median:>8}")
        for kind, top in row.top_values().items():
            listed = ", ".join(f"{printable(value)} ({count})" for value, count in top)
            lines.append(f"{'':<4}approved {kind}: {listed}")
    return "\n".join(lines)
