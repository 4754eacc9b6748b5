"""``matched_rules`` from the policy to the response and the record (DESIGN §3, §6), and the
strict normalization of what a policy says about them."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.base import NO_POLICY_DECISION, normalize
from app.models import MatchedRule, PolicyDecision
from tests.fast.test_pipeline import READ, run
from tests.support import fakes

RULE = {"id": "files.read_under_root", "effect": "allow", "message": "a readable path under a read root"}


def test_the_rules_reach_the_response_and_the_record(deps, engine) -> None:
    engine.script = lambda _: PolicyDecision(decision="allow", reasons=("ok",), matched_rules=(MatchedRule(**RULE),))
    response, _ = run(deps, READ)
    assert [rule.model_dump() for rule in response.matched_rules] == [RULE]
    [record] = fakes.records(deps)
    assert record.matched_rules == (RULE,)


def test_a_decision_without_rules_has_an_empty_list(deps) -> None:
    response, _ = run(deps, READ)
    assert response.matched_rules == [] and next(iter(fakes.records(deps))).matched_rules == ()


@pytest.mark.parametrize(
    "rules",
    [
        "files.read",
        [{"id": "files.read", "effect": "maybe", "message": "m"}],
        [{"id": "Files Read", "effect": "allow", "message": "m"}],
        [{"id": "files.read", "effect": "allow"}],
        [{"id": "files.read", "effect": "allow", "message": "m", "extra": 1}],
        ["files.read"],
    ],
)
def test_malformed_matched_rules_are_no_decision(rules: Any) -> None:
    decision = normalize({"decision": "allow", "reasons": ["ok"], "matched_rules": rules})
    assert decision.decision == "deny" and decision.reasons == (NO_POLICY_DECISION,)


def test_well_formed_rules_are_kept() -> None:
    decision = normalize({"decision": "allow", "reasons": ["ok"], "matched_rules": [RULE]})
    assert decision.decision == "allow" and decision.matched_rules == (MatchedRule(**RULE),)
