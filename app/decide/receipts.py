"""The receipt of a decide call (docs/design.md §11): the claims come from the same frozen stage
and decision its decision record is built from (``app.decide.events.decide_event``), so a
receipt and the record its ``decision_id`` names agree."""

from __future__ import annotations

import time
from typing import Any

from app.approvals.presented import Granted
from app.decide.stages import Prepared, Presented
from app.fingerprint import fingerprint
from app.models import PolicyDecision
from app.receipts.claims import ReceiptClaims
from app.timefmt import format_us, utc_now


def matched_rules(decision: PolicyDecision) -> list[dict[str, Any]] | None:
    """The rules the policy reports as matched (``matched_rules: [{id, effect, message}]``)
    as JSON objects; None when the decision names none."""
    if not decision.matched_rules:
        return None
    return [rule.model_dump(mode="json") for rule in decision.matched_rules]


def receipt_claims(
    stage: Prepared, decision: PolicyDecision, presented: Presented, policy_revision: str
) -> ReceiptClaims:
    """What the receipt of ``stage``'s call says about ``decision`` (signed now); ``presented``
    is the approval that let it through, a grant presented with the call or a standing scoped
    grant found after the policy (the record's ``approval_id``)."""
    now = utc_now()
    grant = presented.approval_id if isinstance(presented, Granted) else None
    return ReceiptClaims(
        decision_id=stage.call.decision_id,
        time=format_us(now),
        iat=int(time.time()),
        tenant=stage.subject.tenant,
        subject=stage.subject.id,
        tool=stage.tool.qualified,
        version=stage.tool.version,
        input_fingerprint=stage.fingerprint,
        shown_input_fingerprint=_shown_fingerprint(stage),
        decision=decision.decision,
        reasons=list(decision.reasons),
        matched_rules=matched_rules(decision),
        policy_revision=policy_revision,
        grant_id=grant,
    )


def _shown_fingerprint(stage: Prepared) -> str | None:
    """The fingerprint of the input the response shows (sensitive members redacted): the call's
    own when nothing was redacted; None when the input has none."""
    if stage.fingerprint is None or not stage.sensitive_paths:
        return stage.fingerprint
    tool = stage.tool
    return fingerprint(stage.subject.tenant, stage.subject.id, tool.qualified, tool.version, stage.display_input)
