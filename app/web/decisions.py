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
from typing import Annotated

from flask import Blueprint, Response, jsonify
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator

from app.audit.access import AuditorScope, auditor_scope
from app.audit.queries import CURSOR_PATTERN, MAX_PAGE, DecisionQuery
from app.decide.deps import Deps
from app.errors import NotFound
from app.models import DecisionListResponse, DecisionRecord, DecisionRecordResponse, Subject
from app.timefmt import parse_rfc3339
from app.vocabulary import DECISION_ID_PATTERN, DecisionWord, EventType, ShadowOutcomeWord
from app.web.auth import require_subject
from app.web.context import current_deps
from app.web.query import ascii_digits, parse_query
from app.web.requests import log_fields, request_id

bp = Blueprint("decisions", __name__)

_DECISION_ID = re.compile(DECISION_ID_PATTERN)
#: Query text: no control characters (a store cannot match them, PostgreSQL refuses NUL).
TEXT_PATTERN = r"^[^\x00-\x1f\x7f]+$"


Text = Annotated[str, Field(min_length=1, max_length=256, pattern=TEXT_PATTERN)]
def _time(value: object) -> dt.datetime:
    if not isinstance(value, str):
        raise ValueError("must be an RFC 3339 date-time string")
    return parse_rfc3339(value)


Time = Annotated[dt.datetime, PlainValidator(_time)]


class DecisionsParams(BaseModel):
    """Query parameters of ``GET /v1/decisions``; unknown parameters are rejected."""

    model_config = ConfigDict(extra="forbid")

    tenant: Text | None = None
    subject: Text | None = None
    tool: Text | None = None
    decision: DecisionWord | None = None
    event: EventType | None = None
    error_code: Text | None = None
    request_id: Text | None = None
    approval_id: Text | None = None
    idempotency_key: Annotated[str, Field(min_length=1, max_length=255, pattern=TEXT_PATTERN)] | None = None
    shadow: ShadowOutcomeWord | None = None
    since: Time | None = None
    until: Time | None = None
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE), BeforeValidator(ascii_digits)] = 100
    cursor: Annotated[str, Field(pattern=CURSOR_PATTERN)] | None = None


def decision_query(params: DecisionsParams, scope: AuditorScope, deps: Deps) -> DecisionQuery:
    """The store query of ``params`` (the API's and the console's search) within ``scope``: the
    raw ``idempotency_key`` becomes its keyed hash. Raises ``Forbidden`` for a tenant outside
    ``scope``."""
    return DecisionQuery(
        tenant=scope.tenant_for(params.tenant),
        subject_id=params.subject,
        tool=params.tool,
        decision=params.decision,
        event=params.event,
        error_code=params.error_code,
        request_id=params.request_id,
        approval_id=params.approval_id,
        idempotency_key_hash=deps.recorder.key_hash(params.idempotency_key) if params.idempotency_key is not None else None,
        shadow_outcome=params.shadow,
        since=params.since,
        until=params.until,
    )


@bp.get("/v1/decisions")
@require_subject
def list_decisions(subject: Subject) -> Response:
    """Decision records, newest first: ``DecisionListResponse`` ``{"records": [record...],
    "next_cursor": str|null, "request_id"}``.

    Query (all optional, each at most once): ``tenant`` (platform auditors; an auditor may
    only name its own), ``subject``, ``tool``, ``decision`` (allow|deny|user-approval),
    ``event`` (decide|decide_dry_run|approval_answer|execution_complete|execution_fail|
    idempotency_resolve), ``error_code``, ``request_id``, ``approval_id``, ``idempotency_key``
    (the raw key; matched by its keyed hash), ``shadow`` (agrees|disagrees|error: decide records
    whose shadow policy agreed with the active one, disagreed, or gave no decision), ``since``
    (inclusive) and ``until`` (exclusive) as
    RFC 3339, ``limit`` 1-1000 (default 100), ``cursor`` (``next_cursor`` of the previous page).
    Errors: 400 VALIDATION_ERROR (bad parameter or cursor), 401, 403 FORBIDDEN (no auditor
    role, or another tenant named), 503 DEPENDENCY_UNAVAILABLE (store down).
    """
    deps = current_deps()
    scope = auditor_scope(subject, deps.settings)
    params = parse_query(DecisionsParams)
    query = decision_query(params, scope, deps)
    page = deps.decision_reader.query(query, limit=params.limit, cursor=params.cursor)
    log_fields(auditor=subject.id, records=len(page.records))
    body = DecisionListResponse(
        records=[DecisionRecord.model_validate(r.to_dict()) for r in page.records],
        next_cursor=page.next_cursor,
        request_id=request_id(),
    )
    return jsonify(body.model_dump(mode="json"))


@bp.get("/v1/decisions/<decision_id>")
@require_subject
def get_decision(subject: Subject, decision_id: str) -> Response:
    """One record: ``DecisionRecordResponse`` ``{"record": record, "request_id"}``. 404
    NOT_FOUND for an unknown id or another tenant's record (unless the caller is a platform
    auditor); 401, 403 FORBIDDEN (no auditor role), 503 DEPENDENCY_UNAVAILABLE as for the list."""
    deps = current_deps()
    scope = auditor_scope(subject, deps.settings)
    record = deps.decision_reader.get(decision_id, tenant=scope.tenant_for(None)) if _DECISION_ID.match(decision_id) else None
    if record is None:
        raise NotFound("no such decision")
    log_fields(auditor=subject.id, decision_id=decision_id)
    body = DecisionRecordResponse(record=DecisionRecord.model_validate(record.to_dict()), request_id=request_id())
    return jsonify(body.model_dump(mode="json"))
