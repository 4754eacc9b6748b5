"""``toolgate policy check`` (app.policy.check) catches each mistake it is for, on a copy of the
shipped policies and contracts with that one mistake introduced: a contract without a family,
two families claiming one tool, a family naming a tool (or a version, or a namespace) without a
contract, a rule reading a field its contract does not define, and a rule reading an optional
field without a default. The shipped policies pass clean. Real ``opa parse`` (the pinned
binary) and the real embedded engine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.cli import main
from app.contracts.registry import ContractRegistry
from app.policy.check import CheckReport, Finding, check_policies
from app.policy.session_reads import members_of
from app.policy.toolchain import opa_binary
from tests.conftest import CONTRACTS_DIR, POLICY_DIR, PROJECT_ROOT

OPA = opa_binary()
TEMPLATE_CONTRACT = PROJECT_ROOT / "docs" / "policy-template" / "contracts" / "sendEmail.v1.yaml"
#: The contracts and families of the checked-in tree (a walkthrough of docs/policy-authors.md adds one of each).
SHIPPED = f"{len(ContractRegistry.load(CONTRACTS_DIR).all())} contracts, {len(list((POLICY_DIR / 'tools').iterdir()))} families"


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the shipped policies and contracts: (policies, contracts)."""
    policies, contracts = tmp_path / "policies", tmp_path / "contracts"
    shutil.copytree(POLICY_DIR, policies)
    shutil.copytree(CONTRACTS_DIR, contracts)
    return policies, contracts


def _check(tree: tuple[Path, Path]) -> CheckReport:
    assert OPA is not None, "scripts/install.sh builds .tools/bin/opa"
    return check_policies(tree[0], tree[1], opa=OPA)


def _append(path: Path, rego: str) -> int:
    """Append ``rego`` to ``path``; returns the line number of its first line."""
    text = path.read_text(encoding="utf-8")
    path.write_text(text + "\n" + rego, encoding="utf-8")
    return len(text.splitlines()) + 2


def _kinds(report: CheckReport) -> list[tuple[str, str]]:
    return [(f.severity, f.kind) for f in report.findings]


def _line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if needle in line)


def test_the_shipped_policies_pass_clean() -> None:
    assert OPA is not None
    report = check_policies(POLICY_DIR, CONTRACTS_DIR, opa=OPA)
    assert report.findings == []
    assert report.format_text() == f"policy check: 0 errors, 0 warnings ({SHIPPED})"


def _orphan_contract(contracts: Path) -> Path:
    """The template's contract under a name no family governs (``sendFax``)."""
    contract = contracts / "sendFax.v1.yaml"
    contract.write_text(TEMPLATE_CONTRACT.read_text(encoding="utf-8").replace("name: sendEmail", "name: sendFax"))
    return contract


def test_a_contract_without_a_family_is_an_error(tree) -> None:
    contract = _orphan_contract(tree[1])
    report = _check(tree)
    assert report.findings == [Finding(
        "error", "no_family",
        "contract sendFax v1 has no policy family: no family's governs declares it, so every call of it is "
        "denied (toolgate.no_family)",
        str(contract), _line_of(contract, "name:"),
    )]
    assert not report.ok()


def test_a_built_in_contract_without_a_family_is_no_finding(tree) -> None:
    """A suite of its own (the security team's) governs none of the built-in contracts: their
    calls are denied, which is no mistake of the suite."""
    shutil.rmtree(tree[0] / "tools" / "tickets")
    assert _check(tree).findings == []


def test_a_missing_contracts_folder_is_an_error_not_an_empty_one(tree, capsys) -> None:
    missing = tree[1] / "no-such-folder"
    assert main(["policy", "check", str(tree[0]), "--contracts", str(missing)]) == 1
    assert capsys.readouterr().err == f"toolgate policy check: contracts folder {missing} does not exist\n"


