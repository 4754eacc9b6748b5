"""Contract evolution (app.contracts.compatibility, app.contracts.published, toolgate contracts):
a table of schema pairs, each classified for inputs and for outputs (the reverse direction),
metadata changes, versions added and removed, the lock, git revisions, and the CI check that
fails when a contract changes incompatibly without a new version."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.contracts.compatibility import compare, contract_changes, schema_changes
from app.contracts.published import ContractSourceError, from_registry, load, parse_lock
from app.contracts.registry import ContractRegistry
from tests.conftest import CONTRACTS_DIR, PROJECT_ROOT

OBJ = {"type": "object", "additionalProperties": False}


def obj(props: dict, required: tuple[str, ...] = (), **extra) -> dict:
    return {**OBJ, "properties": props, "required": list(required), **extra}


S = {"type": "string"}
N = {"type": "number"}
BASE = obj({"recipient": S, "amount": N, "note": S}, ("recipient", "amount"))

#: (name, old schema, new schema, breaking as an input schema, breaking as an output schema, words in the change)
CASES = [
    ("unchanged", BASE, copy.deepcopy(BASE), None, None, ""),
    ("annotations only", BASE, obj({"recipient": {**S, "title": "R", "description": "who"}, "amount": N, "note": S},
                                   ("recipient", "amount"), title="T"), None, None, ""),
    ("new optional field", BASE, obj({**BASE["properties"], "memo": S}, ("recipient", "amount")), False, True,
     "new optional field memo"),
    ("new required field", BASE, obj({**BASE["properties"], "memo": S}, ("recipient", "amount", "memo")), True, False,
     "new required field memo"),
    ("removed field", BASE, obj({"recipient": S, "amount": N}, ("recipient", "amount")), True, True, "field note removed"),
    ("renamed field", BASE, obj({"recipient": S, "amount": N, "memo": S}, ("recipient", "amount")), True, True,
     "field note renamed to memo"),
    ("optional made required", BASE, obj(BASE["properties"], ("recipient", "amount", "note")), True, False,
     "field note now required"),
    ("required made optional", BASE, obj(BASE["properties"], ("recipient",)), False, True, "field amount now optional"),
    ("type narrowed", obj({"v": N}), obj({"v": {"type": "integer"}}), True, False, "type narrowed"),
    ("type widened", obj({"v": {"type": "integer"}}), obj({"v": N}), False, True, "type widened"),
    ("nullable added", obj({"v": S}), obj({"v": {"type": ["string", "null"]}}), False, True, "type widened"),
    ("type changed", obj({"v": S}), obj({"v": N}), True, True, "type changed"),
    ("enum added", obj({"v": S}), obj({"v": {**S, "enum": ["a", "b"]}}), True, False, "enum/const) added"),
    ("enum narrowed", obj({"v": {**S, "enum": ["a", "b"]}}), obj({"v": {**S, "enum": ["a"]}}), True, False, "narrowed"),
    ("enum widened", obj({"v": {**S, "enum": ["a"]}}), obj({"v": {**S, "enum": ["a", "b"]}}), False, True, "widened"),
    ("enum swapped", obj({"v": {**S, "enum": ["a"]}}), obj({"v": {**S, "enum": ["b"]}}), True, True, "changed"),
    ("const to enum", obj({"v": {"const": "a"}}), obj({"v": {"enum": ["a", "b"]}}), False, True, "widened"),
    ("minimum raised", obj({"v": {**N, "minimum": 0}}), obj({"v": {**N, "minimum": 1}}), True, False, "minimum raised"),
    ("minimum lowered", obj({"v": {**N, "minimum": 1}}), obj({"v": {**N, "minimum": 0}}), False, True, "minimum lowered"),
    ("inclusive to exclusive", obj({"v": {**N, "minimum": 0}}), obj({"v": {**N, "exclusiveMinimum": 0}}), True, False,
     "minimum raised"),
    ("maximum added", obj({"v": N}), obj({"v": {**N, "maximum": 1000}}), True, False, "maximum added"),
    ("maximum removed", obj({"v": {**N, "maximum": 1000}}), obj({"v": N}), False, True, "maximum removed"),
    ("maximum lowered", obj({"v": {**N, "exclusiveMaximum": 1000}}), obj({"v": {**N, "maximum": 999}}), True, False,
     "maximum lowered"),
    ("maxLength lowered", obj({"v": {**S, "maxLength": 64}}), obj({"v": {**S, "maxLength": 32}}), True, False,
     "maximum length lowered"),
    ("minLength added", obj({"v": S}), obj({"v": {**S, "minLength": 1}}), True, False, "minimum length added"),
    ("maxItems raised", obj({"v": {"type": "array", "maxItems": 3}}), obj({"v": {"type": "array", "maxItems": 5}}), False,
     True, "maximum number of items raised"),
    ("pattern added", obj({"v": S}), obj({"v": {**S, "pattern": "^[a-z]+$"}}), True, False, "pattern added"),
    ("pattern changed", obj({"v": {**S, "pattern": "^[a-z]+$"}}), obj({"v": {**S, "pattern": "^[a-z0-9]+$"}}), True, True,
     "pattern changed"),
    ("pattern removed", obj({"v": {**S, "pattern": "^[a-z]+$"}}), obj({"v": S}), False, True, "pattern removed"),
    ("format added", obj({"v": S}), obj({"v": {**S, "format": "date"}}), True, False, "format added"),
    ("fewer decimals", obj({"v": {**N, "x-decimal-places": 2}}), obj({"v": {**N, "x-decimal-places": 0}}), True, False,
     "coarser"),
    ("more decimals", obj({"v": {**N, "multipleOf": 0.01}}), obj({"v": {**N, "multipleOf": 0.001}}), False, True, "finer"),
    ("object closed", {"type": "object", "additionalProperties": True, "properties": {"a": S}}, obj({"a": S}), True, False,
     "closed"),
    ("object opened", obj({"a": S}), {"type": "object", "additionalProperties": True, "properties": {"a": S}}, False, True,
     "opened"),
    ("nested field narrowed", obj({"to": obj({"iban": S}, ("iban",))}), obj({"to": obj({"iban": {**S, "maxLength": 34}},
                                                                                       ("iban",))}),
     True, False, "/to/iban"),
    ("array items narrowed", obj({"v": {"type": "array", "items": N}}), obj({"v": {"type": "array", "items": {"type": "integer"}}}),
     True, False, "/v/*"),
    ("default changed", obj({"p": {**S, "default": "normal"}}), obj({"p": {**S, "default": "high"}}), True, False,
     "default changed"),
    ("anyOf alternative added", obj({"v": {"anyOf": [S]}}), obj({"v": {"anyOf": [S, {"type": "null"}]}}), False, True,
     "alternatives added"),
    ("ref resolved", {**obj({"to": {"$ref": "#/$defs/Acct"}}), "$defs": {"Acct": obj({"id": S}, ("id",))}},
     {**obj({"to": {"$ref": "#/$defs/Acct"}}), "$defs": {"Acct": obj({"id": S, "bic": S}, ("id", "bic"))}}, True, False,
     "new required field bic"),
    ("unknown keyword changed", obj({"v": {**S, "contentEncoding": "base64"}}), obj({"v": {**S, "contentEncoding": "base32"}}),
     True, True, "contentEncoding changed"),
    ("schema added where there was none", None, BASE, True, False, ""),
]


@pytest.mark.parametrize(("name", "old", "new", "as_input", "as_output", "words"), CASES, ids=[c[0] for c in CASES])
def test_schema_pairs(name, old, new, as_input, as_output, words):
    for direction, expected in (("input", as_input), ("output", as_output)):
        found = schema_changes(old, new, direction=direction)
        if expected is None:
            assert found == [], (direction, found)
            continue
        assert found, direction
        assert any(breaking for _, _, breaking in found) is expected, (direction, found)
        assert words in " ".join(f"{path} {what}" for path, what, _ in found), found


def _contract(**changes) -> dict:
    base = {"name": "send", "version": "1", "namespace": "", "description": "", "mutating": True, "risk": "high",
            "retry_safe": False, "sensitive_paths": [], "idempotency_key_field": None, "lease_s": None,
            "input_schema": BASE, "output_schema": None}
    return {**base, **changes}


@pytest.mark.parametrize(
    ("change", "breaking"),
    [({"mutating": False}, True), ({"idempotency_key_field": "clientMutationId"}, True), ({"risk": "low"}, False),
     ({"retry_safe": True}, False), ({"lease_s": 60}, False), ({"sensitive_paths": ["/note"]}, False),
     ({"description": "new words"}, False), ({"amount_fields": ["/amount"]}, False)],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else str(v),
)
def test_metadata_changes(change, breaking):
    [found] = contract_changes(_contract(), _contract(**change))
    assert found.where == "contract" and found.breaking is breaking


def test_versions_added_and_removed():
    v1, v2 = _contract(), _contract(version="2", input_schema=obj({"to": S}, ("to",)))
    other = _contract(name="other")
    changes = {(c.tool, c.version, c.what, c.breaking) for c in compare({("", "send", "1"): v1}, {
        ("", "send", "1"): v1, ("", "send", "2"): v2, ("", "other", "1"): other})}
    assert changes == {("send", "2", "new version", False), ("other", "1", "new tool", False)}
    [removed] = compare({("", "send", "1"): v1}, {})
    assert removed.breaking and "removed" in removed.what
    spaced = _contract(namespace="bank")
    [found] = compare({}, {("bank", "send", "1"): spaced})
    assert found.tool == "bank/send"


def test_the_shipped_contracts_match_their_lock():
    lock = json.loads((PROJECT_ROOT / "contracts.lock.json").read_text(encoding="utf-8"))
    assert compare(parse_lock(lock, "lock"), from_registry(ContractRegistry.load(CONTRACTS_DIR))) == []


def test_lock_entries_must_be_contracts(tmp_path):
    with pytest.raises(ContractSourceError, match="not a contracts lock"):
        parse_lock({"version": 7, "contracts": []}, "x")
    with pytest.raises(ContractSourceError, match="without name"):
        parse_lock({"version": 1, "contracts": [{"name": "x"}]}, "x")


def _toolgate(*args: str, contracts: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TOOLGATE_LOG_LEVEL": "ERROR"}
    if contracts is not None:
        env["TOOLGATE_CONTRACTS_DIR"] = str(contracts)
    return subprocess.run([sys.executable, "-m", "app.cli", "contracts", *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, env=env, timeout=120, check=False)


def test_the_ci_check_fails_on_an_incompatible_change_without_a_new_version(tmp_path):
    contracts = tmp_path / "contracts"
    shutil.copytree(CONTRACTS_DIR, contracts)
    lock = tmp_path / "lock.json"
    assert _toolgate("lock", "--out", str(lock), contracts=contracts).returncode == 0
    assert _toolgate("check", "--lock", str(lock), contracts=contracts).stdout.strip() == "contracts match lock.json"

    read = contracts / "readFile.v1.yaml"
    original = read.read_text(encoding="utf-8")
    read.write_text(original.replace("maxLength: 4096", "maxLength: 1024"), encoding="utf-8")
    failed = _toolgate("check", "--lock", str(lock), contracts=contracts)
    assert failed.returncode == 1
    assert "BREAKING    readFile v1  input /path: maximum length lowered" in failed.stdout
    assert "new version" in failed.stderr

    # The same change as a new version is fine; the old version stays as it was.
    read.write_text(original, encoding="utf-8")
    (contracts / "readFile.v2.yaml").write_text(original.replace('version: "1"', 'version: "2"')
                                                .replace("maxLength: 4096", "maxLength: 1024"), encoding="utf-8")
    passed = _toolgate("check", "--lock", str(lock), contracts=contracts)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "compatible  readFile v2  contract: new version" in passed.stdout and "out of date" in passed.stdout

    compatible = contracts / "deleteFile.v1.yaml"
    compatible.write_text(compatible.read_text(encoding="utf-8").replace("risk: high", "risk: medium"), encoding="utf-8")
    assert _toolgate("check", "--lock", str(lock), contracts=contracts).returncode == 0
    assert _toolgate("check", "--lock", str(tmp_path / "missing.json"), contracts=contracts).returncode == 2


def test_diff_reads_files_folders_locks_and_git_revisions(tmp_path):
    old = tmp_path / "old.yaml"
    shutil.copy(CONTRACTS_DIR / "readFile.v1.yaml", old)
    new = tmp_path / "new.yaml"
    new.write_text(old.read_text(encoding="utf-8").replace("required: [path]", "required: [path]\n  minProperties: 1"),
                   encoding="utf-8")
    result = _toolgate("diff", str(old), str(new), "--json")
    assert result.returncode == 1
    [change] = json.loads(result.stdout)["changes"]
    assert change["what"] == "minimum number of members added" and change["breaking"]

    same = _toolgate("diff", str(CONTRACTS_DIR), str(CONTRACTS_DIR))
    assert same.returncode == 0 and same.stdout.strip() == "0 changes, 0 breaking"

    assert load(str(PROJECT_ROOT / "contracts.lock.json"), repo=PROJECT_ROOT)
    head = _toolgate("diff", "HEAD", str(CONTRACTS_DIR), "--json")
    assert head.returncode in (0, 1) and "changes" in json.loads(head.stdout)
    unknown = _toolgate("diff", "no-such-revision-anywhere")
    assert unknown.returncode == 2 and "git" in unknown.stderr


SUBJECT_MARK = {"pointer": "/*/subject", "labels": ["untrusted_content"], "extract": ["iban"]}


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [([], [SUBJECT_MARK], "/*/subject marked (stricter)"),
     ([SUBJECT_MARK], [], "mark of /*/subject removed (looser)"),
     ([SUBJECT_MARK], [{**SUBJECT_MARK, "labels": ["untrusted_content", "private_data"]}], "labels private_data added (stricter)"),
     ([SUBJECT_MARK], [{**SUBJECT_MARK, "labels": []}], "labels untrusted_content removed (looser)"),
     ([SUBJECT_MARK], [{**SUBJECT_MARK, "extract": ["iban", "url"]}], "extract url added (stricter)"),
     ([SUBJECT_MARK], [{**SUBJECT_MARK, "extract": []}], "extract iban removed (looser)"),
     ([{"pointer": "", "labels": ["x"], "kind": "iban"}], [{"pointer": "", "labels": ["x"], "kind": "email"}],
      "kind changed from 'iban' to 'email'")],
    ids=["marked", "unmarked", "label added", "label removed", "kind extracted", "extraction removed", "kind changed"],
)
def test_provenance_mark_changes_are_compatible_and_say_stricter_or_looser(old, new, words):
    [found] = contract_changes(_contract(output_fields=old), _contract(output_fields=new))
    assert found.where == "contract" and not found.breaking and words in found.what, found


def test_a_lock_without_marks_is_no_marks():
    """A lock written before the marks existed lacks the members: not a change."""
    assert contract_changes(_contract(), _contract(output_fields=[], input_fields=[])) == []
