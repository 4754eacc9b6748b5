"""The provenance marks of a contract (``output_fields``, ``input_fields``), as the contract
loader validates them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.contracts.contract import ContractLoadError, ContractMetadata
from app.contracts.registry import ContractRegistry, read_contract_file
from app.session.events import Outcome
from tests.conftest import CONTRACTS_DIR

BASE = {"name": "t", "version": "1", "mutating": False, "risk": "low", "output_labels": ["private_data"],
        "input_schema": {"type": "object", "properties": {"to": {"type": "string"}}, "additionalProperties": False}}


def _load(tmp_path: Path, **marks) -> object:
    path = tmp_path / "t.v1.yaml"
    path.write_text(yaml.safe_dump({**BASE, **marks}))
    return read_contract_file(path)


def test_marks_are_read_with_kinds_labels_and_extraction(tmp_path):
    contract = _load(tmp_path, output_fields=[{"pointer": "", "labels": ["untrusted_content"], "extract": ["url", "iban"]},
                                              {"pointer": "/*/to", "kind": "iban"}],
                     input_fields=[{"pointer": "/to", "kind": "iban"}])
    whole, to = contract.meta.output_fields
    assert whole.extract == ("url", "iban") and to.labels == () and to.kind == "iban"
    assert contract.meta.field_labels() == {"private_data", "untrusted_content"}
    assert contract.meta.input_fields[0].kind == "iban"


@pytest.mark.parametrize(
    ("marks", "words"),
    [({"output_fields": [{"pointer": "/a", "kind": "ssn"}]}, "kind"),
     ({"output_fields": [{"pointer": "/a", "kind": "iban", "extract": ["url"]}]}, "not both"),
     ({"output_fields": [{"pointer": "/a", "labels": ["Bad Label"]}]}, "labels"),
     ({"output_fields": [{"pointer": "a"}]}, "pointer"),
     ({"output_fields": [{"pointer": "/a"}, {"pointer": "/a", "kind": "url"}]}, "marked twice"),
     ({"output_labels": [], "output_fields": [{"pointer": "/a"}]}, "no labels"),
     ({"input_fields": [{"pointer": "/to"}]}, "either kind"),
     ({"input_fields": [{"pointer": "", "kind": "url"}]}, "pointer"),
     ({"input_fields": [{"pointer": "/to", "kind": "url", "color": "red"}]}, "color")],
    ids=["unknown kind", "kind and extract", "bad label", "not a pointer", "twice", "unlabelled",
         "input mark says nothing", "input root", "unknown member"],
)
def test_invalid_marks_are_refused_naming_the_problem(tmp_path, marks, words):
    with pytest.raises(ContractLoadError, match=r"t\.v1\.yaml") as caught:
        _load(tmp_path, **marks)
    assert words in str(caught.value)


def test_the_banking_contracts_mark_the_transaction_subject_untrusted_and_its_parties_private():
    registry = ContractRegistry.load(CONTRACTS_DIR)
    marks = {m.pointer: m for m in registry.get("get_most_recent_transactions", "1").meta.output_fields}
    assert marks["/*/subject"].labels == ("untrusted_content",) and {"iban", "url"} <= set(marks["/*/subject"].extract)
    assert marks["/*/recipient"].labels == ("private_data",) and marks["/*/recipient"].kind == "iban"
    scheduled = {m.pointer: m for m in registry.get("get_scheduled_transactions", "1").meta.output_fields}
    assert "untrusted_content" not in scheduled["/*/recipient"].labels
    [content] = registry.get("read_file", "1").meta.output_fields
    assert content.pointer == "" and content.labels == ("untrusted_content",) and content.extract
    send = {m.pointer: m for m in registry.get("send_money", "1").meta.input_fields}
    assert send["/recipient"].kind == "iban" and send["/amount"].kind == "amount" and send["/subject"].extract


def test_a_counterparty_is_as_trusted_as_the_field_it_came_from():
    """A trusted result's counterparties are trusted, but not one under a field marked
    untrusted or free text (issue 25: a recipient from a free-text field of a trusted tool)."""
    meta = ContractMetadata(
        name="orders", version="1", mutating=False, risk="low", output_labels=("private_data",),
        output_counterparty_fields=("/*/recipient", "/*/note/iban", "/*/forwarded/to"),
        output_fields=({"pointer": "/*/note", "extract": ["iban"]},
                       {"pointer": "/*/forwarded", "labels": ["untrusted_content"]}),
    )
    result = [{"recipient": "GB29NWBK60161331926819", "note": {"iban": "US133000000121212121212"},
               "forwarded": {"to": "FR7630006000011234567890189"}}]
    assert Outcome.of_result(meta, result).trusted_counterparties == ("GB29NWBK60161331926819",)
