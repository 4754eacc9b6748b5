"""Pending approvals (app.approvals) against a real Redis, standalone and a three-node Redis
Cluster: creation and retry, key layout and TTLs, the approver's checks, grant checks and
one-time use, races."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from redis.cluster import RedisCluster
from redis.crc import key_slot

from app.approvals.grants import GrantSigner
from app.approvals.presented import GRANT_EXPIRED, GRANT_INVALID, GRANT_MISSING, GRANT_USED, ApprovalRejected, VerifiedApproval
from app.approvals.records import CallFacts, Credential, secret_digest
from app.approvals.service import ApprovalService, OpenedApproval
from app.approvals.store import RECORD_GRACE_S, TENANTS_KEY, ApprovalKeys, ApprovalStore
from app.errors import Conflict, Forbidden, NotFound
from app.models import ApprovalPresentation, PolicyDecision, Subject
from app.redis_client import build_redis
from app.settings import Settings

KEYS = [("k1", b"s" * 32)]
T0 = 1_750_000_000.0

REQUESTER = Subject(id="u-admin", tenant="acme", roles=("admin",))
APPROVER = Subject(id="u-approver", tenant="acme", roles=("approver",))
OTHER_APPROVER = Subject(id="u-approver-2", tenant="acme", roles=("approver",))
AGENT = Subject(id="u-agent", tenant="acme", roles=("support_agent",))
FOREIGN_APPROVER = Subject(id="u-approver", tenant="globex", roles=("approver",))

DECISION = PolicyDecision(
    decision="user-approval",
    reasons=("payment over 1000 needs approval",),
    approval_reason="payment over 1000 needs approval",
    approver_roles=("approver",),
    approval_ttl_s=60,
)


class Clock:
    """A settable clock (Unix seconds)."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["standalone", "cluster"])
def redis_conn(request, redis_server):
    """The gateway's Redis connection (threads=40: up to 20 racing request threads here)."""
    if request.param == "cluster":
        settings = Settings(redis_url=request.getfixturevalue("redis_cluster").url, redis_cluster=True)
    else:
        settings = Settings(redis_url=redis_server.url)
    conn = build_redis(settings.model_copy(update={"threads": 40, "redis_socket_timeout_ms": 2000}))
    conn.run("flush", lambda c: c.flushall())
    yield conn
    conn.close()


def all_keys(conn) -> list[str]:
    def keys(client):
        if isinstance(client, RedisCluster):
            return client.keys("*", target_nodes=RedisCluster.PRIMARIES)
        return client.keys("*")

    return conn.run("test", keys)


def pttl(conn, key: str) -> int:
    return conn.run("test", lambda c: c.pttl(key))


def make_service(redis_conn, clock, **kw) -> ApprovalService:
    options = {"default_ttl_s": 900, "default_approver_roles": ["approver"], "clock": clock, **kw}
    return ApprovalService(ApprovalStore(redis_conn), GrantSigner(KEYS), **options)


def cred(subject: Subject, kind: str = "bearer") -> Credential:
    """A credential of ``subject`` (never the requester's own token digest)."""
    return Credential(kind, secret_digest(f"token-of-{subject.id}-{kind}"))  # type: ignore[arg-type]


@pytest.fixture
def service(redis_conn, clock) -> ApprovalService:
    return make_service(redis_conn, clock)


def call(**changes) -> CallFacts:
    base = {
        "tenant": "acme",
        "subject": "u-admin",
        "tool": "processPayment",
        "version": "1",
        "tool_call_id": "call_7",
        "input_fingerprint": "ab" * 32,
    }
    return CallFacts(**{**base, **changes})


def open_approval(service, facts=None, decision=DECISION):
    opened = OpenedApproval(
        call=facts or call(), display_input={"amount": 1500}, call_input={"amount": 1500}, sensitive_paths=(),
        conversation_id=None, credential_digest=secret_digest("token-of-u-admin-bearer"), decision_id="01JDECIDE",
        policy_revision="rev-1",
    )
    return service.request(opened, decision)


