"""What a decision receipt says (docs/design.md §11): the claims of its JWS payload.

    {"decision_id": ULID, "time": RFC 3339 UTC (microseconds), "iat": Unix seconds,
     "tenant", "subject", "tool", "version",
     "input_fingerprint": 64 hex | null      (app.fingerprint, as in the decision record),
     "shown_input_fingerprint": 64 hex | null (app.fingerprint of the response's ``input``:
                                              the input with its sensitive members redacted),
     "decision": "allow" | "deny" | "user-approval",
     "reasons": [str]                         (the response's ``reasons``),
     "matched_rules": [{"id", "effect", "message"}]   (only when the policy reports them),
     "policy_revision",
     "grant_id": the approval id of the grant this call used | null}

Every member but ``matched_rules`` is always present (``shown_input_fingerprint`` and
``reasons`` in receipts signed since they were added; older ones bind neither). The same facts
are in the decision record ``decision_id`` names, so a receipt can also be checked against the
log, and a decide response against its receipt (``toolgate receipt verify``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.vocabulary import DECISION_ID_PATTERN, DecisionWord

#: The JWS ``typ`` header of a receipt (RFC 8725 §3.11 explicit typing: a receipt is never
#: taken for another kind of token).
RECEIPT_TYPE = "toolgate-receipt+jwt"


class ReceiptClaims(BaseModel):
    """The payload of one receipt (see the module docstring). Strict: a payload with members
    of another shape, or unknown members, is not a toolgate receipt."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    decision_id: str = Field(pattern=DECISION_ID_PATTERN)
    time: str
    iat: int = Field(ge=0)
    tenant: str
    subject: str
    tool: str
    version: str
    input_fingerprint: str | None = Field(pattern=r"^[0-9a-f]{64}$")
    shown_input_fingerprint: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    decision: DecisionWord
    reasons: list[str] | None = None
    matched_rules: list[dict[str, Any]] | None = None
    policy_revision: str
    grant_id: str | None

    def payload(self) -> dict[str, Any]:
        """The JWS payload: every member, ``matched_rules`` only when set."""
        return self.model_dump(mode="json", exclude={"matched_rules"} if self.matched_rules is None else set())
