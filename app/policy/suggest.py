"""Proposals mined from what approvers decided (``toolgate policy suggest``): tenant-data
changes that would have spared people the escalations they always approved, each measured with
``policy diff`` over the same decision log. Nothing is applied: each is written as a candidate
for a person to review.

From the escalations of the range (``app.policy.insights``), per tenant:

- **known counterparty**: a value of a contract's ``counterparty_fields`` approved at least
  ``min_approvals`` times and never denied, added (in ``lib.identifier_key`` form) to one of the
  tenant's ``counterparties.<kind>`` lists (the kinds its data has or the policies read): the
  one whose candidate removes the most escalations, on a tie the longest list;
- **allowed domain**: a domain approved at least ``min_approvals`` times and never denied,
  added to ``allowed_domains``;
- **limit**: for each ``limits.<name>`` the policies read (``lib.tenant_limit("<name>", ...)``),
  per approval rule, the largest amount (a contract's ``amount_fields``) people approved in
  the escalations of that rule alone that is below every amount they denied in them (an
  escalation for several rules says nothing about one of them).

A candidate is the tenant's whole new data. It is measured by evaluating every decide record of
the range again under the policies with that data (``app.policy.diff.diff_records``): the
escalations it **removes** (approved escalations it would allow) and the **denied calls it would
allow** (escalations a person denied). Only candidates that remove some escalation are kept; a
candidate is **safe** when it would allow no denied call. All safe candidates together are
measured once more as ``all-safe``.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.audit.records import AuditRecord
from app.contracts.contract import ToolContract
from app.models import PolicyDecision
from app.policy.bundle import PolicyBundle, content_revision
from app.policy.diff import DiffReport, diff_records
from app.policy.insights import Escalation, approved_values
from app.policy.reevaluate import BundleEvaluator, RecordedCall
from app.policy.tenant_data import DATA_FILE

DEFAULT_MIN_APPROVALS = 3
_LIMIT = re.compile(r'tenant_limit\(\s*"([a-z][a-z0-9_]*)"')
_KIND = re.compile(r'(?:known_counterparty|counterparty_lookalike)\(\s*"([a-z][a-z0-9_]*)"|counterparties\.([a-z][a-z0-9_]*)')
_IDENTIFIER = re.compile(r"^[A-Za-z0-9 ._-]+$")


@dataclass
class Suggestion:
    """One candidate: ``kind`` (``known_counterparty``, ``allowed_domain``, ``limit``), the
    ``tenant``, the member of its data it changes (``target``, dotted) and how (``change``), the
    approvals it rests on (never denied), the tenant's new data, and what ``policy diff``
    measured."""

    kind: str
    tenant: str
    target: str
    change: str
    approved: int
    data: dict[str, Any]
    removes: int = 0
    allows_denied: int = 0
    allows_unanswered: int = 0
    report: DiffReport | None = None

    @property
    def safe(self) -> bool:
        return self.allows_denied == 0

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", f"{self.tenant} {self.change}".lower()).strip("-")[:80]

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "tenant": self.tenant, "change": self.change, "approved": self.approved,
                "removes_escalations": self.removes, "allows_denied_calls": self.allows_denied,
                "allows_unanswered_calls": self.allows_unanswered, "safe": self.safe, "tenant_data": self.data}


@dataclass
class SuggestReport:
    """Every kept suggestion, the measure of all safe ones together, and the escalations of
    the range by outcome."""

    outcomes: Counter[str]
    suggestions: list[Suggestion] = field(default_factory=list)
    combined: Suggestion | None = None

    def as_json(self) -> dict[str, Any]:
        return {"escalations": dict(sorted(self.outcomes.items())),
                "suggestions": [s.as_json() for s in self.suggestions],
                "all_safe": self.combined.as_json() if self.combined else None}


def _policy_names(bundle: PolicyBundle) -> tuple[set[str], set[str]]:
    """The limit names and counterparty kinds the policies' modules read."""
    limits: set[str] = set()
    kinds: set[str] = set()
    for path in bundle.modules:
        if path.endswith("_test.rego"):
            continue
        text = bundle.files[path].decode("utf-8", "replace")
        limits.update(_LIMIT.findall(text))
        kinds.update(a or b for a, b in _KIND.findall(text))
    return limits, kinds - {"contacts"}


def _tenant_data(bundle: PolicyBundle, tenant: str) -> dict[str, Any]:
    raw = bundle.files.get(f"tenants/{tenant}/{DATA_FILE}")
    value = json.loads(raw) if raw else {}
    return value if isinstance(value, dict) else {}


def with_tenant_data(bundle: PolicyBundle, data: Mapping[str, dict[str, Any]]) -> PolicyBundle:
    """``bundle`` with the tenant data files of ``data`` (tenant -> data) replaced."""
    files = dict(bundle.files)
    for tenant, value in data.items():
        files[f"tenants/{tenant}/{DATA_FILE}"] = (json.dumps(value, indent=2, sort_keys=True) + "\n").encode()
    return PolicyBundle(files=files, revision=content_revision(files), roots=bundle.roots, source=bundle.source)


