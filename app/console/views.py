"""The console's pages (``/console``): sign-in, the approver inbox and grants, the auditor
search, record detail, charts and exports. Every page needs a console session (else a redirect
to the sign-in); every POST needs the session's CSRF token (else 403 and nothing changes);
every response carries a strict Content-Security-Policy and is never cached."""

from __future__ import annotations

import datetime as dt
import io
import json
import secrets
import time
from collections.abc import Callable, Iterator
from functools import wraps
from typing import Any, TypeVar
from urllib.parse import urlencode

from flask import Blueprint, Response, abort, current_app, g, redirect, render_template, request, stream_with_context, url_for
from markupsafe import Markup
from pydantic import ValidationError
from werkzeug.wrappers import Response as BaseResponse

from app.approvals.records import Approval, Credential, secret_digest
from app.audit.access import AuditorScope, auditor_scope
from app.audit.chain import verify_chains
from app.audit.checkpoints import CheckpointLogInvalid, configured_checkpoints
from app.audit.export import write_csv, write_jsonl
from app.audit.queries import DecisionQuery
from app.audit.stores import checkpoint_key
from app.console import charts
from app.console.in_force import in_force
from app.console.oidc import LoginState, OidcClient, SignInFailed
from app.console.sessions import COOKIE, LOGIN_COOKIE, ConsoleSession, SessionStore, csrf_ok
from app.contracts.redaction import REDACTED
from app.decide import answers
from app.decide.deps import Deps
from app.errors import Forbidden, NotFound, ToolgateError, ValidationFailed
from app.models import ApprovalAnswerBody, GrantScopeBody, Subject
from app.timefmt import parse_rfc3339, rfc3339_ms, utc_now
from app.vocabulary import SHADOW_OUTCOMES
from app.web.context import current_deps, request_facts
from app.web.decisions import DecisionsParams, decision_query
from app.web.requests import log_fields

bp = Blueprint("console", __name__, url_prefix="/console", template_folder="templates", static_folder="static")

R = TypeVar("R")

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
_FILTERS = ("tenant", "subject", "tool", "decision", "event", "error_code", "request_id", "approval_id", "idempotency_key", "shadow",
            "since", "until")


# --- plumbing ------------------------------------------------------------------------------


def _sessions() -> SessionStore:
    store = current_app.extensions.get("toolgate_console_sessions")
    if store is None:
        deps = current_deps()
        store = SessionStore(deps.redis, deps.settings.console_session_ttl_s)
        current_app.extensions["toolgate_console_sessions"] = store
    return store


def _oidc() -> OidcClient | None:
    settings = current_deps().settings
    if not settings.console_oidc_issuer:
        return None
    client = current_app.extensions.get("toolgate_console_oidc")
    if client is None:
        client = OidcClient(settings)
        current_app.extensions["toolgate_console_oidc"] = client
    return client


def _dev_sign_in() -> bool:
    settings = current_deps().settings
    return settings.console_dev_sign_in and settings.env == "development"


def _session() -> ConsoleSession | None:
    return g.get("console_session")


def signed_in(view: Callable[..., R]) -> Callable[..., R | BaseResponse]:
    """Call ``view(session, ...)`` for a signed-in person; else redirect to the sign-in. A POST
    also needs the session's CSRF token (403 without it)."""

    @wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> R | BaseResponse:
        session = _sessions().get(request.cookies.get(COOKIE))
        if session is None:
            return redirect(url_for("console.sign_in"))
        g.console_session = session
        log_fields(tenant=session.subject.tenant, subject=session.subject.id, console=True)
        if request.method == "POST" and not csrf_ok(session, request.form.get("csrf")):
            raise Forbidden("the form's CSRF token is missing or wrong")
        return view(session, *args, **kwargs)

    return wrapped


