"""``GET /v1/decisions`` and ``GET /v1/decisions/<decision_id>``: the decision log for auditors
(DESIGN §6).

Access: a valid bearer token (401 otherwise) holding one of ``audit_auditor_roles`` (default
``auditor``: own tenant only) or ``audit_platform_auditor_roles`` (default
``platform_auditor``: every tenant); anyone else gets 403 FORBIDDEN. Another tenant's record is
404 NOT_FOUND, as if it did not exist.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

from flask import Blueprint, current_app, jsonify, request
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from app.audit import (
    CURSOR_PATTERN,
    DECISIONS,
    EVENT_TYPES,
    MAX_PAGE,
    DecisionQuery,
    hash_idempotency_key,
)
from app.bodies import release_validation_error
from app.errors import Forbidden, NotFound, ValidationFailed
from app.models import Subject
from app.web.requests import log_fields, request_id

bp = Blueprint("decisions", __name__)

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:[Zz]|([+-])(\d{2}):(\d{2}))$"
)
_ULID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")
#: Query text: no control characters (a store cannot match them, PostgreSQL refuses NUL).
TEXT_PATTERN = r"^[^\x00-\x1f\x7f]+$"


def _rfc3339(value: str) -> dt.datetime:
    """An RFC 3339 date-time (offset required; fractions beyond microseconds are cut; a leap
    second counts as :59) -> aware UTC datetime. Raises ``ValueError``."""
    m = _RFC3339.match(value)
    if not m:
        raise ValueError("must be an RFC 3339 date-time with an offset, e.g. 2025-01-31T12:00:00Z")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    micro = int((m[7] or ".0")[1:7].ljust(6, "0"))
    offset = dt.timedelta(hours=int(m[9] or 0), minutes=int(m[10] or 0)) * (-1 if m[8] == "-" else 1)
    try:
        local = dt.datetime(year, month, day, hour, minute, min(second, 59), micro, tzinfo=dt.timezone(offset))
        return local.astimezone(dt.timezone.utc)
    except OverflowError:
        raise ValueError("date-time out of range") from None


Text = Annotated[str, Field(min_length=1, max_length=256, pattern=TEXT_PATTERN)]
Time = Annotated[str, AfterValidator(_rfc3339)]


class DecisionsParams(BaseModel):
    """Query parameters of ``GET /v1/decisions``; unknown parameters are rejected."""

    model_config = ConfigDict(extra="forbid")

    tenant: Text | None = None
    subject: Text | None = None
    tool: Text | None = None
    decision: Literal[DECISIONS] | None = None  # type: ignore[valid-type]
    event: Literal[EVENT_TYPES] | None = None  # type: ignore[valid-type]
    error_code: Text | None = None
    request_id: Text | None = None
    approval_id: Text | None = None
    idempotency_key: Annotated[str, Field(min_length=1, max_length=255, pattern=TEXT_PATTERN)] | None = None
    since: Time | None = None
    until: Time | None = None
    limit: int = Field(100, ge=1, le=MAX_PAGE)
    cursor: Annotated[str, Field(pattern=CURSOR_PATTERN)] | None = None


def _auditor(deps: Any) -> tuple[Subject, bool]:
    """The verified caller and whether it may see every tenant. Raises ``Unauthenticated``
    (401) or ``Forbidden`` (403, no auditor role)."""
    subject = deps.verifier.verify(request.headers.getlist("Authorization"))
    settings = deps.settings
    platform = bool(set(subject.roles) & set(settings.audit_platform_auditor_roles))
    if not platform and not set(subject.roles) & set(settings.audit_auditor_roles):
        raise Forbidden("an auditor role is required to read the decision log")
    return subject, platform


def _params() -> DecisionsParams:
    repeated = sorted(k for k in request.args if len(request.args.getlist(k)) > 1)
    if repeated:
        raise ValidationFailed(
            "query parameters may appear once", details={"problems": [{"path": k, "message": "repeated"} for k in repeated]}
        )
    try:
        return DecisionsParams.model_validate(request.args.to_dict())
    except ValidationError as exc:
        problems = [
            {"path": ".".join(str(p) for p in err["loc"]) or "query", "message": err["msg"]}
            for err in exc.errors(include_input=False, include_url=False)
        ]
        release_validation_error(exc)
        raise ValidationFailed("query parameters are not valid", details={"problems": problems[:20]}) from None


@bp.get("/v1/decisions")
def list_decisions():
    """Decision records, newest first: ``{"records": [record...], "next_cursor": str|null,
    "request_id"}``.

    Query (all optional, each at most once): ``tenant`` (platform auditors; an auditor may
    only name its own), ``subject``, ``tool``, ``decision`` (allow|deny|user-approval),
    ``event`` (decide|approval_answer|execution_complete|execution_fail|idempotency_resolve),
    ``error_code``, ``request_id``, ``approval_id``, ``idempotency_key`` (the raw key; matched
    by its keyed hash), ``since`` (inclusive) and ``until`` (exclusive) as RFC 3339,
    ``limit`` 1-1000 (default 100), ``cursor`` (``next_cursor`` of the previous page).
    A record is ``AuditRecord.to_dict()``: see README "Audit". Errors: 400 VALIDATION_ERROR
    (bad parameter or cursor), 401, 403 FORBIDDEN (no auditor role, or another tenant named),
    503 DEPENDENCY_UNAVAILABLE (store down).
    """
    deps = current_app.extensions["toolgate"]
    subject, platform = _auditor(deps)
    params = _params()
    if not platform and params.tenant not in (None, subject.tenant):
        raise Forbidden("auditors may read only their own tenant's decisions")
    key_hash = (
        hash_idempotency_key(deps.settings.audit_key_hash_secret.get_secret_value(), params.idempotency_key)
        if params.idempotency_key is not None
        else None
    )
    query = DecisionQuery(
        tenant=params.tenant if platform else subject.tenant,
        subject_id=params.subject,
        tool=params.tool,
        decision=params.decision,
        event=params.event,
        error_code=params.error_code,
        request_id=params.request_id,
        approval_id=params.approval_id,
        idempotency_key_hash=key_hash,
        since=params.since,
        until=params.until,
    )
    page = deps.decision_reader.query(query, limit=params.limit, cursor=params.cursor)
    log_fields(auditor=subject.id, tenant=subject.tenant, records=len(page.records))
    return jsonify(
        {"records": [r.to_dict() for r in page.records], "next_cursor": page.next_cursor, "request_id": request_id()}
    )


@bp.get("/v1/decisions/<decision_id>")
def get_decision(decision_id: str):
    """One record: ``{"record": record, "request_id"}``. 404 NOT_FOUND for an unknown id or
    another tenant's record (unless the caller is a platform auditor); 401, 403 FORBIDDEN
    (no auditor role), 503 DEPENDENCY_UNAVAILABLE as for the list."""
    deps = current_app.extensions["toolgate"]
    subject, platform = _auditor(deps)
    record = None
    if _ULID.match(decision_id):
        record = deps.decision_reader.get(decision_id, tenant=None if platform else subject.tenant)
    if record is None:
        raise NotFound("no such decision")
    log_fields(auditor=subject.id, tenant=subject.tenant, decision_id=decision_id)
    return jsonify({"record": record.to_dict(), "request_id": request_id()})
