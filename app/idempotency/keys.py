"""Idempotency keys and where their records live (DESIGN §4).

A record is scoped by (tenant, subject, key) and bound to the fingerprint of the first call that
used the key, so a key one subject chose can never block or reveal another subject's call. The
Redis hash tag is the SHA-256 of the RFC 8785 JSON ``[tenant, subject, key]``; the caller's key
(which may hold ``*``, ``{``, ``:``, spaces...) never appears in a key name, so it cannot address
another record.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from app.contracts.contract import ToolContract
from app.errors import ValidationFailed
from app.fingerprint import canonical_json
from app.vocabulary import IDEMPOTENCY_KEY_PATTERN

_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)
_KEY_PROBLEM = {"path": "/headers/Idempotency-Key", "message": "not 1-255 printable ASCII without a comma"}


def validate_key(key: str) -> str:
    """Return ``key`` if it is 1-255 printable ASCII characters (0x20-0x7E) other than a comma.

    Raises ``ValidationFailed`` (400). Never touches Redis.
    """
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ValidationFailed(
            "idempotency key must be 1-255 printable ASCII characters without a comma",
            http_status=400,
            details={"problems": [_KEY_PROBLEM]},
        )
    return key


def call_key(header_key: str | None, contract: ToolContract | None, normalized_input: dict[str, Any]) -> str | None:
    """The idempotency key of a decide call: the ``Idempotency-Key`` header, else the input
    field the contract names (``idempotency_key_field``, e.g. createTicket's
    ``clientMutationId``), else None.

    Raises ``ValidationFailed`` (400) for a malformed key, and when a registered mutating
    tool has none.
    """
    if header_key is not None:
        return validate_key(header_key)
    key_field = contract.meta.idempotency_key_field if contract else None
    if key_field and normalized_input.get(key_field) is not None:
        return validate_key(normalized_input[key_field])
    if contract is not None and contract.meta.mutating:
        raise ValidationFailed(
            "this tool changes things: send an Idempotency-Key header",
            http_status=400,
            details={"problems": [{"path": "/headers/Idempotency-Key", "message": "required for a mutating tool"}]},
        )
    return None


@dataclass(frozen=True)
class Scope:
    """Where one record lives: the verified tenant and subject, and the caller's (validated) key."""

    tenant: str
    subject: str
    key: str

    @cached_property
    def tag(self) -> str:
        """Hex SHA-256 of the RFC 8785 JSON ``[tenant, subject, key]``: the Redis Cluster hash tag."""
        return hashlib.sha256(canonical_json([self.tenant, self.subject, self.key])).hexdigest()

    @cached_property
    def redis_keys(self) -> tuple[str, str]:
        """``(record key, lease key)``, both in the slot of ``{tag}``."""
        prefix = f"toolgate:idem:{{{self.tag}}}"
        return f"{prefix}:record", f"{prefix}:lease"
