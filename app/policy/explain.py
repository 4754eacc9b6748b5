"""``toolgate policy explain DECISION_ID``: one recorded decide call evaluated again, on the
policy input its record keeps, under the revision that decided it (read from the revision
archive, ``app.policy.archive``) and under today's policy (the one the settings name:
``TOOLGATE_POLICY_BUNDLE`` or ``TOOLGATE_POLICY_DIR``), and whether each decides as recorded.

With the pinned ``opa`` binary (``app.policy.toolchain``), the explanation ends with OPA's own
trace of the evaluation under the recorded revision (``opa eval --explain=MODE``; ``fails``
by default: every expression that failed on the way, which is where a rule stopped); without
it, the embedded engine's decision and matched rules are all that is shown.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.audit.records import AuditRecord
from app.models import PolicyDecision
from app.policy.bundle import PolicyBundle, build_tarball
from app.policy.reevaluate import BundleEvaluator, RecordedCall, ReevaluationFailed
from app.terminal import printable

TRACE_MODES = ("fails", "notes", "full", "off")


@dataclass(frozen=True)
class Verdict:
    """One policy's answer for the recorded input: its decision, or why it gave none."""

    revision: str
    source: str
    decision: PolicyDecision | None
    error: str | None = None

    def same_as(self, recorded: str | None) -> bool:
        return self.decision is not None and self.decision.decision == recorded

    def as_json(self, recorded: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {"revision": self.revision, "source": self.source}
        if self.decision is None:
            return {**out, "error": self.error, "same_as_recorded": False}
        return {
            **out,
            "decision": self.decision.decision,
            "reasons": list(self.decision.reasons),
            "matched_rules": [rule.model_dump() for rule in self.decision.matched_rules],
            "same_as_recorded": self.same_as(recorded),
        }


def verdict(bundle: PolicyBundle, policy_input: dict[str, Any], decision_path: str) -> Verdict:
    """``bundle``'s decision for ``policy_input`` (a ``PolicyLoadError`` propagates)."""
    evaluator = BundleEvaluator(bundle, decision_path)
    try:
        return Verdict(bundle.revision, bundle.source, evaluator.evaluate(policy_input))
    except ReevaluationFailed as exc:
        return Verdict(bundle.revision, bundle.source, None, str(exc))
    finally:
        evaluator.close()


def opa_trace(opa: Path, bundle: PolicyBundle, policy_input: dict[str, Any], decision_path: str, mode: str) -> str:
    """``opa eval --explain=MODE`` of the decision for ``policy_input`` under ``bundle`` (written
    to a temporary tarball), as OPA prints it; an error message when OPA cannot run."""
    with tempfile.TemporaryDirectory(prefix="toolgate-explain-") as scratch:
        tarball = Path(scratch) / "bundle.tar.gz"
        tarball.write_bytes(build_tarball(bundle))
        input_file = Path(scratch) / "input.json"
        input_file.write_text(json.dumps(policy_input), encoding="utf-8")
        query = "data." + decision_path.replace("/", ".")
        argv = [str(opa), "eval", "--bundle", str(tarball), "--input", str(input_file), f"--explain={mode}",
                "--format", "pretty", query]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"opa eval could not run: {exc}"
    return (done.stdout + done.stderr).rstrip()


@dataclass(frozen=True)
class Explanation:
    """What ``explain`` found for one record: the recorded call, the verdict of the revision
    that decided it (None when that revision is not archived), today's verdict, OPA's trace."""

    call: RecordedCall
    recorded_revision: str | None
    at_revision: Verdict | None
    today: Verdict
    trace: str | None

    def as_json(self) -> dict[str, Any]:
        record: AuditRecord = self.call.record
        decision = self.call.decision
        return {
            "decision_id": record.decision_id,
            "event": record.event,
            "time": record.to_doc()["time"],
            "tenant": record.tenant,
            "tool": record.tool,
            "version": record.version,
            "recorded": {
                "decision": record.decision, "policy_decision": decision, "revision": self.recorded_revision,
                "engine": record.engine, "reasons": list(record.reasons), "matched_rules": list(record.matched_rules),
            },
            "redacted": list(record.policy_input_redacted),
            "at_revision": self.at_revision.as_json(decision) if self.at_revision else
            {"revision": self.recorded_revision, "archived": False},
            "today": self.today.as_json(decision),
            "trace": self.trace,
        }


def _rules(decision: PolicyDecision, indent: str) -> list[str]:
    return [f"{indent}{printable(rule.id)} ({rule.effect}): {printable(rule.message)}" for rule in decision.matched_rules]


def _verdict_lines(label: str, found: Verdict, recorded: str | None) -> list[str]:
    if found.decision is None:
        return [f"{label} {printable(found.revision)} ({printable(found.source)}): no decision: {printable(str(found.error))}"]
    same = "the same as recorded" if found.same_as(recorded) else f"DIFFERS from the recorded {recorded}"
    lines = [f"{label} {printable(found.revision)} ({printable(found.source)}): {found.decision.decision}, {same}"]
    reasons = "; ".join(printable(reason) for reason in found.decision.reasons)
    return [*lines, f"  reasons: {reasons}", *_rules(found.decision, "  matched: ")]


def format_explanation(found: Explanation) -> str:
    """The explanation for people (text from records and policies escaped)."""
    record = found.call.record
    tool = f"{printable(str(record.tool))} v{printable(str(record.version))}"
    lines = [
        f"decision {record.decision_id} ({record.event}, {record.to_doc()['time']}): tenant {printable(record.tenant)},"
        f" subject {printable(str(record.subject_id))}, tool {tool}",
        f"recorded: {found.call.decision} by {printable(str(found.recorded_revision))} ({printable(str(record.engine))})"
        + (f", answered {record.decision}" if record.decision != found.call.decision else ""),
    ]
    lines += [f"  matched: {printable(str(rule.get('id')))} ({printable(str(rule.get('effect')))})"
              for rule in record.matched_rules]
    if record.policy_input_redacted:
        lines.append("note: the record does not keep the values at " + ", ".join(record.policy_input_redacted)
                     + "; these evaluations saw [REDACTED] there, so they may differ for that reason alone")
    if found.at_revision is None:
        lines.append(f"revision {printable(str(found.recorded_revision))}: not in the revision archive"
                     " (activated before revisions were archived, or by a sidecar whose bundles were not archived:"
                     " toolgate policy archive)")
    else:
        lines += _verdict_lines("revision", found.at_revision, found.call.decision)
    lines += _verdict_lines("today   ", found.today, found.call.decision)
    if found.trace is not None:
        under = found.at_revision.revision if found.at_revision else found.today.revision
        lines += ["", f"trace (opa eval --explain) under {printable(under)}:"]
        lines += [printable(line) for line in found.trace.splitlines()]
    return "\n".join(lines)
