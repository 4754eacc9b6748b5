"""Tool contracts (app.contracts): patterns on RE2, refused where they would backtrack."""

from __future__ import annotations

from typing import Any

import pytest

from app.contracts.contract import ContractLoadError, ContractMetadata
from app.contracts.json_schema import contract_from_schema
from app.errors import ValidationFailed

META = ContractMetadata(name="probe", version="1", mutating=False, risk="low")


def schema(**string: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"s": {"type": "string", **string}}, "required": ["s"]}


def test_a_catastrophic_backtracking_pattern_is_matched_in_linear_time() -> None:
    """``^(a+)+$`` on Python's ``re`` takes exponential time on ``a...ab``; on RE2 this 50 000
    character input is one pass (the suite's timeout would catch a backtracking engine)."""
    contract = contract_from_schema(META, schema(pattern="^(a+)+$"), None, "test")
    with pytest.raises(ValidationFailed) as info:
        contract.validate_input({"s": "a" * 50_000 + "b"})
    assert info.value.details["problems"][0]["path"] == "/s"
    assert contract.validate_input({"s": "aaaa"}) == {"s": "aaaa"}


@pytest.mark.parametrize("pattern", ["^(?=a)a$", "^(a)\\1$", "(?<!x)y"])
def test_a_pattern_re2_cannot_run_is_refused_at_load(pattern: str) -> None:
    with pytest.raises(ContractLoadError, match="linear-time engine"):
        contract_from_schema(META, schema(pattern=pattern), None, "contracts/probe.v1.yaml")


def test_pattern_properties_are_refused_at_load() -> None:
    spec = {"type": "object", "patternProperties": {"^x-": {"type": "string"}}}
    with pytest.raises(ContractLoadError, match="patternProperties"):
        contract_from_schema(META, spec, None, "test")


def test_dollar_does_not_match_before_a_final_newline() -> None:
    """Python's ``$`` accepts ``"DE89\\n"`` for ``^[A-Z0-9]+$``; RE2's does not."""
    contract = contract_from_schema(META, schema(pattern="^[A-Z0-9]+$"), None, "test")
    with pytest.raises(ValidationFailed):
        contract.validate_input({"s": "DE89\n"})
    with pytest.raises(ValidationFailed):
        contract.validate_input({"s": "DE\u0668\u0669"})  # Arabic-Indic digits are not \\d either


@pytest.mark.parametrize("keyword", [{"multipleOf": 0.01}, {"x-decimal-places": 2}])
def test_money_is_checked_in_decimal(keyword: dict[str, Any]) -> None:
    spec = {"type": "object", "properties": {"amount": {"type": "number", **keyword}}}
    contract = contract_from_schema(META, spec, None, "test")
    for ok in (19.99, 0.07, 1000, 1e3, 123456789.01):
        assert contract.validate_input({"amount": ok}) == {"amount": ok}
    for bad in (19.999, 0.001, 1e-7):
        with pytest.raises(ValidationFailed):
            contract.validate_input({"amount": bad})


def test_the_shipped_money_type_publishes_no_float_multiple() -> None:
    from app.contracts.registry import ContractRegistry
    from tests.support.fakes import PROJECT_ROOT

    payment = ContractRegistry.load(PROJECT_ROOT / "contracts").get("processPayment", "1")
    assert payment is not None
    amount = payment.input_schema["properties"]["amount"]
    assert "multipleOf" not in amount and amount["x-decimal-places"] == 2
    assert payment.validate_input({"amount": 19.99, "currency": "EUR", "recipient": "acct_42"})["amount"] == 19.99


def test_an_upstream_schema_runs_on_the_linear_time_engine_too() -> None:
    """An MCP upstream's inputSchema is untrusted: its patterns run on RE2, and one RE2 cannot
    run makes the schema unusable (nothing is forwarded unchecked)."""
    from app.contracts.upstream_schema import usable_schema, validate_upstream_input

    with pytest.raises(ValidationFailed):
        validate_upstream_input(schema(pattern="^(a+)+$"), {"s": "a" * 50_000 + "b"})
    assert not usable_schema(schema(pattern="^(?=x)x$"))
    with pytest.raises(ValidationFailed) as info:
        validate_upstream_input(schema(pattern="^(?=x)x$"), {"s": "x"})
    assert "not usable" in info.value.message
