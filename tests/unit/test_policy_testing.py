"""The Rego test runner (app.policy.testing): bundle loading, test discovery, outcomes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from opa_bindings import OpaEngine

from app.policy.bundle import PolicyLoadError, load_bundle
from app.policy.testing import TestCase, discover_tests, run_policy_tests

POLICY_DIR = Path(__file__).resolve().parents[2] / "policies"


@pytest.fixture
def engine():
    e = OpaEngine()
    yield e
    e.close()


@pytest.fixture
def policy_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, copy)
    return copy


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- the shipped policies --------------------------------------------------------------------


def test_shipped_policies_all_pass():
    report = run_policy_tests(POLICY_DIR)
    bad = [r for r in report.results if r.outcome != "pass"]
    assert not bad, report.format_text()
    assert report.ok
    assert report.passed == len(discover_tests(POLICY_DIR)) > 50
    assert report.failed == report.errored == 0
    assert report.format_text().splitlines()[-1] == f"policy tests: {report.passed} passed, 0 failed"


def test_every_policy_file_has_a_test_file_beside_it():
    for rego in POLICY_DIR.rglob("*.rego"):
        if not rego.name.endswith("_test.rego"):
            assert rego.with_name(rego.stem + "_test.rego").is_file(), rego


def test_shipped_tests_cover_every_package():
    packages = {case.package for case in discover_tests(POLICY_DIR)}
    assert packages == {
        "toolgate_test",
        "toolgate.capability_test",
        "toolgate.lib_test",
        "tools.banking_test",
        "tools.commands_test",
        "tools.files_test",
        "tools.inbox_test",
        "tools.payments_test",
        "tools.reports_test",
        "tools.tickets_test",
        "tools.web_test",
    }


def test_load_bundle_without_tests_is_sorted_and_relative(engine):
    loaded = load_bundle(engine, POLICY_DIR, include_tests=False)
    modules = [p for p in loaded if p.suffix == ".rego"]
    assert modules == sorted(modules)
    assert not any(p.name.endswith("_test.rego") for p in loaded)
    assert Path("toolgate/decision.rego") in loaded and Path("data.json") in loaded
    assert all(not p.is_absolute() for p in loaded)
    # the tests are not loaded: the test packages are undefined
    assert engine.eval_query("x := data.toolgate_test") == []


def test_load_bundle_with_tests_loads_test_files(engine):
    loaded = load_bundle(engine, POLICY_DIR, include_tests=True)
    assert Path("toolgate/decision_test.rego") in loaded
    assert engine.eval_document("toolgate_test.test_allow_shape") is True


# --- outcomes --------------------------------------------------------------------------------


def test_broken_test_is_reported_as_failed(policy_copy: Path):
    target = policy_copy / "tools" / "payments" / "payments_test.rego"
    target.write_text(target.read_text() + "\ntest_this_one_fails if {\n\tfalse\n}\n")
    report = run_policy_tests(policy_copy)
    failed = [r for r in report.results if r.outcome == "fail"]
    assert [r.case.qualified_name for r in failed] == ["tools.payments_test.test_this_one_fails"]
    assert failed[0].message == "result is undefined"
    assert not report.ok
    text = report.format_text()
    assert "FAIL tools.payments_test.test_this_one_fails (tools/payments/payments_test.rego:" in text
    assert text.splitlines()[-1] == f"policy tests: {report.passed} passed, 1 failed"


def test_a_failure_says_which_expression_failed_with_its_values(tmp_path: Path):
    _write(tmp_path, "p/x_test.rego", (
        "package p_test\n\n"
        "test_sum if {\n\tx := 1 + 1\n\ty := {\"a\": [x]}\n\tx == 3\n}\n"
    ))
    report = run_policy_tests(tmp_path)
    (failed,) = report.results
    assert failed.details == ('p/x_test.rego:6: failed: x == 3    with x = 2, y = {"a": [2]}',)
    assert report.format_text().splitlines()[:2] == [
        "FAIL p_test.test_sum (p/x_test.rego:3): result is undefined",
        '    p/x_test.rego:6: failed: x == 3    with x = 2, y = {"a": [2]}',
    ]


def test_a_fixtures_failure_shows_the_decision_and_its_matched_rules(policy_copy: Path, capfd):
    target = policy_copy / "tools" / "tickets" / "tickets_test.rego"
    target.write_text(target.read_text() + (
        "\ntest_ticket_denied if {\n"
        '\tfixtures.expect(fixtures.call(fixtures.agent, "createTicket", {"title": "t", "description": "d"}), '
        '{"decision": "deny"})\n}\n'
    ))
    report = run_policy_tests(policy_copy)
    (failed,) = [r for r in report.results if r.outcome != "pass"]
    fixtures = (policy_copy / "toolgate" / "fixtures" / "fixtures_test.rego").read_text().splitlines()
    printed = next(n for n, line in enumerate(fixtures, start=1) if line.strip() == 'print("decision:", d)')
    assert failed.details[:2] == (
        f'toolgate/fixtures/fixtures_test.rego:{printed}: decision: {{"decision": "allow", "matched_rules": [{{"effect": '
        '"allow", "id": "tickets.valid_ticket", "message": "a ticket that matches its contract"}], "reasons": '
        '["allowed by policy"]}',
        f'toolgate/fixtures/fixtures_test.rego:{printed + 1}: expected: {{"decision": "deny"}}',
    )
    assert failed.details[2].startswith("tools/tickets/tickets_test.rego:")
    assert ": failed: fixtures.expect(fixtures.call(fixtures.agent" in failed.details[2]
    assert "expected:" not in capfd.readouterr().err  # the prints are shown once, with the failure


def test_non_true_value_fails_and_eval_error_is_an_error(tmp_path: Path):
    _write(
        tmp_path,
        "p/x_test.rego",
        "package p_test\n\n"
        "test_number := 1\n\n"
        'test_string := "true"\n\n'
        "test_ok if true\n\n"
        "test_divides_by_zero if {\n\tx := 1 / 0\n\tx > 0\n}\n",
    )
    report = run_policy_tests(tmp_path)
    outcomes = {r.case.name: r.outcome for r in report.results}
    assert outcomes == {
        "test_number": "fail",
        "test_string": "fail",
        "test_ok": "pass",
        "test_divides_by_zero": "error",
    }
    error = next(r for r in report.results if r.outcome == "error")
    assert "divide by zero" in error.message
    assert (report.passed, report.failed, report.errored) == (1, 2, 1)
    lines = report.format_text().splitlines()
    assert lines[0] == "FAIL p_test.test_number (p/x_test.rego:3): result is 1, not true"
    assert lines[-1] == "policy tests: 1 passed, 3 failed"


def test_same_named_heads_are_one_test(tmp_path: Path):
    _write(tmp_path, "a_test.rego", "package a_test\n\ntest_x if false\n\ntest_x if true\n\ntest_y if false\n")
    cases = discover_tests(tmp_path)
    assert [(c.name, c.line) for c in cases] == [("test_x", 3), ("test_y", 7)]
    report = run_policy_tests(tmp_path)
    assert {r.case.name: r.outcome for r in report.results} == {"test_x": "pass", "test_y": "fail"}


def test_directory_without_tests_is_not_ok(tmp_path: Path):
    _write(tmp_path, "a.rego", "package a\n\nx := 1\n")
    report = run_policy_tests(tmp_path)
    assert report.results == [] and not report.ok
    assert report.format_text() == "policy tests: 0 passed, 0 failed"


# --- discovery ------------------------------------------------------------------------------


def test_discover_tests_reads_package_and_heads(tmp_path: Path):
    _write(
        tmp_path,
        "tools/demo_test.rego",
        "# test_not_a_rule at column 0 inside a comment\n"
        "package tools.demo_test\n\n"
        "import rego.v1\n\n"
        "test_first if {\n\ttrue\n}\n\n"
        "helper_test_like := 1\n\n"
        "  test_indented if true\n\n"
        "test_second := true\n",
    )
    _write(tmp_path, "tools/demo.rego", "package tools.demo\n\ntest_in_a_policy_file := true\n")
    assert discover_tests(tmp_path) == [
        TestCase("tools.demo_test", "test_first", Path("tools/demo_test.rego"), 6),
        TestCase("tools.demo_test", "test_second", Path("tools/demo_test.rego"), 14),
    ]


def test_test_file_without_package_is_an_error(tmp_path: Path):
    _write(tmp_path, "x_test.rego", "test_a if true\n")
    with pytest.raises(PolicyLoadError, match=r"x_test\.rego"):
        discover_tests(tmp_path)


# --- load errors ----------------------------------------------------------------------------


def test_syntax_error_raises_naming_the_file(policy_copy: Path):
    (policy_copy / "toolgate" / "decision.rego").write_text("package toolgate\n\ndecision := \n")
    with pytest.raises(PolicyLoadError) as info:
        run_policy_tests(policy_copy)
    assert str(info.value).startswith("toolgate/decision.rego: ")
    assert "rego_parse_error" in str(info.value)
    assert info.value.path == Path("toolgate/decision.rego")


def test_compile_error_raises_naming_the_file(policy_copy: Path, engine):
    _write(policy_copy, "tools/oops.rego", 'package tools.oops\n\nallow contains {"rule": "unbound", "message": "x is never bound"} if {\n\tx\n}\n')
    with pytest.raises(PolicyLoadError) as info:
        load_bundle(engine, policy_copy, include_tests=False)
    assert "tools/oops.rego:4" in str(info.value)
    assert "rego_unsafe_var_error" in str(info.value)
    assert info.value.path == Path("tools/oops.rego")


def test_invalid_json_data_raises_naming_the_file(tmp_path: Path, engine):
    _write(tmp_path, "a/data.json", "{not json")
    with pytest.raises(PolicyLoadError, match=r"^a/data\.json: invalid JSON"):
        load_bundle(engine, tmp_path, include_tests=False)


def test_non_object_root_data_raises(tmp_path: Path, engine):
    _write(tmp_path, "data.json", "[1, 2]")
    with pytest.raises(PolicyLoadError, match=r"root data\.json must hold a JSON object"):
        load_bundle(engine, tmp_path, include_tests=False)


def test_data_merge_conflict_raises_naming_the_file(tmp_path: Path, engine):
    _write(tmp_path, "data.json", json.dumps({"a": {"b": 1}}))
    _write(tmp_path, "a/data.json", json.dumps({"b": 2}))
    with pytest.raises(PolicyLoadError, match=r"^a/data\.json: cannot merge at data\.a"):
        load_bundle(engine, tmp_path, include_tests=False)


def test_missing_directory_raises(tmp_path: Path):
    with pytest.raises(PolicyLoadError, match="does not exist"):
        run_policy_tests(tmp_path / "nope")


# --- data.json bundle semantics -------------------------------------------------------------


def test_data_json_is_merged_at_its_folder_path(tmp_path: Path, engine):
    _write(tmp_path, "data.json", json.dumps({"roles": {"admin": {"tools": ["x"]}}, "limits": {"a": 1}}))
    _write(tmp_path, "tenants/acme/data.json", json.dumps({"allow": True}))
    _write(tmp_path, "limits/data.json", json.dumps({"b": 2}))
    _write(tmp_path, ".hidden/data.json", json.dumps({"secret": 1}))
    _write(tmp_path, "lib/q.rego", "package lib\n\nacme_allows := data.tenants.acme.allow\n")
    loaded = load_bundle(engine, tmp_path, include_tests=False)
    assert loaded == [Path("lib/q.rego"), Path("data.json"), Path("limits/data.json"), Path("tenants/acme/data.json")]
    assert engine.eval_document("roles") == {"admin": {"tools": ["x"]}}
    assert engine.eval_document("tenants.acme") == {"allow": True}
    assert engine.eval_document("limits") == {"a": 1, "b": 2}
    assert engine.eval_document("lib.acme_allows") is True
    assert engine.eval_query("x := data.secret") == []


def test_data_json_merge_is_visible_to_tests(tmp_path: Path):
    _write(tmp_path, "cfg/data.json", json.dumps({"limit": 5}))
    _write(tmp_path, "p.rego", "package p\n\nsmall if input.n <= data.cfg.limit\n")
    _write(
        tmp_path,
        "p_test.rego",
        "package p_test\n\nimport data.p\n\n"
        "test_small if p.small with input as {\"n\": 5}\n\n"
        "test_big if not p.small with input as {\"n\": 6}\n",
    )
    report = run_policy_tests(tmp_path)
    assert [r.outcome for r in report.results] == ["pass", "pass"], report.format_text()