def test_two_families_claiming_one_tool_is_an_error_unless_each_shares(tree) -> None:
    tickets = tree[0] / "tools" / "tickets" / "tickets.rego"
    line = _append(tickets, 'governs.readFile := {"versions": ["1"]}\n')
    report = _check(tree)
    assert _kinds(report) == [("error", "unshared_claim")]
    finding = report.findings[0]
    assert finding.message == 'tool readFile (namespace "") is claimed by families files and tickets without shared_with'
    # Pointed at the claim of the first family, files; the tickets claim names the same tool.
    files = tree[0] / "tools" / "files" / "files.rego"
    assert (finding.file, finding.line) == (str(files), _line_of(files, 'governs["readFile"]'))
    assert line > 0

    tickets.write_text(tickets.read_text().replace(
        'governs.readFile := {"versions": ["1"]}', 'governs.readFile := {"versions": ["1"], "shared_with": ["files"]}'))
    files.write_text(files.read_text().replace(
        'governs["readFile"] := {"versions": ["1"]}', 'governs["readFile"] := {"versions": ["1"], "shared_with": ["tickets"]}'))
    assert _check(tree).findings == []


def test_a_family_naming_a_tool_without_a_contract_is_an_error(tree) -> None:
    tickets = tree[0] / "tools" / "tickets" / "tickets.rego"
    line = _append(tickets, 'governs.sendSms := {"versions": ["1"]}\n')
    report = _check(tree)
    assert report.findings == [Finding(
        "error", "no_contract", "family tickets governs tool sendSms v1, which has no contract", str(tickets), line)]


def test_versions_are_considered(tree) -> None:
    files = tree[0] / "tools" / "files" / "files.rego"
    files.write_text(files.read_text().replace(
        'governs["readFile"] := {"versions": ["1"]}', 'governs["readFile"] := {"versions": ["1", "2"]}'))
    report = _check(tree)
    assert report.findings == [Finding(
        "error", "no_contract", "family files governs tool readFile v2, which has no contract", str(files),
        _line_of(files, 'governs["readFile"]'))]


def test_namespaces_are_considered(tree) -> None:
    contract = tree[1] / "readFile.v1.yaml"
    contract.write_text(contract.read_text().replace("name: readFile\n", "name: readFile\nnamespace: support\n"))
    report = _check(tree)
    assert [f.message for f in report.findings] == [
        "contract readFile v1 (namespace support) has no policy family: no family's governs declares it, so every "
        "call of it is denied (toolgate.no_family)",
        "family files governs tool readFile v1, which has no contract (there is one in namespace support)",
    ]
    assert report.findings[0].file == str(contract)


def test_a_malformed_declaration_is_an_error_at_its_line(tree) -> None:
    tickets = tree[0] / "tools" / "tickets" / "tickets.rego"
    line = _append(tickets, 'governs.exportReport := {"versions": "1"}\n')
    report = _check(tree)
    assert (report.findings[0].kind, report.findings[0].file, report.findings[0].line) == (
        "malformed_declaration", str(tickets), line)


def test_a_field_the_contract_does_not_define_is_a_warning(tree) -> None:
    files = tree[0] / "tools" / "files" / "files.rego"
    line = _append(files, (
        'deny contains {"rule": "write_mode", "message": "files are read only"} if {\n'
        '\tinput.tool.name == "readFile"\n'
        '\tinput.call.input.mode == "w"\n'
        '}\n'
    ))
    report = _check(tree)
    assert report.findings == [Finding(
        "warning", "undefined_field",
        "rule deny[write_mode] reads input.call.input.mode, which the contract of readFile v1 does not define",
        str(files), line + 2,
    )]
    assert report.ok() and not report.ok(strict=True)


def test_a_helper_package_is_checked_for_the_families_that_import_it(tree) -> None:
    """Rule code shared by families lives in a package of its own outside ``tools`` (the docs'
    convention names the folder for what the families share); a typo there is found against the
    tools of every family importing it."""
    helper = tree[0] / "common" / "paths" / "paths.rego"
    helper.parent.mkdir(parents=True)
    helper.write_text("package common.paths\n\nimport data.toolgate.lib\n\ntarget := lib.args.pth\n")
    files = tree[0] / "tools" / "files" / "files.rego"
    files.write_text(files.read_text().replace("import data.toolgate.lib\n", "import data.common.paths\nimport data.toolgate.lib\n", 1))
    report = _check(tree)
    assert report.findings == [Finding(
        "warning", "undefined_field",
        "rule target reads input.call.input.pth, which no contract of the family's tools defines (deleteFile v1, readFile v1)",
        str(helper), 5,
    )]


