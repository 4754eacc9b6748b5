"""The decide side of approvals (app.decide.approval_outcome, app.decide.presented) over
in-memory stand-ins: the policy is asked without the grant first, a grant covers only the
reasons it was given for, an edit replaces the input, a standing scoped grant is asked with,
and the inputs the policy saw."""

from __future__ import annotations

from app.approvals.records import Credential, secret_digest
from app.models import GrantScopeBody, PolicyDecision, Subject
from tests.fast.test_pipeline import PAY, run

APPROVER = Subject(id="u-approver", tenant="acme", roles=("approver",))
REASON = "payment over 1000 needs approval"


def policy(*reasons: str, scopes: tuple[str, ...] | None = None):
    """Asks for approval for ``reasons`` unless an approval is presented; then allows."""

    def decide(document):
        if document["approval"]:
            return PolicyDecision(decision="allow", reasons=("approved",))
        return PolicyDecision(decision="user-approval", reasons=reasons, approver_roles=("approver",),
                              approval_grant_scopes=scopes)

    return decide


def approve(deps, approval_id, **kw):
    return deps.approvals.answer(APPROVER, Credential("bearer", secret_digest("approver-token")), approval_id, approved=True,
                                 reason="ok", decision_id="01JANSWERFAST0000000000000", **kw)


def test_a_grant_is_checked_against_the_policy_without_it_first(deps, engine) -> None:
    engine.script = policy(REASON)
    asked, _ = run(deps, PAY, key="k-1")
    _, grant = approve(deps, asked.approval.approval_id)
    presented = {**PAY, "approval": {"approval_id": asked.approval.approval_id, "grant": grant}}
    allowed, _ = run(deps, presented, key="k-1")
    assert allowed.decision == "allow" and allowed.ai_sdk_status == "approved"
    assert [bool(i["approval"]) for i in engine.inputs] == [False, False, True]


def test_new_reasons_ask_again_and_leave_the_grant_unused(deps, engine) -> None:
    engine.script = policy(REASON)
    asked, _ = run(deps, PAY, key="k-2")
    _, grant = approve(deps, asked.approval.approval_id)
    engine.script = policy(REASON, "recipient is new")
    presented = {**PAY, "approval": {"approval_id": asked.approval.approval_id, "grant": grant}}
    again, _ = run(deps, presented, key="k-2")
    assert again.decision == "user-approval" and again.approval.approval_id != asked.approval.approval_id
    engine.script = policy(REASON)
    allowed, _ = run(deps, presented, key="k-2")  # the old reasons again: the unused grant still works
    assert allowed.decision == "allow"


def test_a_policy_that_now_allows_or_denies_decides_alone(deps, engine) -> None:
    engine.script = policy(REASON)
    asked, _ = run(deps, PAY, key="k-3")
    _, grant = approve(deps, asked.approval.approval_id)
    presented = {**PAY, "approval": {"approval_id": asked.approval.approval_id, "grant": grant}}
    engine.script = lambda _: PolicyDecision(decision="deny", reasons=("payments are frozen",))
    denied, _ = run(deps, presented, key="k-3")
    assert denied.decision == "deny" and denied.reasons == ["payments are frozen"]


def test_an_edit_replaces_the_input_the_policy_sees(deps, engine) -> None:
    engine.script = policy(REASON)
    asked, _ = run(deps, PAY, key="k-4")
    from app.decide.answers import approved_edit

    approval = deps.approvals.find(APPROVER, asked.approval.approval_id)
    edit = approved_edit(deps.contracts, approval, {**PAY["input"], "amount": 1100})
    _, grant = approve(deps, asked.approval.approval_id, edit=edit)
    presented = {**PAY, "approval": {"approval_id": asked.approval.approval_id, "grant": grant}}
    allowed, _ = run(deps, presented, key="k-4")
    assert allowed.input["amount"] == 1100 and allowed.approval_edit.changes[0].approved == 1100
    assert engine.inputs[-1]["call"]["input"]["amount"] == 1100


def test_a_standing_grant_is_asked_with_and_counts_one_use(deps, engine) -> None:
    engine.script = policy(REASON, scopes=("once", "duration"))
    asked, _ = run(deps, PAY, key="k-5")
    approve(deps, asked.approval.approval_id, scope=GrantScopeBody(kind="duration", ttl_s=600))
    later, _ = run(deps, {**PAY, "tool_call_id": "call_8"}, key="k-6")
    assert later.decision == "allow" and later.ai_sdk_status == "approved"
    assert engine.inputs[-1]["approval"]["grant_id"].startswith("sg_")
    [stored] = deps.approvals.scoped_grants(APPROVER)
    assert stored.uses == 1
