"""The members of a decision's ``approval`` object beyond reason, roles and TTL
(app.engine.base): read strictly; anything malformed is the fail-closed deny."""

from __future__ import annotations

import pytest

from app.engine.base import NO_POLICY_DECISION, normalize
from app.models import EscalationRule


def approval(**members):
    return {"decision": "user-approval", "reasons": ["r"], "approval": {"reason": "r", **members}}


def test_every_member_is_read():
    decision = normalize(approval(quorum=2, allow_self_approval=True, escalation={"after_s": 60, "roles": ["lead"]},
                                  grant_scopes=["duration", "once"], max_grant_ttl_s=3600))
    assert decision.decision == "user-approval"
    assert decision.approval_quorum == 2 and decision.approval_self_approval is True
    assert decision.approval_escalation == EscalationRule(after_s=60, roles=("lead",))
    assert decision.approval_grant_scopes == ("once", "duration") and decision.approval_max_grant_ttl_s == 3600


def test_defaults_when_absent():
    decision = normalize(approval())
    assert decision.approval_quorum is None and decision.approval_self_approval is False
    assert decision.approval_escalation is None and decision.approval_grant_scopes is None


@pytest.mark.parametrize("members", [
    {"quorum": 0}, {"quorum": 11}, {"quorum": 1.0}, {"quorum": True}, {"allow_self_approval": 1},
    {"allow_self_approval": "true"}, {"escalation": []}, {"escalation": {"after_s": 60}},
    {"escalation": {"after_s": 60, "roles": []}}, {"escalation": {"after_s": 0, "roles": ["x"]}},
    {"escalation": {"after_s": 60, "roles": ["x"], "extra": 1}}, {"grant_scopes": []}, {"grant_scopes": ["always"]},
    {"grant_scopes": "once"}, {"max_grant_ttl_s": -1}, {"ttl_s": 0}, {"whatever": 1},
])
def test_a_malformed_member_is_the_fail_closed_deny(members):
    decision = normalize(approval(**members))
    assert decision.decision == "deny" and decision.reasons == (NO_POLICY_DECISION,) and decision.normalized_from_invalid