def test_a_tool_named_test_something_declared_rule_by_rule_is_an_error(tree) -> None:
    """opa test would run governs.test_connection as a test and fail it."""
    tickets = tree[0] / "tools" / "tickets" / "tickets.rego"
    line = _append(tickets, 'governs.test_connection := {"versions": ["1"]}\n')
    report = _check(tree)
    assert ("error", "test_named_rule", str(tickets), line) in [(f.severity, f.kind, f.file, f.line) for f in report.findings]


def test_an_unlimited_rule_warns_only_when_no_tool_of_the_family_defines_the_field(tree) -> None:
    banking = tree[0] / "tools" / "banking" / "banking.rego"
    line = _append(banking, (
        'memo := object.get(lib.args, "memo", "")\n\n'
        'subject_line := object.get(lib.args, "subject", "")\n'
    ))
    report = _check(tree)
    assert [(f.kind, f.line) for f in report.findings] == [("undefined_field", line)]
    assert report.findings[0].message.startswith(
        "rule memo reads input.call.input.memo, which no contract of the family's tools defines (get_balance v1, ")


def test_an_optional_field_read_without_a_default_is_a_warning(tree) -> None:
    banking = tree[0] / "tools" / "banking" / "banking.rego"
    line = _append(banking, (
        'deny contains {"rule": "recurring_update", "message": "recurring transfers are not changed here"} if {\n'
        '\tinput.tool.name == "update_scheduled_transaction"\n'
        '\tlib.args.recurring == true\n'
        '}\n'
    ))
    report = _check(tree)
    assert report.findings == [Finding(
        "warning", "optional_without_default",
        "rule deny[recurring_update] reads input.call.input.recurring without a default, and the field is optional "
        "in update_scheduled_transaction v1: when it is absent the rule silently does not fire (read it with "
        'object.get(lib.args, "recurring", <default>))',
        str(banking), line + 2,
    )]


def test_required_defaulted_and_filled_fields_are_no_warning(tree) -> None:
    """send_money requires recipient; object.get and lib helpers name a default; createTicket's
    pydantic contract fills priority's default, so a direct read of it always has a value."""
    banking = tree[0] / "tools" / "banking" / "banking.rego"
    _append(banking, (
        'deny contains {"rule": "self_transfer", "message": "no transfers to the bank itself"} if {\n'
        '\tinput.tool.name == "send_money"\n'
        '\tinput.call.input.recipient == "BANK"\n'
        '}\n\n'
        'deny contains {"rule": "old_date", "message": "no back-dated updates"} if {\n'
        '\tlib.call_of("update_scheduled_transaction")\n'
        '\tlib.string_arg("date", "9999") < "2000"\n'
        '}\n'
    ))
    tickets = tree[0] / "tools" / "tickets" / "tickets.rego"
    _append(tickets, (
        'approval_required contains {"rule": "urgent", "message": "urgent tickets need approval"} if {\n'
        '\tinput.call.input.priority == "high"\n'
        '}\n'
    ))
    assert _check(tree).findings == []


def test_a_default_filled_only_in_the_schema_text_is_still_optional(tree) -> None:
    """update_scheduled_transaction's JSON Schema says `default: null` for recipient, but JSON
    Schema contracts do not fill defaults: the field may be absent."""
    banking = tree[0] / "tools" / "banking" / "banking.rego"
    line = _append(banking, (
        'deny contains {"rule": "cleared_recipient", "message": "a recipient cannot be cleared"} if {\n'
        '\tinput.tool.name == "update_scheduled_transaction"\n'
        '\tx := input.call.input\n'
        '\tx.recipient == ""\n'
        '}\n'
    ))
    report = _check(tree)
    assert [(f.kind, f.line) for f in report.findings] == [("optional_without_default", line + 3)]


