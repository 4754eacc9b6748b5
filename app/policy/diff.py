"""The change-impact report of a candidate policy over the decision log (``toolgate policy
diff``): every recorded decide call (``decide`` and ``decide_dry_run`` records in the range)
evaluated again under the candidate, on the policy input its record keeps, and compared with
the decision its own policy made.

Per tool and direction (``allow -> deny``, ...), the report counts the calls that would flip,
the rule ids that made the difference (``+id``: matched only under the candidate, ``-id``:
matched only in the record) and a few example decision ids. A record whose policy input lost
values (sensitive input paths, context members not kept) or keeps none is counted as **cannot
judge**, never guessed. A *loosening* flip is one from ``deny`` or ``user-approval`` to
``allow``: the command exits 1 when there is any, so that a pipeline can require a person to
look.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from app.audit.records import AuditRecord
from app.models import PolicyDecision
from app.policy.reevaluate import BundleEvaluator, RecordedCall, ReevaluationFailed, recorded_call
from app.terminal import printable
from app.timefmt import format_us

#: How many example decision ids a flip group lists.
MAX_EXAMPLES = 5


@dataclass
class FlipGroup:
    """The calls of one tool that flip one way: their count, the rule ids that changed (with a
    ``+``/``-`` sign) and their counts, and up to ``MAX_EXAMPLES`` decision ids."""

    tool: str
    before: str
    after: str
    calls: int = 0
    rules: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    @property
    def loosening(self) -> bool:
        return self.after == "allow" and self.before in ("deny", "user-approval")

    def as_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool, "from": self.before, "to": self.after, "calls": self.calls, "loosening": self.loosening,
            "rules": [{"id": rule[1:], "change": rule[0], "calls": n} for rule, n in sorted(self.rules.items())],
            "examples": self.examples,
        }


@dataclass
class DiffReport:
    """What ``diff_records`` found (see the module docstring)."""

    candidate: str
    source: str
    records: int = 0
    evaluated: int = 0
    unchanged: int = 0
    cannot_judge: Counter[str] = field(default_factory=Counter)
    candidate_errors: Counter[str] = field(default_factory=Counter)
    error_examples: list[str] = field(default_factory=list)
    groups: dict[tuple[str, str, str], FlipGroup] = field(default_factory=dict)
    first: dt.datetime | None = None
    last: dt.datetime | None = None

    @property
    def flipped(self) -> int:
        return sum(group.calls for group in self.groups.values())

    @property
    def loosening(self) -> int:
        return sum(group.calls for group in self.groups.values() if group.loosening)

    def flips(self) -> list[FlipGroup]:
        """The flip groups by tool, then direction."""
        return [self.groups[key] for key in sorted(self.groups)]

    def as_json(self) -> dict[str, Any]:
        return {
            "candidate": {"revision": self.candidate, "source": self.source},
            "records": self.records,
            "first": format_us(self.first) if self.first else None,
            "last": format_us(self.last) if self.last else None,
            "evaluated": self.evaluated,
            "unchanged": self.unchanged,
            "flipped": self.flipped,
            "loosening": self.loosening,
            "cannot_judge": dict(sorted(self.cannot_judge.items())),
            "candidate_errors": dict(sorted(self.candidate_errors.items())),
            "candidate_error_examples": self.error_examples,
            "flips": [group.as_json() for group in self.flips()],
        }


def _rule_ids(rules: Iterable[Any]) -> set[str]:
    return {rule["id"] if isinstance(rule, dict) else rule.id for rule in rules}


def diff_records(records: Iterable[AuditRecord], candidate: BundleEvaluator,
                 observe: Callable[[RecordedCall, PolicyDecision], None] | None = None) -> DiffReport:
    """Evaluate every decide record of ``records`` under ``candidate`` (see the module
    docstring). Reads ``records`` once, in order; memory grows with the flip groups only.
    ``observe`` is called with every evaluated call and the candidate's decision."""
    report = DiffReport(candidate.revision, candidate.bundle.source)
    for record in records:
        call = recorded_call(record)
        if call is None:
            continue
        report.records += 1
        report.first = report.first or record.time
        report.last = record.time
        if call.cannot_judge is not None or call.policy_input is None:
            report.cannot_judge[call.cannot_judge or "no_policy_input"] += 1
            continue
        try:
            decision = candidate.evaluate(call.policy_input)
        except ReevaluationFailed as exc:
            kind = str(exc).split(":", 1)[0]
            report.candidate_errors[kind] += 1
            if len(report.error_examples) < MAX_EXAMPLES:
                report.error_examples.append(record.decision_id)
            continue
        report.evaluated += 1
        if observe is not None:
            observe(call, decision)
        if decision.decision == call.decision:
            report.unchanged += 1
            continue
        tool = record.tool or "-"
        key = (tool, str(call.decision), decision.decision)
        group = report.groups.setdefault(key, FlipGroup(*key))
        group.calls += 1
        before, after = _rule_ids(record.matched_rules), _rule_ids(decision.matched_rules)
        group.rules.update([f"+{rule}" for rule in after - before] + [f"-{rule}" for rule in before - after])
        if len(group.examples) < MAX_EXAMPLES:
            group.examples.append(record.decision_id)
    return report


def format_report(report: DiffReport) -> str:
    """The report for people: a summary, then one block per tool and direction (the rules
    that changed, one per line, and the example decision ids). Text from records is escaped."""
    span = ""
    if report.first and report.last:
        span = f" from {format_us(report.first)} to {format_us(report.last)}"
    judged = ", ".join(f"{reason} {count}" for reason, count in sorted(report.cannot_judge.items()))
    lines = [
        f"candidate {printable(report.candidate)} ({printable(report.source)})",
        f"{report.records} decide records{span}: {report.evaluated} evaluated, {report.unchanged} unchanged,"
        f" {report.flipped} would flip ({report.loosening} to allow from deny or user-approval),"
        f" {sum(report.cannot_judge.values())} cannot judge" + (f" ({judged})" if judged else ""),
    ]
    if report.candidate_errors:
        errors = ", ".join(f"{kind} {count}" for kind, count in sorted(report.candidate_errors.items()))
        lines.append(f"the candidate gave no decision for {sum(report.candidate_errors.values())} ({errors}),"
                     f" e.g. {' '.join(report.error_examples)}")
    if not report.groups:
        return "\n".join(lines)
    lines += ["", f"{'TOOL':<24} {'FROM':<14} {'TO':<14} {'CALLS':>5}  RULES"]
    for group in report.flips():
        rules = sorted(group.rules.items()) or [("", 0)]
        head = f"{printable(group.tool):<24} {group.before:<14} {group.after:<14} {group.calls:>5}"
        for index, (rule, count) in enumerate(rules):
            text = f"{printable(rule)} ({count})" if rule else "(no rule id changed)"
            lines.append(f"{head if index == 0 else ' ' * len(head)}  {text}")
        lines.append(f"{'':<24} examples: {' '.join(group.examples)}")
    if report.loosening:
        calls = "1 call" if report.loosening == 1 else f"{report.loosening} calls"
        lines += ["", f"LOOSENING: {calls} denied or held for approval would be allowed"]
    return "\n".join(lines)
