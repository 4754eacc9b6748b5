"""An operator's tenant data: read it, or push it (stored in the overlay directory, read by the
engines with the policy directory, recorded as a ``tenant_data_put`` decision record).

Who: a subject with one of ``policy_operator_roles``, for its own tenant; for any tenant when
its token is one of ``audit_platform_tenant`` (the operator's own tenant, as for platform
auditors). Anyone else: ``Forbidden``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.audit.records import AuditEvent, AuditRecord
from app.decide.deps import Deps
from app.decide.events import RequestFacts
from app.errors import Conflict, DependencyUnavailable, Forbidden, NotFound, ToolgateError, ValidationFailed
from app.models import RateLimitSpec, Subject
from app.policy.bundle import PolicyLoadError, read_directory
from app.policy.tenant_data import (
    CUSTOM_SHAPES_DOCUMENT,
    DATA_FILE,
    TENANT_PATTERN,
    StoredData,
    TenantDataInvalid,
    TenantDataStore,
    canonical_bytes,
    custom_shapes,
    digest,
    is_tenant_with_data,
    validate,
)
from app.session.keys import SubjectKeys
from app.settings import Settings, parse_rate

#: The id of the per-tenant rate limit of pushes (``TOOLGATE_TENANT_DATA_PUSH_RATE``).
PUSH_RATE_ID = "tenant_data.push"


@dataclass(frozen=True)
class PushedData:
    """A stored push: the tenant, the stored data's ``version`` (``sha256:...``), the one it
    replaced (None: the tenant had no pushed data), and the policy revision that holds it."""

    tenant: str
    version: str
    previous_version: str | None
    policy_revision: str
    decision_id: str = ""


def authorize(settings: Settings, subject: Subject, tenant: str) -> None:
    """Raise ``Forbidden`` unless ``subject`` may read and push ``tenant``'s data, and
    ``ValidationFailed`` (400) when ``tenant`` cannot have data (``TENANT_PATTERN``)."""
    if not set(subject.roles) & set(settings.policy_operator_roles):
        raise Forbidden("an operator role is required for tenant data")
    platform = settings.audit_platform_tenant is not None and subject.tenant == settings.audit_platform_tenant
    if subject.tenant != tenant and not platform:
        raise Forbidden("operators may manage only their own tenant's data")
    if not is_tenant_with_data(tenant):
        raise ValidationFailed(f"a tenant with data has an id matching {TENANT_PATTERN}")


def read(settings: Settings, tenant: str) -> StoredData:
    """``tenant``'s data: the pushed one, else the policy directory's
    ``tenants/<tenant>/data.json``. Raises ``NotFound`` when there is neither,
    ``DependencyUnavailable`` when a file cannot be read."""
    try:
        if settings.tenant_data_dir is not None:
            pushed = TenantDataStore(settings.tenant_data_dir).read(tenant)
            if pushed is not None:
                return StoredData(pushed, "pushed")
        beside = Path(settings.policy_dir) / "tenants" / tenant / DATA_FILE
        if beside.is_file():
            return StoredData(beside.read_bytes(), "policy_dir")
    except OSError:
        raise DependencyUnavailable("tenant data cannot be read") from None
    raise NotFound("this tenant has no data")


def _current_version(settings: Settings, tenant: str) -> str | None:
    """The version ``read`` answers for ``tenant``, None when it has no data."""
    try:
        return read(settings, tenant).version
    except NotFound:
        return None


def _pushable(settings: Settings) -> Path:
    """The overlay directory, or ``Conflict`` when pushed data would not reach the policy."""
    if settings.tenant_data_dir is None:
        raise Conflict("tenant data pushes are off (TOOLGATE_TENANT_DATA_DIR is unset)")
    if settings.engine == "embedded" and settings.policy_bundle is not None:
        raise Conflict("the policy comes from a bundle built elsewhere: put tenant data into that bundle")
    if settings.engine == "embedded" and settings.policy_poll_interval_s <= 0:
        raise Conflict("tenant data pushes need TOOLGATE_POLICY_POLL_INTERVAL_S > 0 (workers reload by polling)")
    return Path(settings.tenant_data_dir)


def _declared_custom_shapes(deps: Deps, document: Any) -> dict[str, Any] | None:
    """The custom members' shapes the active policy declares, when ``document`` has custom
    members (None otherwise: nothing to check). Raises ``DependencyUnavailable`` when the engine
    cannot be asked (the push is refused rather than stored unchecked)."""
    if not isinstance(document, dict) or not document.get("custom"):
        return None
    result = deps.engine.evaluate_document(CUSTOM_SHAPES_DOCUMENT.replace(".", "/"), {})
    return custom_shapes(result.value if result.defined else None)


def push(
    deps: Deps, request: RequestFacts, subject: Subject, tenant: str, document: Any, *, if_match: str | None = None
) -> PushedData:
    """Validate ``document`` (a parsed JSON value) and store it as ``tenant``'s data, replacing
    what was pushed before; recorded whatever the outcome (refusals included) in ``tenant``'s
    chain. The answering worker reloads at once, the others at their next poll. ``if_match``:
    the version (``read(...).version``) the push replaces; another current version refuses it.

    Raises ``Forbidden``, ``RateLimited`` (429: the tenant's pushes are over
    ``TOOLGATE_TENANT_DATA_PUSH_RATE``), ``ValidationFailed`` (422 with ``details.problems`` for data outside
    the schema, or custom members the active policy does not declare in that shape),
    ``Conflict`` (409: pushes are off or would not reach the policy, or the data
    changed since ``if_match``), ``DependencyUnavailable`` (the data or the record cannot be
    written; nothing is kept).
    """
    settings = deps.settings
    authorize(settings, subject, tenant)
    state: dict[str, Any] = {}

    def act() -> PushedData:
        root = _pushable(settings)
        count, per_s = parse_rate(settings.tenant_data_push_rate)
        deps.sessions.admit(
            SubjectKeys(tenant, subject.id), decision_id=request.request_id, conversation=None,
            rates=[RateLimitSpec(id=PUSH_RATE_ID, scope="tenant", count=count, per_s=per_s)], limits=[], commit=True,
        )
        try:
            raw = canonical_bytes(validate(document, _declared_custom_shapes(deps, document)))
        except TenantDataInvalid as exc:
            raise ValidationFailed(
                "the document is not valid tenant data", http_status=422, details={"problems": exc.problems}
            ) from None
        store = TenantDataStore(root)
        try:
            with store.locked(tenant):
                if if_match is not None and if_match != _current_version(settings, tenant):
                    raise Conflict("the tenant data changed since the version in If-Match: read it again")
                previous = store.read(tenant)
                state["store"], state["previous"] = store, previous
                store.write(tenant, raw)
        except OSError:
            raise DependencyUnavailable("tenant data cannot be stored") from None
        try:
            revision = read_directory(settings.policy_dir, tenant_data_dir=root).revision
        except PolicyLoadError:
            store.write(tenant, previous)
            raise DependencyUnavailable("the policy directory cannot be read") from None
        return PushedData(tenant, digest(raw), digest(previous) if previous is not None else None, revision)

    def undo(_result: PushedData) -> None:
        state["store"].write(tenant, state["previous"])

    def remember(record: AuditRecord) -> None:
        state["decision_id"] = record.decision_id

    pushed = deps.recorder.run(
        act, lambda result, error: push_event(request, subject, tenant, result, error),
        unrecorded=undo, recorded=remember,
    )
    reload = getattr(deps.engine, "reload", None)
    if callable(reload):
        reload()
    return PushedData(pushed.tenant, pushed.version, pushed.previous_version, pushed.policy_revision,
                      state.get("decision_id", ""))


def push_event(
    request: RequestFacts, subject: Subject, tenant: str, pushed: PushedData | None, error: ToolgateError | None
) -> AuditEvent:
    """The ``tenant_data_put`` record of a push into ``tenant``'s chain: who pushed (id, roles,
    and their tenant when it is another), the versions before and after, the new revision."""
    by = subject.id if subject.tenant == tenant else f"{subject.id} of tenant {subject.tenant}"
    if pushed is not None:
        before = pushed.previous_version or "no pushed data"
        reasons: tuple[str, ...] = (f"tenant data pushed by {by}: {before} -> {pushed.version}"[:500],)
    else:
        reasons = (f"tenant data push by {by} refused"[:500],)
    return AuditEvent(
        event="tenant_data_put",
        request_id=request.request_id,
        trace_id=request.trace_id,
        tenant=tenant,
        subject_id=subject.id,
        roles=subject.roles,
        reasons=reasons,
        policy_revision=pushed.policy_revision if pushed else None,
        error_code=None if pushed is not None else error.code if error is not None else "INTERNAL_ERROR",
    )
