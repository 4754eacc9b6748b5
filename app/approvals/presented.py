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
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from app.approvals.grants import GrantClaims
from app.fingerprint import canonical_json
from app.models import InputChange

#: Stable reasons of a refused presented approval (the decide response's ``reasons``).
GRANT_INVALID = "approval grant invalid"
GRANT_EXPIRED = "approval grant expired"
GRANT_USED = "approval grant already used"
GRANT_MISSING = "approval grant missing"
#: The deny reason of a retried call whose approval expired unanswered.
APPROVAL_EXPIRED = "approval expired unanswered"
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
class Granted(ABC):
    """An approval that lets this call through once the policy agrees: a verified one-time grant
    (``VerifiedApproval``) or a standing scoped grant (``StandingApproval``)."""

    approval_id: str
    approver: str

    @abstractmethod
    def policy_input(self) -> dict[str, Any]:
        """``input.approval`` of the policy input (DESIGN §3)."""


@dataclass(frozen=True)
class VerifiedApproval(Granted):
    """A grant that passed every check except the final one-time use (``consume``).
    ``attempt`` is the hashed idempotency key of the call that presented it (or None).
    ``approved_input`` is the input as the approver narrowed it (None: as requested), and
    ``changes`` what changed against the requested input."""

    claims: GrantClaims
    attempt: str | None = None
    approved_input: dict[str, Any] | None = None
    changes: tuple[InputChange, ...] = ()

    @classmethod
    def of(cls, claims: GrantClaims, **more: Any) -> VerifiedApproval:
        return cls(approval_id=claims.approval_id, approver=claims.approver, claims=claims, **more)

    def policy_input(self) -> dict[str, Any]:
        return {
            "approval_id": self.claims.approval_id,
            "approved": True,
            "approver": {"id": self.claims.approver, "roles": list(self.claims.approver_roles)},
            "approvers": list(self.claims.approvers or (self.claims.approver,)),
        }


@dataclass(frozen=True)
class StandingApproval(Granted):
    """A scoped grant that covers this call (same requester and tool, within its constraints,
    its conversation and its time), already counted as used."""

    grant_id: str
    approver_roles: tuple[str, ...]
    approvers: tuple[str, ...]

    def policy_input(self) -> dict[str, Any]:
        return {
            "approval_id": self.approval_id,
            "approved": True,
            "approver": {"id": self.approver, "roles": list(self.approver_roles)},
            "approvers": list(self.approvers),
            "grant_id": self.grant_id,
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
