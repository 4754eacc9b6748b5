"""``toolgate.lib`` never raises: every helper, given arguments of every JSON type (and
hostile strings), is true, false/undefined or a value, never an evaluation error.

The gateway evaluates with strict builtin errors, where a raised error becomes a 503 for the
caller; a helper that raised on an odd but contract-valid input would turn a decision into an
outage. Evaluated with the real embedded engine, whose evaluation is strict as well.
"""

from __future__ import annotations

import itertools
import re

import pytest
from opa_bindings import OpaEngine, OpaError

from app.policy.bundle import load_bundle
from tests.conftest import POLICY_DIR

VALUES = [
    None, True, 0, -1.5, 10**30, "", "x", "%zz", "a\u0000b", "\u017f\u0421\uff12", "http://[::1", "-----BEGIN",
    "0" * 80, [], ["/srv", 1], {}, {"rule": 1}, {"name": "x", "version": "1", "namespace": ""},
]

# name -> arity of every public function of toolgate.lib
FUNCTIONS = {
    "call_of": 1, "call_of_version": 2, "call_in_namespace": 2, "call_among": 1, "covers": 3,
    "well_formed_declaration": 1, "normalized_declaration": 2,
    "arg": 2, "string_arg": 2, "number_arg": 2, "array_arg": 2, "has_arg": 1, "conversation_calls": 1,
    "path_normalize": 1, "path_segments": 1, "path_absolute": 1, "path_has_dot_dot": 1,
    "has_control_character": 1, "path_at_or_under": 2, "path_at_or_under_any_case": 2,
    "url_parts": 1, "url_host": 1, "host_in_domain": 2, "host_in_domains": 2, "host_is_ip": 1,
    "host_is_internal": 1, "registrable_domain": 1, "email_parts": 1, "email_domain": 1,
    "email_in_domains": 2, "emails_in": 1, "links_in": 1, "link_hosts": 1, "links_outside": 2,
    "secrets_in": 1, "has_secret": 1, "luhn_valid": 1, "card_numbers_in": 1, "iban_compact": 1,
    "iban_valid": 1, "ibans_in": 1, "pii_in": 1,
    "decimals_of": 1, "amount_has_decimals": 2, "minor_units": 2, "positive_amount": 1, "valid_amount": 2,
    "amount_over": 2, "amount_within": 2, "amounts_total": 1,
    "tenant_limit": 2, "tenant_feature": 1, "tenant_custom_data": 2, "tenant_strings": 1, "tenant_allows_host": 1,
    "identifier_key": 1, "known_counterparty": 2, "counterparty_lookalike": 2, "known_contact": 1,
    "ascii_printable": 1, "skeleton": 1, "has_confusable": 1, "lookalike": 2, "scripts_of": 1,
    "mixed_script": 1, "safe_identifier": 1,
    "session_calls_in_session": 2, "session_calls": 3, "session_denied": 3, "session_amount": 4,
    "session_counterparties": 2, "session_labelled": 1, "trusted_counterparty": 1, "read_before": 1,
    "approved_before": 1, "count_limit": 4, "budget_limit": 5,
    "value_key": 2, "from_untrusted": 1, "only_from": 2, "user_supplied": 1, "from_trusted_output": 1, "untraced_label": 1,
}

INPUT = {
    "subject": {"id": "u", "tenant": "bank-demo", "roles": ["account_holder"]},
    "tool": {"name": "send_money", "version": "1", "namespace": "", "registered": True, "mutating": True, "risk": "high"},
    "call": {"id": "c", "input": {"recipient": "GB29NWBK60161331926819", "amount": 1}},
    "history": {"tools": {"send_money": 1}},
    "session": {
        "windows": {"1m": 60, "24h": 86400},
        "conversation": {"calls": {"24h": {"send_money": 1}}, "labels": ["private_data"], "trusted_counterparties": ["x"],
                         "resources": {"read": ["/srv"], "written": []}, "approved_tools": [], "counterparties": {"24h": ["x"]},
                         "amounts": {"24h": {"send_money": {"/amount": 1}}}},
        "subject": {"calls": {"24h": {"send_money": 2}}},
    },
    "provenance": {
        "arguments": {"/recipient": {"kind": "iban", "sources": [{"tool": "t", "pointer": "/0", "label": "untrusted_content",
                                                                 "decision_id": "d"}], "in_prompt": True, "in_trusted_output": False}},
        "extracted": {"/subject": [{"kind": "url", "index": 0, "sources": [], "in_prompt": False, "in_trusted_output": False}]},
        "untraced_labels": ["private_data"],
    },
}


@pytest.fixture(scope="module")
def engine():
    e = OpaEngine()
    load_bundle(e, POLICY_DIR, include_tests=False)
    yield e
    e.close()


def test_every_public_function_is_listed(engine):
    text = "".join(p.read_text(encoding="utf-8") for p in sorted((POLICY_DIR / "toolgate" / "lib").glob("*.rego"))
                   if not p.name.endswith("_test.rego"))
    defined = {m[1] for m in re.finditer(r"^([a-z][a-z0-9_]*)\(", text, re.MULTILINE)}
    assert defined == set(FUNCTIONS)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_function_never_raises(name, engine):
    """Every combination of VALUES as arguments (all the same value for 3 arguments), passed
    through the input so that the compiler's type checker cannot refuse them beforehand."""
    arity = FUNCTIONS[name]
    combos = list(itertools.product(VALUES, repeat=arity)) if arity < 3 else [[v] * 3 for v in VALUES]
    args = ", ".join(f"case[{i}]" for i in range(arity))
    query = f"results := [[case, r] | some case in input.cases; r := data.toolgate.lib.{name}({args})]"
    try:
        rows = engine.eval_query(query, {**INPUT, "cases": [list(c) for c in combos]})
    except OpaError as exc:  # the message names the call and the builtin that raised
        pytest.fail(f"{name} raised: {exc.message[:300]}")
    assert len(rows) == 1
    assert all(len(pair) == 2 for pair in rows[0]["results"])