def _amounts(record: AuditRecord, contract: ToolContract | None) -> list[float]:
    found = []
    for pointer in contract.meta.amount_fields if contract else ():
        value: Any = record.input or {}
        for part in pointer.strip("/").split("/"):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            found.append(value)
    return found


class _Candidates:
    """The candidates of one tenant, built from its escalations."""

    def __init__(self, tenant: str, data: dict[str, Any], limits: set[str], kinds: set[str]) -> None:
        self.tenant, self.data, self.limits = tenant, data, limits
        self.kinds = sorted(kinds | set((data.get("counterparties") or {}).keys()) - {"contacts"})

    def size(self, target: str) -> int:
        """How many entries the list at dotted ``target`` of the tenant's data holds now."""
        node: Any = self.data
        for key in target.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        return len(node) if isinstance(node, list) else 0

    def _changed(self, path: tuple[str, ...], update: Any) -> dict[str, Any]:
        data = json.loads(json.dumps(self.data))
        node = data
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = update(node.get(path[-1]))
        return data

    def counterparty(self, value: str, approved: int) -> list[Suggestion]:
        key = value.replace(" ", "").upper()
        return [Suggestion("known_counterparty", self.tenant, f"counterparties.{kind}", f"counterparties.{kind} += {key}",
                           approved,
                           self._changed(("counterparties", kind), lambda old, k=key: [*(old or []), k]))
                for kind in self.kinds if key not in ((self.data.get("counterparties") or {}).get(kind) or [])]

    def domain(self, value: str, approved: int) -> list[Suggestion]:
        if value in (self.data.get("allowed_domains") or []):
            return []
        return [Suggestion("allowed_domain", self.tenant, "allowed_domains", f"allowed_domains += {value}", approved,
                           self._changed(("allowed_domains",), lambda old: [*(old or []), value]))]

    def limit(self, amount: float, approved: int) -> list[Suggestion]:
        return [Suggestion("limit", self.tenant, f"limits.{name}", f"limits.{name} = {amount:g}", approved,
                           self._changed(("limits", name), lambda _old: amount))
                for name in sorted(self.limits)]


def _diff(candidate: PolicyBundle, records: list[AuditRecord], outcomes: Mapping[str, str],
          decision_path: str) -> tuple[DiffReport, Counter[str]]:
    """``policy diff`` of ``candidate`` over ``records``, and the escalations it would allow by
    their outcome (``outcomes``: decision id -> outcome)."""
    evaluator = BundleEvaluator(candidate, decision_path)
    allowed: Counter[str] = Counter()

    def observe(call: RecordedCall, decision: PolicyDecision) -> None:
        outcome = outcomes.get(call.record.decision_id)
        if outcome is not None and decision.decision == "allow":
            allowed[outcome] += 1

    try:
        return diff_records(records, evaluator, observe), allowed
    finally:
        evaluator.close()


def _measured(suggestion: Suggestion, candidate: PolicyBundle, records: list[AuditRecord],
              outcomes: Mapping[str, str], decision_path: str) -> Suggestion:
    suggestion.report, allowed = _diff(candidate, records, outcomes, decision_path)
    suggestion.removes = allowed["approved"]
    suggestion.allows_denied = allowed["denied"]
    suggestion.allows_unanswered = allowed["expired"] + allowed["pending"]
    return suggestion