@bp.after_app_request
def _headers(response: Response) -> BaseResponse:
    """Every response under ``/console``, its errors and 404s included (a URL no view matches
    never reaches the blueprint's own hooks)."""
    if request.path != bp.url_prefix and not request.path.startswith(f"{bp.url_prefix}/"):
        return response
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.errorhandler(ToolgateError)
def _error(error: ToolgateError) -> tuple[str, int]:
    log_fields(error_code=error.code)
    if error.log_detail:
        log_fields(error_detail=error.log_detail[:500])
    details = error.details.get("problems", []) if isinstance(error.details, dict) else []
    return render_template("console/error.html", error=error, problems=details, session=_session()), error.http_status


def _cookie(response: BaseResponse, name: str, value: str, max_age: int) -> None:
    response.set_cookie(name, value, max_age=max_age, path="/console", httponly=True, samesite="Lax",
                        secure=current_deps().settings.console_secure_cookies)


def _start(subject: Subject, via: str) -> BaseResponse:
    session_id, _ = _sessions().create(subject, via)
    response = redirect(url_for("console.inbox"))
    _cookie(response, COOKIE, session_id, current_deps().settings.console_session_ttl_s)
    response.delete_cookie(LOGIN_COOKIE, path="/console")
    return response


# --- sign-in -------------------------------------------------------------------------------


@bp.get("/")
def index() -> BaseResponse:
    return redirect(url_for("console.inbox"))


@bp.get("/sign-in")
def sign_in() -> BaseResponse:
    """The sign-in page: the identity provider's button, and the development form when on. A
    login token in a short-lived cookie guards the development form against login CSRF."""
    token = secrets.token_urlsafe(24)
    page = render_template("console/sign_in.html", oidc=_oidc() is not None, dev=_dev_sign_in(), login_token=token, session=None)
    response = Response(page)
    _cookie(response, LOGIN_COOKIE, token, 600)
    return response


@bp.post("/sign-in/dev")
def sign_in_dev() -> BaseResponse:
    """Development sign-in (``TOOLGATE_CONSOLE_DEV_SIGN_IN``, never in production): a subject,
    tenant and roles typed in."""
    if not _dev_sign_in():
        abort(404)
    expected = request.cookies.get(LOGIN_COOKIE, "")
    if not expected or not secrets.compare_digest(expected, request.form.get("login_token", "")):
        raise Forbidden("the sign-in form expired; reload it")
    roles = tuple(r for r in request.form.get("roles", "").replace(",", " ").split() if r)
    try:
        subject = Subject(id=request.form.get("subject", "").strip(), tenant=request.form.get("tenant", "").strip(), roles=roles)
    except ValidationError:
        raise ValidationFailed("subject, tenant and roles are needed") from None
    if not subject.id or not subject.tenant or len(subject.id) > 256 or len(subject.tenant) > 256:
        raise ValidationFailed("subject and tenant are needed")
    return _start(subject, "development")


@bp.get("/oidc/login")
def oidc_login() -> BaseResponse:
    client = _oidc()
    if client is None:
        abort(404)
    url, login = client.login()
    response = redirect(url)
    _cookie(response, LOGIN_COOKIE, login.encode(), 600)
    return response


@bp.get("/oidc/callback")
def oidc_callback() -> BaseResponse | tuple[str, int]:
    client = _oidc()
    if client is None:
        abort(404)
    try:
        subject = client.callback(LoginState.decode(request.cookies.get(LOGIN_COOKIE)), request.args.to_dict())
    except SignInFailed as exc:
        log_fields(sign_in_refused=str(exc)[:200])
        return render_template("console/error.html", error=Forbidden("sign-in refused"), problems=[], session=None), 403
    return _start(subject, "oidc")


@bp.post("/sign-out")
@signed_in
def sign_out(session: ConsoleSession) -> BaseResponse:
    _sessions().delete(request.cookies.get(COOKIE))
    response = redirect(url_for("console.sign_in"))
    response.delete_cookie(COOKIE, path="/console")
    return response


# --- approver inbox ------------------------------------------------------------------------