def test_a_message_quoting_a_sensitive_field_is_a_warning(tree) -> None:
    """update_password marks /password sensitive: a message that quotes it, directly, through
    a rule of the package or through a variable of the rule, would show the password in the
    response, the receipt and the decision log. Naming the field, or quoting another one, is
    no warning."""
    banking = tree[0] / "tools" / "banking" / "banking.rego"
    line = _append(banking, (
        'deny contains {"rule": "short_password", "message": sprintf("password %s is too short", [input.call.input.password])} if {\n'
        '\tlib.call_of("update_password")\n'
        '\tcount(input.call.input.password) < 8\n'
        '}\n\n'
        'new_password := lib.string_arg("password", "")\n\n'
        'shown_password := upper(new_password)\n\n'
        'deny contains {"rule": "password_reused", "message": sprintf("password %s was used before", [shown_password])} if {\n'
        '\tlib.call_of("update_password")\n'
        '\tnew_password == "hunter2"\n'
        '}\n\n'
        'deny contains {"rule": "password_spaces", "message": msg} if {\n'
        '\tlib.call_of("update_password")\n'
        '\tp := lib.args.password\n'
        '\tcontains(p, " ")\n'
        '\tmsg := sprintf("password %q has spaces", [p])\n'
        '}\n\n'
        'deny contains {"rule": "password_named", "message": sprintf("the %s field is too short", ["password"])} if {\n'
        '\tlib.call_of("update_password")\n'
        '\tcount(new_password) < 4\n'
        '}\n'
    ))
    report = _check(tree)
    assert [(f.kind, f.line) for f in report.findings] == [
        ("sensitive_in_message", line), ("sensitive_in_message", line + 9), ("sensitive_in_message", line + 18),
    ]
    assert report.findings[0].message == (
        "rule deny[short_password] quotes input.call.input.password in a message, and update_password v1 marks "
        "/password sensitive: messages are reasons, shown in responses, signed in receipts and logged unredacted "
        "(name the field, not its value)"
    )