def approved(service, facts=None):
    approval = open_approval(service, facts)
    _, grant = service.answer(APPROVER, cred(APPROVER), approval.request.approval_id, approved=True, reason="ok", decision_id="01JANSWER")
    return approval.request.approval_id, grant


# --- creating ------------------------------------------------------------------------------


def test_request_stores_a_pending_approval_with_policy_roles_reason_and_ttl(service, clock):
    approval = open_approval(service)
    req = approval.request
    assert approval.state == "pending" and approval.answer is None
    assert req.approval_id.startswith("ap_") and len(req.approval_id) == 35
    assert (req.request_reason, req.approver_roles, req.ttl_s) == ("payment over 1000 needs approval", ("approver",), 60)
    assert req.expires_at_ms == int(T0 * 1000) + 60_000
    shown, grant = service.show(APPROVER, req.approval_id)
    assert shown.request == req and grant is None
    view = shown.view(service.now_ms())
    assert view.state == "pending" and view.input == {"amount": 1500} and view.expires_at.endswith("Z")


def test_policy_without_approval_object_uses_the_settings(redis_conn, clock):
    service = make_service(redis_conn, clock, default_ttl_s=120, default_approver_roles=["finance"])
    decision = PolicyDecision(decision="user-approval", reasons=("needs a human",))
    req = open_approval(service, decision=decision).request
    assert (req.approver_roles, req.ttl_s, req.request_reason) == (("finance",), 120, "needs a human")


def test_retry_of_the_same_call_returns_the_same_pending_approval(service):
    first = open_approval(service).request.approval_id
    assert open_approval(service).request.approval_id == first
    assert open_approval(service, call(tool_call_id="call_8")).request.approval_id != first
    assert open_approval(service, call(input_fingerprint="cd" * 32)).request.approval_id != first
    assert open_approval(service, call(subject="u-other")).request.approval_id != first


def test_concurrent_requests_for_one_call_create_one_approval(service):
    with ThreadPoolExecutor(16) as pool:
        ids = set(pool.map(lambda _: open_approval(service).request.approval_id, range(16)))
    assert len(ids) == 1


def test_an_answered_approval_is_not_handed_out_again(service):
    first = open_approval(service).request.approval_id
    service.answer(APPROVER, cred(APPROVER), first, approved=False, reason="no", decision_id="01JANSWER")
    assert open_approval(service).request.approval_id != first


def test_keys_share_one_slot_per_tenant_and_carry_ttls(service, redis_conn):
    approval = open_approval(service)
    keys = set(all_keys(redis_conn)) - {TENANTS_KEY}
    tenant = ApprovalKeys("acme")
    assert keys == {tenant.record(approval.request.approval_id), tenant.call(call()), tenant.pending, tenant.expiry,
                    tenant.requester("u-admin")}
    assert len({key_slot(k.encode()) for k in keys}) == 1
    assert 0 < pttl(redis_conn, ApprovalKeys("acme").record(approval.request.approval_id)) <= (60 + RECORD_GRACE_S) * 1000
    assert 0 < pttl(redis_conn, ApprovalKeys("acme").call(call())) <= 60_000
    assert pttl(redis_conn, ApprovalKeys("acme").pending) > 0


@pytest.mark.parametrize("tenant", ["a}b", "{acme}", "acme:rec:x", "a b*?[", "ünï"])
def test_tenant_text_cannot_break_the_hash_tag(tenant):
    keys = ApprovalKeys(tenant)
    assert keys.pending.count("{") == 1 and keys.pending.count("}") == 1
    assert keys.pending != ApprovalKeys("acme").pending
    assert key_slot(keys.record("ap_x").encode()) == key_slot(keys.pending.encode())


# --- the approver's side ---------------------------------------------------------------------


def test_approve_returns_a_grant_bound_to_the_call(service, clock):
    approval_id, grant = approved(service)
    claims = GrantSigner(KEYS).verify(grant, now_ms=service.now_ms())
    assert claims.binding() == call().binding(approval_id)
    assert (claims.approver, claims.approver_roles, claims.decision_id) == ("u-approver", ("approver",), "01JANSWER")
    assert claims.expires_at_ms == int(T0 * 1000) + 60_000
    shown, requester_grant = service.show(REQUESTER, approval_id)
    assert shown.state == "approved" and requester_grant == grant
    assert service.show(APPROVER, approval_id)[1] is None  # only the requester picks it up later


