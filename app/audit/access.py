"""Who may read the decision log (DESIGN §6): auditors their own tenant, platform auditors
every tenant."""

from __future__ import annotations

from dataclasses import dataclass

from app.errors import Forbidden
from app.models import Subject
from app.settings import AuditSettings


@dataclass(frozen=True)
class AuditorScope:
    """What one auditor may read: ``tenant``, or every tenant when ``platform`` is true."""

    tenant: str
    platform: bool

    def tenant_for(self, requested: str | None) -> str | None:
        """The tenant filter of a query that names ``requested`` (None: any): a platform
        auditor's own choice (None: every tenant); an auditor's own tenant. Raises
        ``Forbidden`` (403) when an auditor names another tenant."""
        if self.platform:
            return requested
        if requested not in (None, self.tenant):
            raise Forbidden("auditors may read only their own tenant's decisions")
        return self.tenant


def auditor_scope(subject: Subject, settings: AuditSettings) -> AuditorScope:
    """The scope of ``subject``: platform-wide with one of ``audit_platform_auditor_roles`` in
    a token of ``audit_platform_tenant`` (a platform role in any other tenant's token counts
    for nothing: tenants cannot grant themselves the platform); its own tenant with one of
    ``audit_auditor_roles``. Raises ``Forbidden`` (403) otherwise."""
    roles = set(subject.roles)
    platform_tenant = settings.audit_platform_tenant
    platform = subject.tenant == platform_tenant and bool(roles & set(settings.audit_platform_auditor_roles))
    if not platform and not roles & set(settings.audit_auditor_roles):
        raise Forbidden("an auditor role is required to read the decision log")
    return AuditorScope(subject.tenant, platform)