def _countdown(expires_ms: int, now_ms: int) -> str:
    left = max(0, (expires_ms - now_ms) // 1000)
    return f"{left // 3600}h {left % 3600 // 60}m" if left >= 3600 else f"{left // 60}m {left % 60}s"


def _fields(approval: Approval) -> list[dict[str, Any]]:
    """The top-level input members as form fields: strings as text, anything else as JSON;
    redacted members read-only."""
    fields = []
    for name, value in approval.request.input.items():
        kind = "string" if isinstance(value, str) else "json"
        fields.append({"name": name, "kind": kind, "value": value if kind == "string" else json.dumps(value),
                       "redacted": value == REDACTED})
    return fields


@bp.get("/inbox")
@signed_in
def inbox(session: ConsoleSession) -> str:
    """Pending approvals of the approver's tenant, oldest first, in pages."""
    return _inbox_page(session)


def _inbox_page(session: ConsoleSession, refused: dict[str, Any] | None = None) -> str:
    """The inbox; ``refused`` (``_refusal``) is an answer just refused: its card shows why and
    keeps what the approver typed (shown above the list when the approval is no longer pending)."""
    approvals = current_deps().approvals
    now = approvals.now_ms()
    try:
        pending, next_cursor = approvals.list_pending(session.subject, limit=20, cursor=request.args.get("cursor"))
    except Forbidden:
        pending, next_cursor = [], None
        g.not_approver = True
    items: list[dict[str, Any]] = []
    for approval in pending:
        fields = _fields(approval)
        mine = refused if refused is not None and refused["approval_id"] == approval.request.approval_id else None
        if mine is not None:
            for field in fields:
                field["value"] = mine["typed"].get(field["name"], field["value"])
        items.append({"approval": approval, "view": approval.view(now), "fields": fields, "refused": mine,
                      "countdown": _countdown(approval.request.expires_at_ms, now),
                      "self": approval.request.requester == session.subject.id})
    shown = any(item["refused"] for item in items)
    return render_template("console/inbox.html", session=session, items=items, next_cursor=next_cursor,
                           not_approver=g.get("not_approver", False), message=request.args.get("done"),
                           refused=None if shown else refused)


def _refusal(approval_id: str, error: ToolgateError) -> dict[str, Any]:
    """What the inbox shows of a refused answer: the error and what the approver typed (input
    fields, pins, reason, scope), so that nothing typed is lost."""
    typed = {key.removeprefix("input."): value for key, value in request.form.items() if key.startswith("input.")}
    problems = error.details.get("problems", []) if isinstance(error.details, dict) else []
    pins = {key.removeprefix("pin.") for key in request.form if key.startswith("pin.")}
    return {"approval_id": approval_id, "error": error, "problems": problems, "typed": typed, "pins": pins,
            "reason": request.form.get("reason", ""), "scope": request.form.get("scope", "once"),
            "scope_minutes": request.form.get("scope_minutes", "15")}


def _edited_input(approval: Approval) -> dict[str, Any] | None:
    """The input as edited in the form (None when unchanged). Raises ``ValidationFailed`` (422)
    for a value that is not JSON where JSON is expected."""
    edited: dict[str, Any] = {}
    for field in _fields(approval):
        name = field["name"]
        raw = request.form.get(f"input.{name}")
        if raw is None:  # removed from the form: removed from the input
            continue
        if field["kind"] == "string":
            edited[name] = raw
        else:
            try:
                edited[name] = json.loads(raw)
            except ValueError:
                raise ValidationFailed("an edited value is not valid JSON", http_status=422,
                                       details={"problems": [{"path": f"/{name}", "message": "not valid JSON"}]}) from None
    return None if edited == approval.request.input else edited


def _scope(approval: Approval) -> GrantScopeBody | None:
    kind = request.form.get("scope", "once")
    if kind == "once":
        return None
    try:
        minutes = int(request.form.get("scope_minutes", "0"))
        pins = {f"/{f['name']}": {"eq": json.loads(f["value"]) if f["kind"] == "json" else f["value"]}
                for f in _fields(approval) if request.form.get(f"pin.{f['name']}") and not f["redacted"]}
        return GrantScopeBody.model_validate({"kind": kind, "ttl_s": minutes * 60, "constraints": pins})
    except (ValueError, ValidationError):
        raise ValidationFailed("the grant scope is not valid", http_status=422) from None


def _answer_body(approval: Approval, approved: bool, reason: str) -> ApprovalAnswerBody:
    """The answer of the form. Raises ``ValidationFailed`` (422) for an input or scope that is
    not valid."""
    try:
        return ApprovalAnswerBody(approved=approved, reason=reason, input=_edited_input(approval) if approved else None,
                                  scope=_scope(approval) if approved else None)
    except ValidationError:
        raise ValidationFailed("the answer is not valid", http_status=422) from None


@bp.post("/approvals/<approval_id>")
@signed_in
def answer(session: ConsoleSession, approval_id: str) -> BaseResponse | tuple[str, int]:
    """Approve (possibly narrowing the input, choosing a scope) or deny, with a reason. A refused
    answer (an edit the contract refuses, an approval already answered or expired) renders the
    inbox again with the reason and the approver's edit, with the refusal's status."""
    deps = current_deps()
    approved = request.form.get("decision") == "approve"
    try:
        approval = deps.approvals.find(session.subject, approval_id)
        reason = request.form.get("reason", "")[:500]
        try:
            body = _answer_body(approval, approved, reason)
        except ValidationFailed as invalid:
            answers.refuse(deps, request_facts(), session.subject, approval_id, ApprovalAnswerBody(approved=approved, reason=reason),
                           approval, invalid)
        credential = Credential("console", secret_digest(request.cookies.get(COOKIE, "")))
        answered, _ = answers.answer(deps, request_facts(), session.subject, credential, approval_id, body)
    except ToolgateError as error:
        if error.http_status >= 500 or error.code == NotFound.code:
            raise
        log_fields(error_code=error.code)
        return _inbox_page(session, _refusal(approval_id, error)), error.http_status
    state = answered.state_at(deps.approvals.now_ms())
    return redirect(url_for("console.inbox", done=f"{approval_id}: {state}"))


@bp.get("/grants")
@signed_in
def grants(session: ConsoleSession) -> str:
    """Standing scoped grants of the tenant, with their constraints, uses and a revoke button."""
    found = current_deps().approvals.scoped_grants(session.subject)
    return render_template("console/grants.html", session=session, grants=[g.view() for g in found])


@bp.post("/grants/<grant_id>/revoke")
@signed_in
def revoke(session: ConsoleSession, grant_id: str) -> BaseResponse:
    answers.revoke(current_deps(), request_facts(), session.subject, grant_id)
    return redirect(url_for("console.grants"))


# --- auditor views -------------------------------------------------------------------------


def _query(deps: Deps, scope: AuditorScope) -> tuple[DecisionsParams, DecisionQuery]:
    """The API's filters (``GET /v1/decisions``) from the page's query string; empty fields ignored."""
    args = {k: v for k, v in request.args.items() if v.strip() and k in (*_FILTERS, "cursor", "limit")}
    try:
        params = DecisionsParams.model_validate(args)
    except ValidationError as exc:
        problems = [{"path": ".".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in exc.errors(include_input=False)]
        raise ValidationFailed("the search filters are not valid", details={"problems": problems[:20]}) from None
    return params, decision_query(params, scope, deps)


def _filter_args() -> dict[str, str]:
    return {k: v for k, v in request.args.items() if k in _FILTERS and v.strip()}


@bp.get("/audit")
@signed_in
def audit(session: ConsoleSession) -> str:
    """Decision search (the API's filters, cursor pages), per-tenant chain status and charts."""
    deps = current_deps()
    scope = auditor_scope(session.subject, deps.settings)
    params, query = _query(deps, scope)
    page = deps.decision_reader.query(query, limit=min(params.limit, 50), cursor=params.cursor)
    tenants = [query.tenant] if query.tenant else deps.decision_reader.tenants()
    started = time.monotonic()
    chains, checked_against = _chain_status(deps, tenants, every_tenant=not query.tenant)
    until = query.until or utc_now()
    since = query.since or until - dt.timedelta(hours=24)
    window = DecisionQuery(**{**query.__dict__, "since": since, "until": until})
    drawn = charts.build(deps.decision_reader.iter_records(window), since=since, until=until)
    filters = _filter_args()
    return render_template(
        "console/audit.html", session=session, records=page.records, next_cursor=page.next_cursor, filters=filters,
        chains=chains, checked_against=checked_against, verified_in_ms=round((time.monotonic() - started) * 1000),
        charts=drawn,
        chart_w=charts.CHART_W, chart_h=charts.CHART_H, outcomes=charts.OUTCOMES, since=rfc3339(since), until=rfc3339(until),
        query_string=urlencode(filters), platform=scope.platform, shadow_outcomes=SHADOW_OUTCOMES,
    )


def _chain_status(deps: Deps, tenants: list[str], *, every_tenant: bool) -> tuple[list[dict[str, Any]], str]:
    """The chains of ``tenants`` (the first 20; with ``every_tenant`` also the tenants of the
    signed registry, so a deleted tenant shows) verified as ``toolgate audit verify`` does:
    against the signed checkpoints of the configured sinks when there is a checkpoint key
    (truncation, rewinds, re-hashing, unregistered and deleted tenants show), else as hash
    chains alone; and what they were checked against, in words."""
    reader = deps.decision_reader
    untrusted = None
    try:
        signed = configured_checkpoints(deps.settings, reader.log_id(), deps.redis)
        if signed is not None and signed.other_logs:
            untrusted = "the checkpoints are of another decision log"
    except CheckpointLogInvalid:
        untrusted = "the checkpoint log does not verify"
    if untrusted is not None:
        return [{"tenant": t, "ok": False, "records": 0, "broken": untrusted, "seq": 0} for t in tenants[:20]], "signed checkpoints"
    if every_tenant and signed is not None:
        tenants = sorted(set(tenants) | signed.registered)
    chains = []
    for tenant in tenants[:20]:
        report = verify_chains(reader, checkpoint_key(deps.settings), tenants=[tenant], signed=signed)
        chains.append({"tenant": tenant, "ok": report.ok, "records": report.records,
                       "broken": report.broken.reason if report.broken else None,
                       "seq": report.broken.seq if report.broken else None})
    if signed is None:
        return chains, "the hash chains only (no checkpoint key)"
    return chains, f"{signed.statements} signed checkpoint statement(s)"


def rfc3339(value: dt.datetime) -> str:
    return rfc3339_ms(int(value.timestamp() * 1000))


@bp.app_template_filter("utc_time")
def utc_time(value: dt.datetime | str | None) -> Markup:
    """``<span class="when"><time class="utc" datetime="2026-12-02T00:11:51.123Z">2026-12-02
    00:11:51 UTC</time></span>`` for an aware datetime or an RFC 3339 string ('-' for None or an
    unreadable string); console.js adds the viewer's local time in the span."""
    if value is None:
        return Markup("-")
    try:
        when = (parse_rfc3339(value) if isinstance(value, str) else value).astimezone(dt.UTC)
    except ValueError:
        return Markup("-")
    return Markup('<span class="when"><time class="utc" datetime="{}">{} UTC</time></span>').format(
        rfc3339(when), when.strftime("%Y-%m-%d %H:%M:%S"))


def _input_rows(value: Any, pointer: str = "") -> list[tuple[str, str, bool]]:
    """A (redacted) input as table rows ``(JSON Pointer, value, redacted)``: nested objects
    flattened, strings as they are, anything else (numbers, lists, null) as JSON."""
    if isinstance(value, dict) and value:
        return [row for key, member in value.items()
                for row in _input_rows(member, f"{pointer}/{str(key).replace('~', '~0').replace('/', '~1')}")]
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return [(pointer or "/", shown, value == REDACTED)]


@bp.get("/audit/records/<decision_id>")
@signed_in
def record(session: ConsoleSession, decision_id: str) -> str:
    """One record laid out: the decision and its reasons, the matched rules, the redacted input
    as a table, the shadow decision, the approval and its grant, what a receipt binds, the chain
    position (seq, previous and own hash) and the records of its approval; the raw JSON behind
    a toggle."""
    deps = current_deps()
    scope = auditor_scope(session.subject, deps.settings)
    found = deps.decision_reader.get(decision_id, tenant=scope.tenant_for(None)) if len(decision_id) == 26 else None
    if found is None:
        raise NotFound("no such decision")
    related = []
    if found.approval_id:
        related = deps.decision_reader.query(DecisionQuery(tenant=found.tenant, approval_id=found.approval_id), limit=50).records
    return render_template("console/record.html", session=session, record=found, related=related,
                           input_rows=_input_rows(found.input) if found.input is not None else [],
                           pretty=json.dumps(found.to_dict(), indent=2, ensure_ascii=False))


@bp.get("/tools")
@signed_in
def tools(session: ConsoleSession) -> str:
    """The tools in force (contract, versions, risk, mutating, governing family, approver
    roles), the roles and what each grants, and the policy revision in force (read-only)."""
    return render_template("console/tools.html", session=session, in_force=in_force(current_deps()))


@bp.get("/audit/export.<fmt>")
@signed_in
def export(session: ConsoleSession, fmt: str) -> BaseResponse:
    """The records of the current filter as CSV or JSONL (streamed, newest first)."""
    if fmt not in ("csv", "jsonl"):
        abort(404)
    deps = current_deps()
    _, query = _query(deps, auditor_scope(session.subject, deps.settings))
    writer = write_csv if fmt == "csv" else write_jsonl

    def chunks() -> Iterator[str]:
        batch: list[Any] = []
        for item in deps.decision_reader.iter_records(query):
            batch.append(item)
            if len(batch) == 500:
                yield _written(writer, batch)
                batch = []
        yield _written(writer, batch)

    if fmt == "csv":  # one header row: written in one go
        out = io.StringIO()
        write_csv(deps.decision_reader.iter_records(query), out)
        body = out.getvalue()
        response = Response(body, mimetype="text/csv")
    else:
        response = Response(stream_with_context(chunks()), mimetype="application/x-ndjson")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    response.headers["Content-Disposition"] = f'attachment; filename="decisions-{stamp}.{fmt}"'
    return response


def _written(writer: Callable[..., int], records: list[Any]) -> str:
    out = io.StringIO()
    writer(records, out)
    return out.getvalue()


# --- approval insights (auditors and policy authors) ----------------------------------------


@bp.get("/insights")
@signed_in
def insights_page(session: ConsoleSession) -> str:
    """Approval analytics per rule and tool (``app.policy.insights``) over the range of the
    page's filters (tenant for platform auditors, tool, since, until; default the last 7 days)."""
    from app.policy.insights import escalations, insights

    deps = current_deps()
    scope = auditor_scope(session.subject, deps.settings)
    _, query = _query(deps, scope)
    until = query.until or utc_now()
    since = query.since or until - dt.timedelta(days=7)
    window = DecisionQuery(tenant=query.tenant, tool=query.tool, since=since, until=until)
    fields = {c.qualified_name: c.meta.counterparty_fields for c in deps.contracts.all()}
    rows = insights(escalations(deps.decision_reader.iter_records(window), ttl_s=deps.settings.approval_default_ttl_s), fields)
    return render_template("console/insights.html", session=session, rows=rows, filters=_filter_args(),
                           since=rfc3339(since), until=rfc3339(until), platform=scope.platform)
