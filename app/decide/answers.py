"""An approver's answer to a pending approval (DESIGN §5), recorded like a decide call: the
edit an approver makes is validated against the tool's contract here, and the revocation of a
scoped grant is recorded the same way."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any, NoReturn

from app.approvals.records import Approval, ApprovedEdit, Credential, StoredScopedGrant
from app.audit.records import new_decision_id
from app.contracts.redaction import REDACTED, redact
from app.contracts.registry import ContractRegistry
from app.decide.deps import Deps
from app.decide.events import RequestFacts, answer_event, revoke_event
from app.errors import ToolgateError, ValidationFailed
from app.fingerprint import canonical_json, fingerprint
from app.models import ApprovalAnswerBody, InputChange, Subject


def answer(
    deps: Deps, request: RequestFacts, approver: Subject, credential: Credential, approval_id: str, body: ApprovalAnswerBody
) -> tuple[Approval, str | None]:
    """Record ``approver``'s answer to ``approval_id``; returns the approval as it now stands and,
    when this answer approved it (its quorum reached), its one-time grant. The answer's decision
    id is bound in the grant.

    Raises what ``ApprovalService.answer`` raises (404, 403, 409, 422, 503) and
    ``ValidationFailed`` (422) for an edit the contract refuses; every answer, refused ones
    included, leaves an ``approval_answer`` record (503 when it cannot be written), which names
    the tool whenever the approval was found in the approver's tenant.
    """
    decision_id = new_decision_id()
    found: list[Approval] = []

    def act() -> tuple[Approval, str | None]:
        found.append(deps.approvals.find(approver, approval_id))
        edit = None
        if body.approved and body.input is not None:  # a denial ignores an edit
            edit = approved_edit(deps.contracts, found[0], body.input)
        return deps.approvals.answer(
            approver, credential, approval_id, approved=body.approved, reason=body.reason, decision_id=decision_id,
            edit=edit, scope=body.scope,
        )

    return deps.recorder.run(
        act,
        lambda result, error: answer_event(
            request, approver, approval_id, decision_id, body, result[0] if result else None, error,
            asked=found[0] if found else None,
        ),
    )


def refuse(
    deps: Deps, request: RequestFacts, approver: Subject, approval_id: str, body: ApprovalAnswerBody, asked: Approval,
    error: ToolgateError,
) -> NoReturn:
    """Record an answer refused before it reached the approval service (a form value that is not
    JSON, a scope out of bounds) as ``answer`` records a refused one, then raise ``error``."""

    def act() -> None:
        raise error

    deps.recorder.run(act, lambda _, raised: answer_event(request, approver, approval_id, new_decision_id(), body, None, raised,
                                                           asked=asked))
    raise error  # not reached: run re-raises


def revoke(deps: Deps, request: RequestFacts, subject: Subject, grant_id: str) -> StoredScopedGrant:
    """Revoke a standing scoped grant (see ``ApprovalService.revoke`` for the errors), recorded as
    a ``grant_revoke`` event, refused revocations included."""
    return deps.recorder.run(
        lambda: deps.approvals.revoke(subject, grant_id),
        lambda result, error: revoke_event(request, subject, grant_id, result, error),
    )


def _pointer(parts: list[str]) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def _diff(requested: Any, approved: Any, parts: list[str], out: list[InputChange]) -> None:
    """The leaf-level changes from ``requested`` to ``approved`` (objects member by member)."""
    if isinstance(requested, dict) and isinstance(approved, dict):
        for key in sorted(set(requested) | set(approved)):
            if key not in approved:
                out.append(InputChange(path=_pointer([*parts, key]), requested=requested[key], op="remove"))
            elif key not in requested:
                out.append(InputChange(path=_pointer([*parts, key]), approved=approved[key], op="add"))
            else:
                _diff(requested[key], approved[key], [*parts, key], out)
    elif canonical_json(requested) != canonical_json(approved):
        out.append(InputChange(path=_pointer(parts), requested=requested, approved=approved, op="replace"))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _raises(requested: Any, approved: Any) -> bool:
    """Whether ``approved`` is a number further from zero than the requested number (an amount,
    a count, a limit raised: that is another call, not a narrowed one)."""
    if not (_is_number(requested) and _is_number(approved)):
        return False
    return abs(Decimal(str(approved))) > abs(Decimal(str(requested)))


def _at(document: dict[str, Any], pointer: str) -> tuple[dict[str, Any] | None, str]:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    node: Any = document
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    return (node if isinstance(node, dict) else None), parts[-1] if parts else ""


def approved_edit(contracts: ContractRegistry, approval: Approval, edited: dict[str, Any]) -> ApprovedEdit | None:
    """The approver's narrowed input as an ``ApprovedEdit`` (None when it equals the request).

    ``edited`` is the input as the approver sees it: sensitive members keep ``[REDACTED]`` and
    get their requested values back (changing or removing one is refused). The result must
    validate against the tool's contract, and may change or remove members but never add one,
    nor move a number further from zero.
    Raises ``ValidationFailed`` (422) with ``details.problems``.
    """
    request = approval.request
    namespace, _, name = request.tool.rpartition("/")  # the approval names the qualified tool
    contract = contracts.get(name, request.version, namespace)
    if contract is None:
        raise ValidationFailed("the input of an unregistered tool cannot be edited", http_status=422)
    merged = copy.deepcopy(edited)
    for path in request.sensitive_paths:
        original_parent, name = _at(request.call_input, path)
        if original_parent is None or name not in original_parent:
            continue
        parent, _ = _at(merged, path)
        if parent is None or parent.get(name) != REDACTED:
            raise ValidationFailed(
                "sensitive members cannot be edited", http_status=422,
                details={"problems": [{"path": path, "message": "keep the [REDACTED] placeholder"}]},
            )
        parent[name] = original_parent[name]
    normalized = contract.validate_input(merged)
    if canonical_json(normalized) == canonical_json(request.call_input):
        return None
    changes: list[InputChange] = []
    _diff(redact(request.call_input, request.sensitive_paths)[0], redact(normalized, request.sensitive_paths)[0], [], changes)
    added = [c.path for c in changes if c.op == "add"]
    if added:
        raise ValidationFailed(
            "an approver may narrow the input (change or remove members), not add members", http_status=422,
            details={"problems": [{"path": p, "message": "not in the requested input"} for p in added[:20]]},
        )
    raised = [c.path for c in changes if c.op == "replace" and _raises(c.requested, c.approved)]
    if raised:
        raise ValidationFailed(
            "an approver may lower a number, not raise it", http_status=422,
            details={"problems": [{"path": p, "message": "larger than the requested value"} for p in raised[:20]]},
        )
    fp = fingerprint(request.tenant, request.requester, request.tool, request.version, normalized)
    return ApprovedEdit(input=normalized, fingerprint=fp, changes=tuple(changes))