def test_deny_stores_the_reason_and_returns_no_grant(service):
    approval_id = open_approval(service).request.approval_id
    answered, grant = service.answer(APPROVER, cred(APPROVER), approval_id, approved=False, reason="too much", decision_id="01JANSWER")
    assert grant is None and answered.state == "denied" and answered.answer.reason == "too much"


def test_other_tenant_id_is_not_found(service):
    approval_id = open_approval(service).request.approval_id
    for action in (
        lambda: service.show(FOREIGN_APPROVER, approval_id),
        lambda: service.answer(FOREIGN_APPROVER, cred(FOREIGN_APPROVER), approval_id, approved=True, reason="", decision_id="d"),
    ):
        with pytest.raises(NotFound):
            action()


@pytest.mark.parametrize("approval_id", ["ap_nope", "../../etc", "ap_" + "A" * 32, "*", ""])
def test_unknown_or_malformed_ids_are_not_found(service, approval_id):
    with pytest.raises(NotFound):
        service.show(APPROVER, approval_id)


def test_without_the_role_the_answer_is_forbidden(service):
    approval_id = open_approval(service).request.approval_id
    with pytest.raises(Forbidden):
        service.answer(AGENT, cred(AGENT), approval_id, approved=True, reason="", decision_id="d")
    with pytest.raises(Forbidden):
        service.show(AGENT, approval_id)


def test_requester_cannot_answer_their_own_request(service):
    requester = Subject(id="u-admin", tenant="acme", roles=("admin", "approver"))
    approval_id = open_approval(service).request.approval_id
    with pytest.raises(Forbidden, match="credential that made the request"):
        service.answer(requester, cred(requester), approval_id, approved=True, reason="", decision_id="d")
    with pytest.raises(Forbidden, match="answered by its requester"):
        service.answer(requester, cred(requester, "console"), approval_id, approved=True, reason="", decision_id="d")


def test_self_approval_is_the_policys_and_needs_a_step_up_credential(service):
    holder = Subject(id="u-admin", tenant="acme", roles=("account_holder",))
    decision = DECISION.model_copy(update={"approver_roles": ("account_holder",), "approval_self_approval": True})
    approval_id = open_approval(service, decision=decision).request.approval_id
    with pytest.raises(Forbidden, match="step-up"):
        service.answer(holder, Credential("bearer", secret_digest("another token of hers")), approval_id, approved=True, reason="mine", decision_id="d")
    with pytest.raises(Forbidden, match="credential that made the request"):
        service.answer(holder, Credential("step-up", secret_digest("token-of-u-admin-bearer")), approval_id,
                       approved=True, reason="mine", decision_id="d")
    answered, grant = service.answer(holder, cred(holder, "step-up"), approval_id, approved=True, reason="mine", decision_id="d")
    assert answered.state == "approved" and grant


def test_without_the_policys_consent_the_requester_never_answers(service):
    holder = Subject(id="u-admin", tenant="acme", roles=("account_holder",))
    decision = DECISION.model_copy(update={"approver_roles": ("account_holder",)})
    approval_id = open_approval(service, decision=decision).request.approval_id
    with pytest.raises(Forbidden, match="requester"):
        service.answer(holder, cred(holder, "step-up"), approval_id, approved=True, reason="mine", decision_id="d")


def test_answering_twice_is_a_conflict(service):
    approval_id = open_approval(service).request.approval_id
    service.answer(APPROVER, cred(APPROVER), approval_id, approved=True, reason="", decision_id="d1")
    with pytest.raises(Conflict) as info:
        service.answer(OTHER_APPROVER, cred(OTHER_APPROVER), approval_id, approved=False, reason="", decision_id="d2")
    assert info.value.http_status == 409