def suggest(records: list[AuditRecord], found: Iterable[Escalation], bundle: PolicyBundle,
            contracts: Mapping[str, ToolContract], *, min_approvals: int = DEFAULT_MIN_APPROVALS,
            decision_path: str = "toolgate/decision") -> SuggestReport:
    """The suggestions for the escalations ``found`` among ``records`` (see the module
    docstring); ``contracts`` by tool name as records name it."""
    found = list(found)
    report = SuggestReport(Counter(e.outcome for e in found))
    outcomes = {e.record.decision_id: e.outcome for e in found}
    limits, kinds = _policy_names(bundle)
    per_tenant: dict[str, list[Escalation]] = {}
    for escalation in found:
        per_tenant.setdefault(escalation.record.tenant, []).append(escalation)
    for tenant, escalated in sorted(per_tenant.items()):
        candidates = _Candidates(tenant, _tenant_data(bundle, tenant), limits, kinds)
        votes: dict[tuple[str, str], Counter[str]] = {}
        amounts: dict[str, dict[str, list[float]]] = {}
        for escalation in escalated:
            contract = contracts.get(escalation.record.tool or "")
            fields = contract.meta.counterparty_fields if contract else ()
            for kind, value in set(approved_values(escalation.record, fields)):
                votes.setdefault((kind, value), Counter())[escalation.outcome] += 1
            if len(escalation.rules) == 1:
                by_outcome = amounts.setdefault(escalation.rules[0], {"approved": [], "denied": []})
                by_outcome.get(escalation.outcome, []).extend(_amounts(escalation.record, contract))
        proposals: list[list[Suggestion]] = []
        for (kind, value), count in sorted(votes.items()):
            if count["approved"] < min_approvals or count["denied"]:
                continue
            if kind == "counterparty" and _IDENTIFIER.match(value):
                proposals.append(candidates.counterparty(value, count["approved"]))
            elif kind == "domain":
                proposals.append(candidates.domain(value, count["approved"]))
        for _rule, by_outcome in sorted(amounts.items()):
            below = [a for a in by_outcome["approved"] if all(a < d for d in by_outcome["denied"])]
            if len(below) >= min_approvals:
                proposals.append(candidates.limit(max(below), len(below)))
        for options in proposals:
            measured = [_measured(s, with_tenant_data(bundle, {tenant: s.data}), records, outcomes, decision_path)
                        for s in options]
            best = max(measured, key=lambda s: (s.safe, s.removes, candidates.size(s.target)), default=None)
            if best is not None and best.removes:
                report.suggestions.append(best)
    report.suggestions.sort(key=lambda s: (not s.safe, -s.removes, s.tenant, s.change))
    report.combined = _combined(report.suggestions, bundle, records, outcomes, decision_path)
    return report


def _combined(suggestions: list[Suggestion], bundle: PolicyBundle, records: list[AuditRecord],
              outcomes: Mapping[str, str], decision_path: str) -> Suggestion | None:
    """Every safe suggestion applied together (one tenant's changes merged), measured."""
    safe = [s for s in suggestions if s.safe]
    if not safe:
        return None
    data: dict[str, dict[str, Any]] = {}
    for s in safe:
        merged = data.setdefault(s.tenant, _tenant_data(bundle, s.tenant))
        for key, value in s.data.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **{k: _union(merged[key].get(k), v) for k, v in value.items()}}
            else:
                merged[key] = _union(merged.get(key), value)
    combined = Suggestion("all_safe", ",".join(sorted(data)), "", f"{len(safe)} safe suggestions together",
                          sum(s.approved for s in safe), {"tenants": data})
    return _measured(combined, with_tenant_data(bundle, data), records, outcomes, decision_path)


def _union(old: Any, new: Any) -> Any:
    """Lists are united (order kept); any other value is replaced."""
    if isinstance(old, list) and isinstance(new, list):
        return [*old, *(v for v in new if v not in old)]
    return new


def write_candidates(report: SuggestReport, out: Path) -> list[Path]:
    """Write each suggestion to ``out/<nn>-<slug>/`` (``suggestion.json`` and
    ``tenant-data/<tenant>/data.json``, the layout of ``TOOLGATE_TENANT_DATA_DIR``) and all safe
    ones together to ``out/all-safe/``. Replaces what ``out`` held. Returns the folders."""
    if out.exists():
        shutil.rmtree(out)
    written = []
    named = [(f"{n:02d}-{s.slug}", s, {s.tenant: s.data}) for n, s in enumerate(report.suggestions, 1)]
    if report.combined is not None:
        named.append(("all-safe", report.combined, report.combined.data["tenants"]))
    for name, suggestion, data in named:
        folder = out / name
        for tenant, value in data.items():
            target = folder / "tenant-data" / tenant / DATA_FILE
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        summary = {**suggestion.as_json(), "diff": suggestion.report.as_json() if suggestion.report else None}
        (folder / "suggestion.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        written.append(folder)
    return written


def format_suggestions(report: SuggestReport) -> str:
    """The suggestions as a table (safe first), then the measure of all safe ones together."""
    from app.terminal import printable

    outcomes = ", ".join(f"{n} {o}" for o, n in sorted(report.outcomes.items()))
    lines = [f"{sum(report.outcomes.values())} escalations ({outcomes or 'none'})"]
    if not report.suggestions:
        return "\n".join([*lines, "no suggestions"])
    lines += ["", f"{'#':>2}  {'SAFE':<4} {'REMOVES':>7} {'DENIED->ALLOW':>13}  SUGGESTION"]
    for n, s in enumerate(report.suggestions, 1):
        lines.append(f"{n:>2}  {'yes' if s.safe else 'NO':<4} {s.removes:>7} {s.allows_denied:>13}  "
                     f"{printable(s.tenant)}: {printable(s.change)} (approved {s.approved} times, never denied)")
    combined, approved_total = report.combined, report.outcomes["approved"]
    if combined is not None:
        share = f" ({combined.removes / approved_total:.0%})" if approved_total else ""
        lines += ["", f"all safe suggestions together: remove {combined.removes} of {approved_total} approved "
                      f"escalations{share}, allow {combined.allows_denied} denied calls"]
    return "\n".join(lines)