def test_cli_exit_codes_json_and_strict(tree, capsys) -> None:
    policies, contracts = (str(p) for p in tree)
    assert main(["policy", "check", policies, "--contracts", contracts]) == 0
    files = tree[0] / "tools" / "files" / "files.rego"
    line = _append(files, 'shadow_mode := input.call.input.mode\n')
    capsys.readouterr()
    assert main(["policy", "check", policies, "--contracts", contracts]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{files}:{line}: warning: rule shadow_mode reads input.call.input.mode, which no contract of the family's "
        "tools defines (deleteFile v1, readFile v1)",
        f"policy check: 0 errors, 1 warning ({SHIPPED})",
    ]
    assert main(["policy", "check", policies, "--contracts", contracts, "--strict", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert (document["ok"], document["strict"], document["errors"], document["warnings"]) == (False, True, 0, 1)
    assert document["findings"][0] | {"message": ""} == {
        "severity": "warning", "kind": "undefined_field", "message": "", "file": str(files), "line": line}

    _orphan_contract(tree[1])
    assert main(["policy", "check", policies, "--contracts", contracts]) == 1
    assert "error: contract sendFax v1 has no policy family" in capsys.readouterr().out


def test_cli_needs_the_opa_binary(monkeypatch, capsys) -> None:
    monkeypatch.setattr("app.policy.toolchain.opa_binary", lambda: None)
    assert main(["policy", "check", str(POLICY_DIR), "--contracts", str(CONTRACTS_DIR)]) == 2
    assert "opa binary" in capsys.readouterr().err


def test_cli_reports_policies_that_do_not_load(tree, capsys) -> None:
    (tree[0] / "toolgate" / "decision.rego").write_text("package toolgate\n\ndecision := \n")
    assert main(["policy", "check", str(tree[0]), "--contracts", str(tree[1])]) == 1
    assert "decision.rego" in capsys.readouterr().err


# --- session reads (app.policy.session_reads) --------------------------------------------------


def _declare(path: Path, members: str) -> int:
    """Replace the family's ``session_reads`` declaration; returns its line."""
    text = path.read_text(encoding="utf-8")
    lines = [f"session_reads := {members}" if line.startswith("session_reads :=") else line for line in text.splitlines()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return _line_of(path, "session_reads :=")


def test_a_family_reading_a_session_member_through_the_library_must_declare_it(tree) -> None:
    banking = tree[0] / "tools" / "banking" / "banking.rego"
    line = _declare(banking, '{"provenance", "session.truncated"}')
    lib = tree[0] / "toolgate" / "lib" / "session.rego"
    report = _check(tree)
    assert report.findings == [Finding(
        "error", "undeclared_session_read",
        f"family banking reads input.session.conversation.labels (rule session_labelled, {lib}:"
        f"{_line_of(lib, 'session_labelled(label) if')}) but its session_reads does not declare it: the gateway "
        "would not build it",
        str(banking), line,
    )]


def test_a_variable_scope_reads_both_scopes_and_a_whole_scope_covers_its_members(tree) -> None:
    files = tree[0] / "tools" / "files" / "files.rego"
    _declare(files, '{"session.conversation.calls", "session.windows"}')
    report = _check(tree)
    assert [(f.kind, f.message.split(" (")[0]) for f in report.findings] == [
        ("undeclared_session_read", "family files reads input.session.subject.calls"),
    ]
    _declare(files, '{"session.conversation", "session.subject", "session.windows"}')
    assert _check(tree).findings == []


def test_reading_the_whole_input_or_the_history_must_be_declared(tree) -> None:
    reports = tree[0] / "tools" / "reports" / "reports.rego"
    _append(reports, 'everything := walk(input)\n\nlonger := input.history.allowed_calls\n')
    found = _check(tree)
    assert [(f.kind, f.message.split(" (")[0]) for f in found.findings] == [
        ("undeclared_session_read", "family reports reads input.*"),
        ("undeclared_session_read", "family reports reads input.history"),
    ]
    _declare(reports, '{"*"}')
    assert _check(tree).findings == []


def test_a_malformed_missing_or_unread_declaration(tree) -> None:
    tickets = tree[0] / "tools" / "tickets" / "tickets.rego"
    line = _declare(tickets, '["history"]')
    payments = tree[0] / "tools" / "payments" / "payments.rego"
    unread_line = _declare(payments, '{"session.recent"}')
    commands = tree[0] / "tools" / "commands" / "commands.rego"
    commands.write_text(commands.read_text().replace("session_reads := set()", ""), encoding="utf-8")
    report = _check(tree)
    assert report.findings == [
        Finding("error", "malformed_session_reads", "family tickets: session_reads is not a literal set of strings",
                str(tickets), line),
        Finding("warning", "no_session_reads",
                "family commands declares no session_reads: every call of its tools builds the whole session "
                "(declare session_reads := set() when it reads none)", str(commands)),
        Finding("warning", "unread_session_reads",
                "family payments declares input.session.recent in session_reads, which none of its rules reads: "
                "every call of its tools builds it for nothing", str(payments), unread_line),
    ]
    assert not report.ok()


def test_reading_provenance_must_be_declared(tree) -> None:
    """``input.provenance`` is built on demand like the session: a family that reads it
    declares it, as a whole or by member."""
    reports = tree[0] / "tools" / "reports" / "reports.rego"
    _append(reports, 'planted if input.provenance.arguments["/title"].sources[_].label == "untrusted_content"\n')
    found = _check(tree)
    assert [(f.kind, f.message.split(" (")[0]) for f in found.findings] == [
        ("undeclared_session_read", "family reports reads input.provenance.arguments"),
    ]
    _declare(reports, '{"provenance.arguments"}')
    assert _check(tree).findings == []


def test_the_session_may_be_read_only_in_families(tree) -> None:
    combining = tree[0] / "toolgate" / "decision.rego"
    line = _append(combining, "_long_session if input.session.truncated\n")
    report = _check(tree)
    assert report.findings == [Finding(
        "error", "session_read_outside_family",
        "package toolgate reads input.session.truncated (rule _long_session): only policy families may read the "
        "session (the gateway builds it for what they declare)",
        str(combining), line,
    )]


@pytest.mark.parametrize(("path", "members"), [
    ([], {"*"}),  # input as a whole
    ([None], {"*"}),  # input[k]
    (["call", "input", "amount"], set()),
    (["history", "tools"], {"history"}),
    (["session"], {"session"}),
    (["session", "windows"], {"session.windows"}),
    (["session", "conversation"], {"session.conversation"}),
    (["session", "conversation", None], {"session.conversation"}),
    (["session", "subject", "labels"], {"session.subject.labels"}),
    (["session", None, "calls", None], {"session.conversation.calls", "session.subject.calls"}),
    (["session", None, "1m"], {"session"}),  # input.session[k]["1m"]: k may be windows
    (["session", None], {"session"}),
    (["session", "conversation", "untraced_labels"], {"session.conversation.untraced_labels"}),
    (["provenance"], {"provenance"}),
    (["provenance", None], {"provenance"}),
    (["provenance", "arguments", None, "sources"], {"provenance.arguments"}),
    (["provenance", "untraced_labels"], {"provenance.untraced_labels"}),
])
def test_which_members_a_reference_from_input_reads(path, members) -> None:
    assert members_of(path) == members
