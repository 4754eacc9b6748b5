"""The value keys of provenance: every vector of tests/data/value_keys.json holds for the
gateway's normalizers (app.provenance.normalize) and, unless marked Python only, for
``toolgate.lib.value_key`` evaluated by the pinned ``opa`` (the engines' evaluator)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from app.policy.toolchain import opa_binary
from app.provenance.normalize import key
from tests.conftest import PROJECT_ROOT

VECTORS = json.loads((PROJECT_ROOT / "tests" / "data" / "value_keys.json").read_text(encoding="utf-8"))["vectors"]


def _sides(vector: list) -> list[str]:
    return vector[3] if len(vector) > 3 else ["python", "rego"]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: f"{v[0]}:{v[1]!r}")
def test_python_keys(vector):
    kind, value, expected = vector[:3]
    assert key(kind, value) == expected


def test_rego_keys_agree_with_the_vectors(tmp_path: Path):
    opa = opa_binary()
    assert opa is not None, "the pinned opa is installed by scripts/install.sh"
    cases = [{"kind": v[0], "value": v[1]} for v in VECTORS]
    (tmp_path / "input.json").write_text(json.dumps(cases))
    query = "[[i, k] | some i, v in input; k := data.toolgate.lib.value_key(v.kind, v.value)]"
    done = subprocess.run(
        [str(opa), "eval", "-f", "json", "-d", str(PROJECT_ROOT / "policies"), "-i", str(tmp_path / "input.json"), query],
        capture_output=True, text=True, timeout=120, check=True,
    )
    found = dict(json.loads(done.stdout)["result"][0]["expressions"][0]["value"])
    wrong = [(v, found.get(i)) for i, v in enumerate(VECTORS) if "rego" in _sides(v) and found.get(i) != v[2]]
    assert wrong == []


def test_lookalikes_never_share_a_key():
    assert key("domain", "pаypal.com") != key("domain", "paypal.com")
    assert key("iban", "DЕ89370400440532013000") is None
    assert key("email", "аlice@example.com") is None