def test_answering_after_expiry_is_a_conflict(service, clock):
    approval_id = open_approval(service).request.approval_id
    clock.now += 60
    assert service.show(APPROVER, approval_id)[0].view(service.now_ms()).state == "expired"
    with pytest.raises(Conflict):
        service.answer(APPROVER, cred(APPROVER), approval_id, approved=True, reason="", decision_id="d")


def test_racing_answers_have_one_winner(service):
    approval_id = open_approval(service).request.approval_id
    approvers = [Subject(id=f"u-approver-{i}", tenant="acme", roles=("approver",)) for i in range(12)]
    barrier = threading.Barrier(len(approvers))

    def answer(approver):
        barrier.wait()
        try:
            service.answer(approver, cred(approver), approval_id, approved=True, reason="", decision_id=approver.id)
            return "ok"
        except Conflict:
            return "conflict"

    with ThreadPoolExecutor(len(approvers)) as pool:
        outcomes = list(pool.map(answer, approvers))
    assert sorted(outcomes) == ["conflict"] * 11 + ["ok"]


def test_listing_shows_pending_approvals_the_caller_may_answer(service, clock):
    first = open_approval(service).request.approval_id
    clock.now += 1  # soonest expiry first
    second = open_approval(service, call(tool_call_id="call_8")).request.approval_id
    finance = open_approval(
        service, call(tool_call_id="call_9"), DECISION.model_copy(update={"approver_roles": ("finance",)})
    ).request.approval_id
    answered = open_approval(service, call(tool_call_id="call_10")).request.approval_id
    service.answer(APPROVER, cred(APPROVER), answered, approved=True, reason="", decision_id="d")
    open_approval(service, call(tenant="globex"))
    listed = [a.request.approval_id for a in service.list_pending(APPROVER)[0]]
    assert listed == [first, second]
    assert [a.request.approval_id for a in service.list_pending(APPROVER, limit=1)[0]] == [first]
    finance_officer = Subject(id="u-fin", tenant="acme", roles=("finance",))
    assert [a.request.approval_id for a in service.list_pending(finance_officer)[0]] == [finance]
    with pytest.raises(Forbidden):
        service.list_pending(AGENT)
    clock.now += 60
    assert service.list_pending(APPROVER)[0] == []


# --- the tool service's side -------------------------------------------------------------------


def present(approval_id, grant=None) -> ApprovalPresentation:
    return ApprovalPresentation(approval_id=approval_id, grant=grant)


def rejected(action) -> ApprovalRejected:
    with pytest.raises(ApprovalRejected) as info:
        action()
    return info.value


def test_a_valid_grant_verifies_and_is_used_once(service):
    approval_id, grant = approved(service)
    verified = service.verify_presented(present(approval_id, grant), call())
    assert verified.policy_input() == {
        "approval_id": approval_id,
        "approved": True,
        "approver": {"id": "u-approver", "roles": ["approver"]},
        "approvers": ["u-approver"],
    }
    service.consume(verified)
    assert service.show(REQUESTER, approval_id)[0].state == "used"
    assert rejected(lambda: service.verify_presented(present(approval_id, grant), call())).reason == GRANT_USED
    assert rejected(lambda: service.consume(verified)).reason == GRANT_USED


@pytest.mark.parametrize(
    "change",
    [
        {"tenant": "globex"},
        {"subject": "u-other"},
        {"tool": "runCommand"},
        {"version": "2"},
        {"tool_call_id": "call_8"},
        {"tool_call_id": None},
        {"input_fingerprint": "cd" * 32},
    ],
)
def test_a_grant_for_another_call_is_invalid(service, change):
    approval_id, grant = approved(service)
    refusal = rejected(lambda: service.verify_presented(present(approval_id, grant), call(**change)))
    assert (refusal.reason, refusal.kind) == (GRANT_INVALID, "invalid")
    assert next(iter(change)) in refusal.detail


def test_a_grant_presented_under_another_approval_id_is_invalid(service):
    _, grant = approved(service)
    other_id, _ = approved(service, call(tool_call_id="call_8"))
    assert rejected(lambda: service.verify_presented(present(other_id, grant), call())).reason == GRANT_INVALID


