"""Tenant data's ``custom`` members: their shapes come from the policy
(``data.toolgate.catalog.tenant_custom``, the library's and the families' ``tenant_custom``),
``validate`` holds each member to its shape and refuses an undeclared one, and
``toolgate tenant-data check`` checks every tenant's data of a policy directory (the real
embedded engine on copies of the shipped policies)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.cli import main
from app.policy.bundle import read_directory
from app.policy.tenant_data import TenantDataInvalid, validate
from app.policy.tenant_data_commands import declared_shapes
from tests.conftest import POLICY_DIR


@pytest.fixture(scope="module")
def shapes() -> dict[str, object]:
    return declared_shapes(read_directory(POLICY_DIR))


def _problems(document: object, shapes: dict[str, object]) -> list[dict[str, str]]:
    with pytest.raises(TenantDataInvalid) as refused:
        validate(document, shapes)
    return refused.value.problems


def test_the_library_declares_its_tenants_secret_patterns(shapes) -> None:
    document = {"custom": {"secret_patterns": {"badge": r"\bACME-[0-9]{6}\b"}}}
    assert validate(document, shapes) == document


@pytest.mark.parametrize(("custom", "path"), [
    ({"aliases": ["x"]}, "/custom/aliases"),
    ({"secret_patterns": {"badge": "(?=lookahead)"}}, "/custom/secret_patterns/badge"),
    ({"secret_patterns": {"badge": "(unclosed"}}, "/custom/secret_patterns/badge"),
    ({"secret_patterns": {"badge": r"(a)\1"}}, "/custom/secret_patterns/badge"),
    ({"secret_patterns": {"Badge": "x"}}, "/custom/secret_patterns"),
    ({"secret_patterns": "x"}, "/custom/secret_patterns"),
])
def test_a_member_outside_its_declared_shape_is_refused_without_its_value(shapes, custom, path) -> None:
    problems = _problems({"custom": custom}, shapes)
    assert [p["path"] for p in problems] == [path]
    assert "lookahead" not in json.dumps(problems) and "unclosed" not in json.dumps(problems)


def test_without_shapes_only_the_members_names_are_checked() -> None:
    assert validate({"custom": {"anything": {"goes": [1]}}}) == {"custom": {"anything": {"goes": [1]}}}
    assert [p["path"] for p in _problems({"custom": {"Not-A-Name": 1}}, {})] == ["/custom"]


def _policies_with(tmp_path: Path, acme: object) -> Path:
    policy_dir = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, policy_dir)
    (policy_dir / "tenants" / "acme" / "data.json").write_text(json.dumps(acme))
    return policy_dir


def test_the_check_command_passes_the_shipped_tenants(capsys) -> None:
    assert main(["tenant-data", "check", str(POLICY_DIR)]) == 0
    assert capsys.readouterr().out.endswith("tenant-data check: 2 tenants, 0 problems\n")


def test_the_check_command_names_each_problem_and_fails(tmp_path, capsys) -> None:
    policy_dir = _policies_with(tmp_path, {"custom": {"aliases": ["x"], "secret_patterns": {"pin": "(?!0000)[0-9]{4}"}}})
    overlay = tmp_path / "tenant-data" / "bank-demo"
    overlay.mkdir(parents=True)
    (overlay / "data.json").write_text(json.dumps({"limits": {"transfer_auto_approve_amount": "many"}}))
    assert main(["tenant-data", "check", str(policy_dir), "--tenant-data", str(tmp_path / "tenant-data")]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "tenants/acme/data.json: /custom/aliases: no family declares this custom member (tenant_custom)",
        "tenants/acme/data.json: /custom/secret_patterns/pin: not a regular expression RE2 accepts "
        "(no lookaround, atomic group or backreference)",
        "tenants/bank-demo/data.json: /limits/transfer_auto_approve_amount: must be of type number",
        "tenant-data check: 2 tenants, 3 problems",
    ]
