"""Layout of the policy bundle: package paths mirror folders, METADATA on the entry point and on
every family says what the Rego says, tenant overlays load at data.tenants.<tenant>.

The Rego values are read from the real embedded engine (``data.tools.<family>.governs`` and
``approver_roles``); the METADATA comments are parsed as YAML the way OPA reads them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from opa_bindings import OpaEngine, OpaUndefinedError

from app.policy.bundle import load_bundle
from tests.conftest import POLICY_DIR

_PACKAGE = re.compile(r"^package\s+(\S+)", re.MULTILINE)
FAMILY_FILES = sorted(p for p in (POLICY_DIR / "tools").glob("*/*.rego") if not p.name.endswith("_test.rego"))
TENANT_KEYS = {"counterparties", "allowed_domains", "limits", "features", "custom"}


def _package(path: Path) -> str:
    found = _PACKAGE.search(path.read_text(encoding="utf-8"))
    assert found, path
    return found[1]


def _metadata_before(text: str, line_pattern: str) -> dict[str, Any]:
    """The YAML of the ``# METADATA`` comment block right above the first line matching
    ``line_pattern``."""
    lines = text.splitlines()
    target = next(i for i, line in enumerate(lines) if re.match(line_pattern, line))
    start = target
    while start > 0 and lines[start - 1].startswith("#"):
        start -= 1
    block = lines[start:target]
    assert block and block[0] == "# METADATA", f"no METADATA above {lines[target]!r}"
    return yaml.safe_load("\n".join(line[2:] if line.startswith("# ") else line[1:] for line in block[1:]))


@pytest.fixture(scope="module")
def engine():
    e = OpaEngine()
    load_bundle(e, POLICY_DIR, include_tests=False)
    yield e
    e.close()


def test_package_paths_mirror_folders():
    rego_files = sorted(POLICY_DIR.rglob("*.rego"))
    assert len(rego_files) > 25
    for path in rego_files:
        folder = ".".join(path.parent.relative_to(POLICY_DIR).parts)
        expected = folder + "_test" if path.name.endswith("_test.rego") else folder
        assert _package(path) == expected, path


def test_the_shipped_families_each_with_a_test_file():
    assert {"banking", "commands", "files", "payments", "reports", "tickets"} <= {p.parent.name for p in FAMILY_FILES}
    for path in FAMILY_FILES:
        assert path.stem == path.parent.name
        assert path.with_name(f"{path.stem}_test.rego").is_file()


def test_entry_point_has_metadata():
    meta = _metadata_before((POLICY_DIR / "toolgate" / "decision.rego").read_text(encoding="utf-8"), r"decision := _decision if not")
    assert meta["entrypoint"] is True and meta["scope"] == "document"
    assert meta["title"] and "matched_rules" in meta["description"]


@pytest.mark.parametrize("path", FAMILY_FILES, ids=lambda p: p.parent.name)
def test_family_metadata_matches_its_rules(path, engine):
    family = path.parent.name
    meta = _metadata_before(path.read_text(encoding="utf-8"), r"package ")
    assert meta["title"] and meta["description"]
    assert meta["custom"]["governs"] == engine.eval_document(f"tools.{family}.governs")
    try:
        roles = engine.eval_document(f"tools.{family}.approver_roles")
    except OpaUndefinedError:
        roles = "default"
    assert meta["custom"]["approver_roles"] == roles
    try:
        log_only = engine.eval_document(f"tools.{family}.log_only")
    except OpaUndefinedError:
        log_only = False
    assert meta["custom"].get("log_only", False) is log_only


def test_families_use_the_library_and_no_copied_helpers():
    for path in FAMILY_FILES:
        text = path.read_text(encoding="utf-8")
        assert "call_of(name) if" not in text, path  # the helper every family used to copy
    for path in sorted(POLICY_DIR.rglob("*_test.rego")):
        if path.parent.name != "fixtures":
            text = path.read_text(encoding="utf-8")
            assert "import data.toolgate.fixtures_test as fixtures" in text, path
            assert '"request": {"id"' not in text, path  # input documents come from the fixtures


def test_tenant_overlays_load_at_their_tenant(engine):
    overlays = sorted((POLICY_DIR / "tenants").glob("*/data.json"))
    assert [p.parent.name for p in overlays] == ["acme", "bank-demo"]
    for path in overlays:
        overlay = json.loads(path.read_text(encoding="utf-8"))
        assert isinstance(overlay, dict) and set(overlay) <= TENANT_KEYS, path
        assert engine.eval_document("tenants")[path.parent.name] == overlay
    root = json.loads((POLICY_DIR / "data.json").read_text(encoding="utf-8"))
    assert set(root) == {"roles", "approvals", "rate_limits"}
