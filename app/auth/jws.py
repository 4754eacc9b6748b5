"""The JWS compact serialization, taken apart before any key is touched (RFC 7515 §3.1, §7.1).

``COMPACT_JWS`` matches exactly three non-empty base64url segments without padding, so the
detached / unencoded-payload form (RFC 7797) never passes. ``parse_json_object`` is strict JSON:
UTF-8, an object, no duplicate member names (RFC 7515 §4), no NaN/Infinity.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


def b64url_decode(segment: str) -> bytes:
    """Decode one unpadded base64url segment (RFC 7515 §2). Raises ``binascii.Error``."""
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for name, value in pairs:
        if name in obj:  # RFC 7515 §4: reject duplicate Header Parameter names
            raise ValueError(f"duplicate member {name!r}")
        obj[name] = value
    return obj


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def parse_json_object(data: bytes, what: str) -> dict[str, Any]:
    """Strict UTF-8 JSON object: no duplicate names, no NaN/Infinity. Raises ``ValueError``."""
    value = json.loads(
        data.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_reject_constant
    )
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not a JSON object")
    return value
