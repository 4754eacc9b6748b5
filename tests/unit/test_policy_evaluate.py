"""``toolgate policy eval`` (app.policy.evaluate): the decision, reasons and matched rules of a
policy input evaluated offline on a directory or a bundle, normalized as the gateway does; the
trace through ``opa eval --explain`` and the embedded engine's own; the command's input
handling and exit codes. Real embedded engine, real pinned ``opa``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from app.cli import main
from app.policy.bundle import build_tarball, read_directory, with_manifest
from app.policy.evaluate import EvaluationError, PolicyInputError, evaluate, parse_input, read_policies
from app.policy.toolchain import opa_binary
from tests.conftest import POLICY_DIR

DECISION = "toolgate/decision"
PAYMENTS_REGO = POLICY_DIR / "tools" / "payments" / "payments.rego"
#: The line of the payments family's first approval rule.
APPROVAL_LINE = next(n for n, line in enumerate(PAYMENTS_REGO.read_text().splitlines(), start=1)
                     if line.startswith("approval_required contains"))


def _input(role: str, tool: str, args: dict, tenant: str = "acme") -> dict:
    return {
        "subject": {"id": "u-2", "tenant": tenant, "roles": [role]},
        "tool": {"name": tool, "version": "1", "namespace": "", "registered": True, "mutating": True, "risk": "high"},
        "call": {"id": "call_3", "input": args},
        "context": {}, "history": {}, "approval": None,
        "request": {"id": "req-1", "time": "2026-11-29T21:00:00Z"},
    }


PAYMENT = _input("admin", "processPayment", {"amount": 1500, "currency": "EUR", "recipient": "acct_42"})
SECRET = _input("support_agent", "readFile", {"path": "/etc/shadow"})


def test_a_user_approval_with_its_rules_and_approval() -> None:
    result = evaluate(read_directory(POLICY_DIR), PAYMENT, decision_path=DECISION)
    assert result.format_text().splitlines() == [
        "decision: user-approval",
        "reasons:",
        "  - payment over 1000 needs approval",
        "matched rules:",
        "  approval payments.amount_over_threshold  payment over 1000 needs approval",
        "approval: payment over 1000 needs approval (approver roles: approver; ttl 900 s)",
        f"policy revision: {read_directory(POLICY_DIR).revision}",
    ]
    assert result.to_dict()["approval"] == {"reason": "payment over 1000 needs approval",
                                            "approver_roles": ["approver"], "ttl_s": 900}


def test_a_deny_lists_every_matched_rule() -> None:
    result = evaluate(read_directory(POLICY_DIR), SECRET, decision_path=DECISION)
    document = result.to_dict()
    assert document["decision"] == "deny"
    assert document["reasons"] == ["path /etc/shadow is a protected secret (/etc/shadow)"]
    assert [r["id"] for r in document["matched_rules"]] == ["files.protected_secret"]
    assert document["result"]["decision"] == "deny" and not document["normalized_from_invalid"]


def test_a_bundle_tarball_evaluates_the_same_under_its_own_revision(tmp_path: Path) -> None:
    tarball = tmp_path / "bundle.tar.gz"
    tarball.write_bytes(build_tarball(with_manifest(read_directory(POLICY_DIR), revision="release-7")))
    from_dir = evaluate(read_policies(POLICY_DIR, None), PAYMENT, decision_path=DECISION)
    from_tar = evaluate(read_policies(None, tarball), PAYMENT, decision_path=DECISION)
    assert from_tar.decision.model_dump(exclude={"policy_revision"}) == from_dir.decision.model_dump(
        exclude={"policy_revision"})
    assert from_tar.revision == "release-7"


def test_test_modules_are_never_loaded(tmp_path: Path) -> None:
    """A bundle built with its tests (a test package under data.tools defining `deny`) decides
    as the gateway does, which leaves tests out."""
    with_tests = read_directory(POLICY_DIR, include_tests=True)
    assert evaluate(with_tests, PAYMENT, decision_path=DECISION).decision.decision == "user-approval"


def test_an_undefined_or_malformed_result_is_the_gateways_deny(tmp_path: Path) -> None:
    (tmp_path / "p.rego").write_text('package toolgate\n\nother := 1\n')
    undefined = evaluate(read_directory(tmp_path), PAYMENT, decision_path=DECISION)
    assert (undefined.decision.decision, undefined.decision.reasons, undefined.defined) == ("deny", ("no policy decision",), False)
    assert "the policy's result is not a decision, so the gateway denies: undefined" in undefined.format_text()

    (tmp_path / "p.rego").write_text('package toolgate\n\ndecision := "allow"\n')
    malformed = evaluate(read_directory(tmp_path), PAYMENT, decision_path=DECISION)
    assert malformed.decision.decision == "deny" and malformed.decision.normalized_from_invalid
    assert 'so the gateway denies: "allow"' in malformed.format_text()


def test_an_evaluation_error_is_raised(tmp_path: Path) -> None:
    (tmp_path / "p.rego").write_text('package toolgate\n\ndecision := 1 if true\n\ndecision := 2 if true\n')
    with pytest.raises(EvaluationError, match="the policy raised an error"):
        evaluate(read_directory(tmp_path), PAYMENT, decision_path=DECISION)


def test_explain_through_opa_shows_the_rules_entered_and_the_expressions_that_failed() -> None:
    opa = opa_binary()
    assert opa is not None
    result = evaluate(read_directory(POLICY_DIR), PAYMENT, decision_path=DECISION, explain="fails", opa=opa)
    assert result.trace_source == "opa eval --explain=fails"
    trace = result.trace or ""
    assert "| Enter data.tools.payments.approval_required" in trace
    assert "| Fail not data.tools.payments.amount_positive" in trace
    shown = (f"{PAYMENTS_REGO}:{APPROVAL_LINE}", f"policies/tools/payments/payments.rego:{APPROVAL_LINE}")
    assert any(line.startswith(shown) for line in trace.splitlines())
    assert '"decision": "user-approval"' not in trace  # the result is printed once, above the trace

    full = evaluate(read_directory(POLICY_DIR), PAYMENT, decision_path=DECISION, explain="full", opa=opa)
    assert len((full.trace or "").splitlines()) > 3 * len(trace.splitlines())
    notes = evaluate(read_directory(POLICY_DIR), PAYMENT, decision_path=DECISION, explain="notes", opa=opa)
    assert notes.trace == "(no trace events for this mode)"  # the library writes no trace() notes


def test_explain_without_opa_is_the_embedded_engines_trace() -> None:
    result = evaluate(read_directory(POLICY_DIR), PAYMENT, decision_path=DECISION, explain="fails")
    assert result.trace_source == "embedded engine trace, fails"
    lines = (result.trace or "").splitlines()
    assert any("Enter approval_required contains" in line and f"payments.rego:{APPROVAL_LINE}" in line for line in lines)
    assert any("Fail" in line and '{"fallback": 1000, "name": "payment_approval_amount"}' in line for line in lines)
    assert all(" Enter " in line or " Fail " in line for line in lines)
    assert lines[1].startswith("policies/toolgate/decision.rego:") or lines[1].startswith(str(POLICY_DIR))


def test_parse_input_refuses_what_is_not_one_object_and_notes_missing_members() -> None:
    with pytest.raises(PolicyInputError, match="not JSON"):
        parse_input("{")
    with pytest.raises(PolicyInputError, match="JSON object"):
        parse_input("[1]")
    document, notes = parse_input('{"tool": {"name": "x"}}')
    assert document == {"tool": {"name": "x"}}
    assert notes[0] == "the input has no 'subject' member (DESIGN §3)" and len(notes) == 6


def test_cli_reads_a_file_or_stdin_and_prints_json(tmp_path: Path, monkeypatch, capsys) -> None:
    call = tmp_path / "call.json"
    call.write_text(json.dumps(SECRET))
    assert main(["policy", "eval", "--input", str(call), "--dir", str(POLICY_DIR)]) == 0
    assert capsys.readouterr().out.splitlines()[:3] == [
        "decision: deny", "reasons:", "  - path /etc/shadow is a protected secret (/etc/shadow)"]

    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(PAYMENT)))
    assert main(["policy", "eval", "--input", "-", "--dir", str(POLICY_DIR), "--json", "--explain"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["decision"] == "user-approval"
    assert document["matched_rules"] == [{"id": "payments.amount_over_threshold", "effect": "approval",
                                          "message": "payment over 1000 needs approval"}]
    assert document["trace_source"] == "opa eval --explain=fails" and "Enter" in document["trace"]


def test_cli_lays_pushed_tenant_data_over_the_directory(tmp_path: Path, capsys) -> None:
    """A payment of 1500 needs approval under the default limit of 1000; with acme's pushed
    limits.payment_approval_amount of 2000 it is allowed, under the revision the gateway reads."""
    call = tmp_path / "call.json"
    call.write_text(json.dumps(PAYMENT))
    pushed = tmp_path / "tenant-data"
    (pushed / "acme").mkdir(parents=True)
    (pushed / "acme" / "data.json").write_text(json.dumps({"limits": {"payment_approval_amount": 2000}}))
    assert main(["policy", "eval", "--input", str(call), "--dir", str(POLICY_DIR), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["decision"] == "user-approval"
    assert main(["policy", "eval", "--input", str(call), "--dir", str(POLICY_DIR), "--json",
                 "--tenant-data", str(pushed)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["decision"] == "allow"
    assert document["policy_revision"] == read_directory(POLICY_DIR, tenant_data_dir=pushed).revision


def test_cli_exit_codes(tmp_path: Path, capsys) -> None:
    assert main(["policy", "eval", "--input", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "list.json").write_text("[]")
    assert main(["policy", "eval", "--input", str(tmp_path / "list.json")]) == 2
    (tmp_path / "call.json").write_text(json.dumps(PAYMENT))
    broken = tmp_path / "policies"
    broken.mkdir()
    (broken / "p.rego").write_text("package toolgate\n\ndecision := \n")
    assert main(["policy", "eval", "--input", str(tmp_path / "call.json"), "--dir", str(broken)]) == 1
    assert "p.rego" in capsys.readouterr().err
