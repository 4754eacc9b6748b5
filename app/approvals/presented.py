"""The checks of an approval presented on a decide call (DESIGN §5), and their outcomes.

A grant is used by one *attempt*: a retry of that attempt with the same idempotency key may
present it again, so the idempotency layer can answer it (409 in flight, or the replay); any
other call gets "approval grant already used". A presented approval that fails any check
raises ``ApprovalRejected`` carrying a stable public reason; the decide pipeline turns it into
a deny.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from app.approvals.grants import GrantClaims
from app.fingerprint import canonical_json

#: Stable reasons of a refused presented approval (the decide response's ``reasons``).
GRANT_INVALID = "approval grant invalid"
GRANT_EXPIRED = "approval grant expired"
GRANT_USED = "approval grant already used"
GRANT_MISSING = "approval grant missing"
#: The deny reason when a call needs approval but its input has no canonical form to bind.
UNBINDABLE_INPUT = "this input cannot be bound to an approval"
#: The reason of a denied approval whose approver gave none.
DENIED_WITHOUT_REASON = "the approver rejected this call"


class ApprovalRejected(Exception):
    """A presented approval is refused. ``reason`` is the stable public text (one of the
    ``GRANT_*`` constants, or the approver's reason of a denial); ``kind`` is a metric label
    (invalid, expired, used, missing, denied); ``detail`` is for the log only."""

    def __init__(self, reason: str, kind: str, detail: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True)
class VerifiedApproval:
    """A grant that passed every check except the final one-time use (``consume``).
    ``attempt`` is the hashed idempotency key of the call that presented it (or None)."""

    claims: GrantClaims
    attempt: str | None = None

    def policy_input(self) -> dict[str, Any]:
        """``input.approval`` of the policy input (DESIGN §3)."""
        return {
            "approval_id": self.claims.approval_id,
            "approved": True,
            "approver": {"id": self.claims.approver, "roles": list(self.claims.approver_roles)},
        }


def attempt_hash(idempotency_key: str | None) -> str | None:
    """The stored form of the idempotency key of the call that uses a grant (SHA-256 hex)."""
    return hashlib.sha256(idempotency_key.encode("utf-8")).hexdigest() if idempotency_key else None


def same_binding(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Constant-time equality of two bindings via their canonical JSON."""
    return hmac.compare_digest(canonical_json(a), canonical_json(b))


def differing(a: dict[str, Any], b: dict[str, Any]) -> str:
    """The members in which two bindings differ, comma-separated (for the log)."""
    return ", ".join(sorted(k for k in a if a.get(k) != b.get(k)))
