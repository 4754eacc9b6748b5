"""What the console's tools page shows: the tools and roles in force, read on every view from
what the gateway itself runs on: the contract registry, the policy's catalog
(``data.toolgate.catalog``, evaluated by the engine in force: which family governs each tool
and the approver roles it names) and the role settings. Nothing here is a second list to keep
in step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.decide.deps import Deps
from app.errors import DependencyUnavailable

#: The policy document listing the families and what they govern (policies/toolgate/catalog.rego).
CATALOG_DOCUMENT = "toolgate/catalog"
#: The approver roles of a family that names none (policies/toolgate/decision.rego); a policy
#: without it leaves them to the gateway's ``TOOLGATE_APPROVAL_DEFAULT_APPROVER_ROLES``.
DEFAULT_APPROVERS_DOCUMENT = "toolgate/default_approver_roles"


@dataclass(frozen=True)
class Family:
    """One policy family: the tools it declares (``governs``) and who answers its approvals
    (``approver_roles``; None: the default approver roles, ``default_approver_roles``)."""

    name: str
    governs: list[dict[str, Any]]
    approver_roles: list[str] | None

    def governs_tool(self, namespace: str, name: str, version: str | None) -> bool:
        """Whether a declaration covers the tool at ``version`` (None: at any version)."""
        return any(d.get("name") == name and d.get("namespace", "") == namespace
                   and (version is None or d.get("versions") is None or version in d["versions"]) for d in self.governs)


@dataclass(frozen=True)
class ToolRow:
    """One tool version: its contract's facts (None for a tool a family governs without a
    contract), the families that govern it and the roles that may answer its approvals."""

    namespace: str
    name: str
    version: str | None
    contract: dict[str, Any] | None
    families: list[str]
    approver_roles: list[str]


@dataclass(frozen=True)
class InForce:
    """The policy revision in force, the tools, and ``roles`` (role -> what it grants, in
    words). ``catalog_error`` says why the families are unknown (no catalog in the policy, or
    the engine did not answer); then every tool shows no family."""

    revision: str
    tools: list[ToolRow]
    roles: dict[str, list[str]] = field(default_factory=dict)
    catalog_error: str | None = None


def families(deps: Deps) -> tuple[list[Family], str | None]:
    """The families of the policy in force and, when they cannot be read, why (the catalog
    undefined or malformed, the engine unavailable)."""
    try:
        answer = deps.engine.evaluate_document(CATALOG_DOCUMENT, {})
    except DependencyUnavailable:
        return [], "the policy engine did not answer"
    value = answer.value if answer.defined else None
    if not isinstance(value, dict) or not isinstance(value.get("families"), dict):
        return [], "the policy in force has no catalog (data.toolgate.catalog)"
    found = []
    for name, entry in sorted(value["families"].items()):
        entry = entry if isinstance(entry, dict) else {}
        governs = [d for d in entry.get("governs") or [] if isinstance(d, dict)]
        roles = entry.get("approver_roles")
        found.append(Family(name, governs, [str(r) for r in roles] if isinstance(roles, list) else None))
    return found, None


def in_force(deps: Deps) -> InForce:
    """Every contract (sorted by namespace, name, version), then every tool a family governs
    without a contract; and the roles the settings and the families name."""
    found, error = families(deps)
    default_approvers = default_approver_roles(deps)

    def row(namespace: str, name: str, version: str | None, contract: dict[str, Any] | None) -> ToolRow:
        governing = [f for f in found if f.governs_tool(namespace, name, version)]
        roles = sorted({r for f in governing for r in (f.approver_roles if f.approver_roles is not None else default_approvers)})
        return ToolRow(namespace, name, version, contract, [f.name for f in governing], roles)

    tools = [row(c.namespace, c.name, c.version, c.meta.model_dump(include={"risk", "mutating", "description"}))
             for c in deps.contracts.all()]
    contracted = {(c.namespace, c.name) for c in deps.contracts.all()}
    uncontracted = sorted({(d.get("namespace", ""), str(d.get("name"))) for f in found for d in f.governs} - contracted)
    tools += [row(namespace, name, None, None) for namespace, name in uncontracted]
    return InForce(deps.engine.revision(), tools, _roles(deps, found, default_approvers), error)


def default_approver_roles(deps: Deps) -> list[str]:
    """Who answers the approvals of a family that names no approver roles: the policy's default
    when it has one, else the gateway's setting (as ``app.decide.approval_outcome`` applies it)."""
    try:
        answer = deps.engine.evaluate_document(DEFAULT_APPROVERS_DOCUMENT, {})
    except DependencyUnavailable:
        answer = None
    if answer is not None and answer.defined and isinstance(answer.value, list) and all(isinstance(r, str) for r in answer.value):
        return list(answer.value)
    return list(deps.settings.approval_default_approver_roles)


def _roles(deps: Deps, found: list[Family], default_approvers: list[str]) -> dict[str, list[str]]:
    """Role -> what it grants, from the settings and the families' approver roles."""
    settings = deps.settings
    grants: dict[str, list[str]] = {}

    def grant(roles: list[str] | tuple[str, ...], what: str) -> None:
        for role in roles:
            grants.setdefault(role, []).append(what)

    named = [f.name for f in found if f.approver_roles is None]
    grant(default_approvers,
          "answers approvals of a family that names no approver roles" + (f" ({', '.join(named)})" if named else ""))
    for family in found:
        if family.approver_roles is not None:
            grant(family.approver_roles, f"answers approvals of family {family.name}")
    grant(settings.audit_auditor_roles, "reads its own tenant's decision log (Audit, Insights, GET /v1/decisions)")
    where = f"in tokens of tenant {settings.audit_platform_tenant}" if settings.audit_platform_tenant else \
        "nowhere: TOOLGATE_AUDIT_PLATFORM_TENANT is unset"
    grant(settings.audit_platform_auditor_roles, f"reads every tenant's decision log, honoured {where}")
    grant(settings.policy_operator_roles, "reads the policy status (GET /v1/policy/status), reads and pushes tenant data")
    if settings.authzen_pep_role:
        grant([settings.authzen_pep_role], "asks AuthZEN evaluations about any subject of its own tenant")
    return dict(sorted(grants.items()))
