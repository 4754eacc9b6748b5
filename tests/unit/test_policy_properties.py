"""``toolgate policy properties`` on the real embedded engine: the shipped properties hold, and
three bugs planted in a copy of the shipped policies (a payment threshold off by a factor of
ten, a role granted a mutating tool by mistake, a family that forgets ``governs`` for a new
version of its tool) are each found with a shrunk counterexample, whose Rego test fails on the
planted copy and passes on the shipped policies under the real ``opa test``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.contracts.registry import ContractRegistry
from app.policy.bundle import read_directory
from app.policy.properties import PropertyResult, check_property, format_results, rego_test
from app.policy.property_inputs import PolicyWorld
from app.policy.property_spec import PropertyFileError, read_property_file
from app.policy.toolchain import opa_binary
from tests.conftest import CONTRACTS_DIR, POLICY_DIR, PROJECT_ROOT

PROPERTIES = POLICY_DIR / "properties.yaml"


def _check(policy_dir: Path, contracts_dir: Path, name: str) -> PropertyResult:
    spec = read_property_file(PROPERTIES)
    bundle = read_directory(policy_dir)
    world = PolicyWorld.read(bundle, ContractRegistry.load(contracts_dir).all())
    prop = next(p for p in spec.properties if p.name == name)
    return check_property(prop, bundle, world, examples=prop.examples or spec.examples, values=spec.values)


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the shipped policies and contracts to plant a bug in."""
    shutil.copytree(POLICY_DIR, tmp_path / "policies")
    shutil.copytree(CONTRACTS_DIR, tmp_path / "contracts")
    return tmp_path / "policies", tmp_path / "contracts"


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def _opa_test(policy_dir: Path, test: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``opa test`` of ``policy_dir`` with ``test`` added in its own test file."""
    opa = opa_binary()
    assert opa is not None, "scripts/install.sh builds the pinned opa"
    target = tmp_path / f"run-{len(list(tmp_path.iterdir()))}"
    shutil.copytree(policy_dir, target)
    (target / "counterexample_test.rego").write_text(f"package counterexample_test\n\n{test}\n")
    return subprocess.run([str(opa), "test", str(target), "--run", "counterexample"], capture_output=True, text=True,
                          timeout=120, check=False)


def _assert_found(result: PropertyResult, tmp_path: Path, planted_dir: Path) -> str:
    assert result.status == "fails", format_results([result])
    test = rego_test(result.spec, result.counterexample)
    failed = _opa_test(planted_dir, test, tmp_path)
    assert failed.returncode != 0 and "FAIL" in failed.stdout, failed.stdout + failed.stderr
    passed = _opa_test(POLICY_DIR, test, tmp_path)
    assert passed.returncode == 0 and "PASS: 1/1" in passed.stdout, passed.stdout + passed.stderr
    return test


def test_the_shipped_properties_hold():
    result = subprocess.run([sys.executable, "-m", "app.cli", "policy", "properties", str(PROPERTIES), "--json"],
                            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    found = json.loads(result.stdout)
    assert found["ok"] is True
    assert {p["status"] for p in found["properties"]} == {"holds"}
    assert all(p["premise_held"] > 0 for p in found["properties"])


def test_a_payment_threshold_off_by_a_factor_of_ten_is_found(planted, tmp_path):
    policies, contracts = planted
    _replace(policies / "tools/payments/payments.rego", "default_approval_amount := 1000\n",
             "default_approval_amount := 10000\n")
    result = _check(policies, contracts, "payment_over_threshold_needs_approval")
    test = _assert_found(result, tmp_path, policies)
    found = result.counterexample
    assert found.decision.decision == "allow"
    # Shrunk: the smallest amount over 1000 the boundary values hold, and nothing optional.
    assert found.call.policy_input["call"]["input"]["amount"] == 1000.01
    assert found.call.policy_input["approval"] is None
    assert "test_property_payment_over_threshold_needs_approval_counterexample if {" in test


def test_a_role_granted_a_mutating_tool_by_mistake_is_found(planted, tmp_path):
    policies, contracts = planted
    _replace(policies / "data.json", '"tools": ["createTicket", "readFile", "exportReport"]',
             '"tools": ["createTicket", "readFile", "exportReport", "processPayment"]')
    result = _check(policies, contracts, "support_agent_mutates_tickets_only")
    _assert_found(result, tmp_path, policies)
    assert result.counterexample.call.policy_input["tool"]["name"] == "processPayment"
    assert result.counterexample.call.policy_input["subject"]["roles"] == ["support_agent"]


def test_a_family_that_forgets_governs_for_a_new_version_is_found(planted, tmp_path):
    policies, contracts = planted
    new_version = contracts / "readFile.v2.yaml"
    shutil.copy(contracts / "readFile.v1.yaml", new_version)
    _replace(new_version, 'version: "1"', 'version: "2"')
    result = _check(policies, contracts, "every_tool_has_one_family")
    assert result.status == "fails", format_results([result])
    found = result.counterexample
    assert (found.call.policy_input["tool"]["name"], found.call.policy_input["tool"]["version"]) == ("readFile", "2")
    assert "toolgate.no_family" in found.problem
    # A ready-to-paste test: it fails on the copy; the shipped policies have no readFile v2
    # either, so the fix to check it against is governing the version in the copy.
    test = rego_test(result.spec, found)
    assert _opa_test(policies, test, tmp_path).returncode != 0
    _replace(policies / "tools/files/files.rego", 'governs["readFile"] := {"versions": ["1"]}',
             'governs["readFile"] := {"versions": ["1", "2"]}')
    fixed = _opa_test(policies, test, tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


def test_a_property_file_with_mistakes_is_refused_with_its_paths(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("toolgate_properties:\n  version: 1\n  properties:\n    - name: Bad-Name\n      never: [allow]\n"
                   "    - name: expects_nothing\n      tools: all\n")
    with pytest.raises(PropertyFileError) as caught:
        read_property_file(bad)
    message = str(caught.value)
    assert "/toolgate_properties/properties/0/name" in message
    assert "/toolgate_properties/properties/1: Value error, a property needs at least one of never" in message
    bad.write_text("version: 1\n")
    with pytest.raises(PropertyFileError, match="one member, toolgate_properties"):
        read_property_file(bad)


def _shipped_check(tmp_path: Path, properties: str, examples: int) -> tuple[PropertyResult, PolicyWorld]:
    """The one property of the property file ``properties`` (its ``properties`` list, YAML)
    checked on the shipped policies and contracts."""
    spec_file = tmp_path / "p.yaml"
    spec_file.write_text("toolgate_properties:\n  version: 1\n  properties:\n" + properties)
    spec = read_property_file(spec_file)
    bundle = read_directory(POLICY_DIR)
    world = PolicyWorld.read(bundle, ContractRegistry.load(CONTRACTS_DIR).all())
    return check_property(spec.properties[0], bundle, world, examples=examples), world


def test_a_premise_that_never_holds_is_vacuous_not_a_pass(tmp_path):
    result, _ = _shipped_check(tmp_path, "    - name: never_true\n      tools: [readFile]\n"
                                         "      when: input.call.input.path == 7\n      never: [allow]\n", 20)
    assert result.status == "vacuous" and result.examples == 20 and result.premise_held == 0


def test_every_tool_gets_inputs_its_contract_accepts(tmp_path):
    """createTicket's clientMutationId has ``format: uuid``, which hypothesis-jsonschema does not
    know: without our format its inputs were all refused by the contract, and the tool untried."""
    result, world = _shipped_check(tmp_path, "    - name: any_decision\n      tools: all\n"
                                             "      only: [allow, deny, user-approval]\n", 1)
    assert result.status == "holds", result.error
    assert result.premise_held >= len(world.contracts)  # at least one input of every tool
