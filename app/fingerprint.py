"""The input fingerprint (DESIGN §4): one definition shared by idempotency, approvals and the
decision log, so that a fingerprint in a decision record matches the one in Redis and in a grant.

    fingerprint = SHA-256( RFC 8785 canonical JSON of
                           {"tenant", "subject", "tool", "version", "input"} )   (lower-case hex)

RFC 8785 canonical JSON sorts keys and fixes number and string forms, so the same payload sent
with another key order or other whitespace has the same fingerprint.
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

from app.errors import ValidationFailed


def canonical_json(value: Any) -> bytes:
    """RFC 8785 canonical JSON of ``value`` (UTF-8 bytes).

    Raises ``rfc8785.CanonicalizationError`` (a ``ValueError``) for values I-JSON cannot carry:
    integers beyond +-(2**53 - 1), lone surrogates in strings, non-finite floats.
    """
    return rfc8785.dumps(value)


def fingerprint(tenant: str, subject_id: str, tool: str, version: str, normalized_input: dict[str, Any]) -> str:
    """SHA-256 (64 lower-case hex digits) of the canonical ``{tenant, subject, tool, version,
    input}`` document.

    Raises ``ValidationFailed`` (422) when the input cannot be canonicalized (see
    ``canonical_json``): such input can neither be fingerprinted nor signed in a grant.
    """
    payload = {
        "tenant": tenant,
        "subject": subject_id,
        "tool": tool,
        "version": version,
        "input": normalized_input,
    }
    try:
        data = canonical_json(payload)
    except (rfc8785.CanonicalizationError, UnicodeError):
        raise ValidationFailed(
            "input cannot be canonicalized (RFC 8785)",
            http_status=422,
            details={"problems": [{"path": "/input", "message": "integers must be within +-(2^53-1) and strings valid Unicode"}]},
        ) from None
    return hashlib.sha256(data).hexdigest()