def test_an_expired_grant_is_refused(service, clock):
    approval_id, grant = approved(service)
    clock.now += 60
    assert rejected(lambda: service.verify_presented(present(approval_id, grant), call())).reason == GRANT_EXPIRED


def test_a_grant_whose_record_is_gone_is_invalid(service, redis_conn):
    approval_id, grant = approved(service)
    redis_conn.run("test", lambda c: c.delete(ApprovalKeys("acme").record(approval_id)))
    assert rejected(lambda: service.verify_presented(present(approval_id, grant), call())).reason == GRANT_INVALID


def test_no_grant_for_a_denied_approval_carries_the_approvers_reason(service):
    approval_id = open_approval(service).request.approval_id
    service.answer(APPROVER, cred(APPROVER), approval_id, approved=False, reason="recipient unknown", decision_id="d")
    refusal = rejected(lambda: service.verify_presented(present(approval_id), call()))
    assert (refusal.reason, refusal.kind) == ("recipient unknown", "denied")
    # ... but only for that very call
    other = rejected(lambda: service.verify_presented(present(approval_id), call(tool_call_id="call_8")))
    assert other.reason == GRANT_INVALID


def test_a_denial_without_reason_says_so(service):
    approval_id = open_approval(service).request.approval_id
    service.answer(APPROVER, cred(APPROVER), approval_id, approved=False, reason="", decision_id="d")
    assert rejected(lambda: service.verify_presented(present(approval_id), call())).reason == "the approver rejected this call"


@pytest.mark.parametrize("state", ["unknown", "pending", "approved"])
def test_no_grant_otherwise_is_missing(service, state):
    approval_id = "ap_" + "B" * 32
    if state != "unknown":
        approval_id = open_approval(service).request.approval_id
    if state == "approved":
        service.answer(APPROVER, cred(APPROVER), approval_id, approved=True, reason="", decision_id="d")
    assert rejected(lambda: service.verify_presented(present(approval_id), call())).reason == GRANT_MISSING


def test_twenty_concurrent_uses_of_one_grant_have_one_winner(service):
    approval_id, grant = approved(service)
    barrier = threading.Barrier(20)

    def use(_):
        barrier.wait()
        try:
            service.consume(service.verify_presented(present(approval_id, grant), call()))
            return "ok"
        except ApprovalRejected as exc:
            return exc.reason

    with ThreadPoolExecutor(20) as pool:
        outcomes = list(pool.map(use, range(20)))
    assert sorted(outcomes) == [GRANT_USED] * 19 + ["ok"]


def test_the_attempt_that_used_a_grant_may_present_it_again(service):
    """A retry with the same idempotency key passes (the idempotency layer then answers it);
    any other attempt, or a call without a key, is refused."""
    approval_id, grant = approved(service)
    first = service.verify_presented(present(approval_id, grant), call(), idempotency_key="key-1")
    service.consume(first)
    again = service.verify_presented(present(approval_id, grant), call(), idempotency_key="key-1")
    service.consume(again)
    for key in ("key-2", None):
        refusal = rejected(lambda key=key: service.verify_presented(present(approval_id, grant), call(), idempotency_key=key))
        assert refusal.reason == GRANT_USED
    other = service.verify_presented(present(approval_id, grant), call(), idempotency_key="key-1")
    assert rejected(lambda: service.consume(VerifiedApproval.of(other.claims))).reason == GRANT_USED


def test_twenty_concurrent_attempts_with_distinct_keys_have_one_winner(service):
    approval_id, grant = approved(service)
    barrier = threading.Barrier(20)

    def use(index):
        barrier.wait()
        try:
            presented = present(approval_id, grant)
            service.consume(service.verify_presented(presented, call(), idempotency_key=f"key-{index}"))
            return "ok"
        except ApprovalRejected as exc:
            return exc.reason

    with ThreadPoolExecutor(20) as pool:
        outcomes = list(pool.map(use, range(20)))
    assert sorted(outcomes) == [GRANT_USED] * 19 + ["ok"]
