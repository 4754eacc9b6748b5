"""OPA's toolchain for policy authors through the project's commands: ``toolgate policy test``
with the real ``opa test`` (coverage, uncovered lines, ``--fail-under``) and the embedded
fallback, scripts/check-policies (``opa check --strict``, ``opa fmt --list``), ``toolgate
policy push`` into a running OPA, and the pinned toolchain of tools/versions.env."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import requests

from app.policy.toolchain import opa_binary, pinned_versions
from tests.conftest import POLICY_DIR, PROJECT_ROOT
from tests.support.opa_process import OpaProcess

UNTESTED_RULE = '''
# An extra rule no test reaches.
extra_reason := "unreached" if {
	input.never == "set"
	input.also_never == "set"
}
'''


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300, check=False)


def _toolgate(*args: str) -> subprocess.CompletedProcess[str]:
    return _run(sys.executable, "-m", "app.cli", *args)


@pytest.fixture
def policies(tmp_path):
    copy = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, copy)
    return copy


def test_the_pinned_opa_is_the_one_installed():
    version = subprocess.run([str(opa_binary()), "version"], capture_output=True, text=True, check=True).stdout
    assert f"Version: {pinned_versions()['OPA_VERSION'].lstrip('v')}" in version.splitlines()


def test_policy_test_runs_opa_test_with_coverage():
    done = _toolgate("policy", "test", str(POLICY_DIR), "--coverage", "--fail-under", "90")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS: " in done.stdout  # opa test's summary line
    assert "coverage (policy files, tests excluded):" in done.stdout
    assert "policies/toolgate/decision.rego" in done.stdout
    assert "_test.rego" not in done.stdout.split("coverage (policy files")[1]


def test_uncovered_lines_are_listed_and_fail_under_fails(policies):
    target = policies / "tools" / "files" / "files.rego"
    before = len(target.read_text().splitlines())
    target.write_text(target.read_text() + UNTESTED_RULE)
    done = _toolgate("policy", "test", str(policies), "--fail-under", "99.9")
    assert done.returncode == 1
    assert f"uncovered lines: {before + 3}-{before + 5}" in done.stdout
    assert "is under 99.9%" in done.stderr


def test_a_failing_test_fails_under_opa(policies):
    target = policies / "tools" / "payments" / "payments_test.rego"
    target.write_text(target.read_text() + (
        "\n\ntest_this_one_fails if {\n\tx := 1 + 1\n\tx == 3\n}\n"
        "\ntest_this_expectation_fails if {\n"
        '\tfixtures.expect(fixtures.call(fixtures.admin, "processPayment", {"amount": 5, "currency": "EUR"}),'
        ' {"decision": "deny"})\n}\n'
    ))
    done = _toolgate("policy", "test", str(policies))
    assert done.returncode == 1
    assert "test_this_one_fails: FAIL" in done.stdout and "FAIL: 2/" in done.stdout
    assert ": PASS" not in done.stdout  # passing tests are only counted
    # The fixtures print the decision with its matched rules and what was expected.
    assert '"matched_rules": [{"effect": "allow", "id": "payments.' in done.stdout
    assert 'expected: {"decision": "deny"}' in done.stdout
    # --var-values: the failed expression with the value of its variable under it.
    failures = done.stdout.split("FAILURES", 1)[1]
    assert "\tx == 3\n" in failures and "\t|\n    \t2\n" in failures


def test_the_embedded_runner_needs_no_binary_but_gives_no_coverage(policies):
    done = _toolgate("policy", "test", str(policies), "--runner", "embedded")
    assert done.returncode == 0 and done.stdout.splitlines()[-1].endswith("0 failed")
    refused = _toolgate("policy", "test", str(policies), "--runner", "embedded", "--coverage")
    assert refused.returncode == 2 and "coverage needs the opa binary" in refused.stderr


def test_check_policies_passes_on_clean_policies_and_names_what_fails(policies):
    subprocess.run([str(opa_binary()), "fmt", "-w", str(policies)], check=True, capture_output=True)
    clean = _run("bash", "scripts/check-policies", str(policies))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.count("\nok\n") == 5  # opa check, opa fmt, regal lint, toolgate policy check, properties

    target = policies / "tools" / "files" / "files.rego"  # tickets.rego has no indented line
    target.write_text(target.read_text().replace("\n\t", "\n    ", 1))
    unformatted = _run("bash", "scripts/check-policies", str(policies))
    assert unformatted.returncode == 1 and str(target) in unformatted.stdout

    subprocess.run([str(opa_binary()), "fmt", "-w", str(policies)], check=True, capture_output=True)
    target.write_text(target.read_text() + "\nunused_import_holder if {\n\tx := 1\n\ttrue\n}\n")
    strict = _run("bash", "scripts/check-policies", str(policies))
    assert strict.returncode == 1 and "assigned var x unused" in strict.stdout + strict.stderr

    target.write_text(target.read_text().replace("\nunused_import_holder if {\n\tx := 1\n\ttrue\n}\n", ""))
    tickets = policies / "tools" / "tickets" / "tickets.rego"
    tickets.write_text(tickets.read_text() + '\ngoverns.sendSms := {"versions": ["1"]}\n')
    unknown_tool = _run("bash", "scripts/check-policies", str(policies))
    assert unknown_tool.returncode == 1
    assert "error: family tickets governs tool sendSms v1, which has no contract" in unknown_tool.stdout


def test_push_loads_a_policy_directory_into_a_running_opa(tmp_path, make_app):
    opa = OpaProcess(tmp_path / "opa").start()  # no bundle: the REST API owns every path
    try:
        done = _toolgate("policy", "push", str(POLICY_DIR), "--url", opa.url)
        assert done.returncode == 0, done.stderr
        assert "pushed toolgate/decision.rego" in done.stdout and "pushed data.json" in done.stdout
        listed = requests.get(opa.url + "/v1/policies", timeout=5).json()["result"]
        assert {p["id"] for p in listed} >= {"toolgate/decision.rego", "tools/files/files.rego"}
        from tests.support.calls import auth, decide_body

        resp = make_app(engine="opa", opa_url=opa.url).test_client().post(
            "/v1/decide", json=decide_body("readFile", {"path": "/srv/reports/q1.csv"}), headers=auth(roles=["support_agent"]))
        assert resp.get_json()["decision"] == "allow"

        broken = tmp_path / "broken"
        shutil.copytree(POLICY_DIR, broken)
        (broken / "tools" / "files" / "files.rego").write_text('package tools.files\n\nallow contains {"rule": "read_anywhere", "message": "any path"} if {\n')
        refused = _toolgate("policy", "push", str(broken), "--url", opa.url)
        assert refused.returncode == 1 and "OPA refused tools/files/files.rego" in refused.stderr
    finally:
        opa.stop()
