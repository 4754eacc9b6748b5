"""Queries of the decision log: filters, pages and their cursors."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import asdict, dataclass

from app.audit.records import AuditRecord
from app.errors import ValidationFailed

#: Largest page of ``DecisionLogReader.query``.
MAX_PAGE = 1000


@dataclass(frozen=True, kw_only=True)
class DecisionQuery:
    """Filters of ``DecisionLogReader.query``/``iter_records``; None means "any".

    ``tenant`` None means every tenant (platform auditors only). ``since`` is inclusive and
    ``until`` exclusive, on the record time. All other filters are exact matches;
    ``shadow_outcome`` is one of ``SHADOW_OUTCOMES`` (agrees, disagrees, error).
    """

    tenant: str | None = None
    subject_id: str | None = None
    tool: str | None = None
    decision: str | None = None
    event: str | None = None
    error_code: str | None = None
    request_id: str | None = None
    approval_id: str | None = None
    idempotency_key_hash: str | None = None
    shadow_outcome: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None

    def equality_filters(self) -> dict[str, str]:
        """The exact-match filters that are set, keyed by column name."""
        values = asdict(self)
        return {k: v for k, v in values.items() if k not in ("since", "until") and v is not None}


@dataclass(frozen=True)
class DecisionPage:
    """One page of a query: ``records`` newest first; ``next_cursor`` None on the last page."""

    records: list[AuditRecord]
    next_cursor: str | None


#: Every valid cursor matches this (published in the OpenAPI document).
CURSOR_PATTERN = r"^d1-[0-9A-HJKMNP-TV-Z]{26}$"
_CURSOR = re.compile(CURSOR_PATTERN)


def encode_cursor(decision_id: str) -> str:
    """The pagination cursor after ``decision_id`` (opaque to callers: ``d1-`` + the id)."""
    return f"d1-{decision_id}"


def decode_cursor(cursor: str) -> str:
    """The decision id inside a cursor. Raises ``ValidationFailed`` (400) for a bad cursor."""
    if not _CURSOR.match(cursor):
        raise ValidationFailed("cursor is not valid", http_status=400)
    return cursor[3:]
