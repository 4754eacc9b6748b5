"""``app.engine.native``: the embedded engine's JSON crossing by orjson answers exactly what the
bindings' own ``eval_document`` answers, with the real engine and the shipped policies, and
takes or refuses the values orjson does not handle as the bindings do (``app.engine.wire``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from opa_bindings import OpaEngine, OpaError, OpaUndefinedError

from app.engine.native import JsonEngine, encode_input
from app.policy.bundle import load_bundle
from tests.unit.test_policies_scoping import INPUTS

POLICY_DIR = Path(__file__).resolve().parents[2] / "policies"


@pytest.fixture(scope="module")
def engines() -> Iterator[tuple[OpaEngine, JsonEngine]]:
    plain, native = OpaEngine(), JsonEngine()
    for engine in (plain, native):
        load_bundle(engine, POLICY_DIR, include_tests=False)
    yield plain, native
    plain.close()
    native.close()


def test_every_decision_case_is_answered_alike(engines: tuple[OpaEngine, JsonEngine]) -> None:
    plain, native = engines
    differ = [
        case for case, doc in INPUTS
        if native.eval_json("toolgate.decision", encode_input(doc)) != plain.eval_document("toolgate.decision", doc)
    ]
    assert len(INPUTS) > 80
    assert differ == []


def test_an_integer_beyond_64_bits_is_encoded_and_read_back_as_an_integer(engines: tuple[OpaEngine, JsonEngine]) -> None:
    plain, native = engines
    doc = {"call": {"input": {"amount": 10**30}}}
    assert encode_input(doc) == json.dumps(doc).encode()
    query = "toolgate.lib.args"
    assert native.eval_json(query, encode_input(doc)) == plain.eval_document(query, doc) == {"amount": 10**30}


def test_a_lone_surrogate_is_refused_like_the_bindings_do() -> None:
    with pytest.raises(OpaError) as ours:
        encode_input({"path": "/a\ud800"})
    with OpaEngine() as plain, pytest.raises(OpaError) as theirs:
        plain.eval_document("x", {"path": "/a\ud800"})
    assert ours.value.code == theirs.value.code == "invalid_argument"


def test_undefined_and_closed_are_the_bindings_errors(engines: tuple[OpaEngine, JsonEngine]) -> None:
    _, native = engines
    with pytest.raises(OpaUndefinedError):
        native.eval_json("toolgate.no_such_document", b"{}")
    closed = JsonEngine()
    closed.close()
    with pytest.raises(OpaError) as error:
        closed.eval_json("toolgate.decision", b"{}")
    assert error.value.code == "closed"


@pytest.mark.parametrize("raw", [b'{"a": NaN}', b'{"a": "\\ud800"}', b'[12345678901234567890123]', b'{"a": [1.5, "x"]}'])
def test_wire_reads_what_json_reads(raw: bytes) -> None:
    from app.engine import wire

    got, want = wire.loads(raw), json.loads(raw)
    assert json.dumps(got) == json.dumps(want)
    assert type(got) is type(want)
