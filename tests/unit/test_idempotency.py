"""The idempotency state machine against real Redis: a standalone server and a 3-master Redis
Cluster (every test runs on both). Atomic Lua scripts, the two TTLs, compare-and-set on the
owner token, key hashing and hostile keys."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, replace

import pytest
from redis.crc import key_slot

from app.contracts.builtin import BUILTIN_CONTRACTS
from app.decide import reservations
from app.decide.stages import DecideCall, Parsed, Validated
from app.decide.validation import validate
from app.errors import Conflict, DependencyUnavailable, NotFound, ValidationFailed
from app.fingerprint import fingerprint
from app.idempotency.keys import Scope, call_key, validate_key
from app.idempotency.store import IdempotencyStore, PendingCall, Stored
from app.models import DecideRequest, Subject
from app.redis_client import RedisConnection, build_redis
from app.settings import Settings
from tests.support.servers import free_port

CREATE_TICKET = next(c for c in BUILTIN_CONTRACTS if c.name == "createTicket")
EXPORT_REPORT = next(c for c in BUILTIN_CONTRACTS if c.name == "exportReport")
TICKET = {"id": "T-1", "title": "Printer", "status": "open", "priority": "normal"}


@dataclass
class Backend:
    name: str
    redis: RedisConnection

    def store(self, *, lease_s: int = 60, retention_s: int = 3600) -> IdempotencyStore:
        return IdempotencyStore(self.redis, lease_s=lease_s, retention_s=retention_s)

    def pttl(self, key: str) -> int:
        return self.redis.run("test", lambda c: c.pttl(key))

    def hgetall(self, key: str) -> dict[str, str]:
        return self.redis.run("test", lambda c: c.hgetall(key))


@pytest.fixture(params=["standalone", "cluster"])
def backend(request, redis_server):
    # threads=50: the pool holds one connection per request thread, and the tests below
    # emulate up to 50 request threads of one worker. A generous socket timeout: a loaded test
    # machine must not turn slow answers into 503s (tests/unit/test_redis_client.py tests it).
    cluster = request.param == "cluster"
    url = request.getfixturevalue("redis_cluster").url if cluster else redis_server.url
    settings = Settings(redis_url=url, redis_cluster=cluster, threads=50, redis_socket_timeout_ms=2000)
    redis = build_redis(settings)
    redis.run("flush", lambda c: c.flushall())
    yield Backend(request.param, redis)
    redis.close()


def _scope(tenant: str = "acme", key: str | None = None, subject: str = "u-1") -> Scope:
    return Scope(tenant, subject, key or f"k-{uuid.uuid4().hex}")


def _call(scope: Scope, *, subject: str = "u-1", lease_s: int = 60, retry_safe: bool = False, payload: str = "a") -> PendingCall:
    fp = fingerprint(scope.tenant, subject, "createTicket", "1", {"title": payload})
    return PendingCall(scope, fp, subject, "createTicket", "1", lease_s, retry_safe, stored=None)


def _expire_lease(backend: Backend, scope: Scope) -> None:
    """Let Redis expire the lease now (a 1 ms TTL), as it would at the end of the lease."""
    backend.redis.run("test", lambda c: c.pexpire(scope.redis_keys[1], 1))
    time.sleep(0.01)


# --- keys -----------------------------------------------------------------------------------

@pytest.mark.parametrize("key", ["k", "x" * 255, "a b", "*", "?", "[a-z]", "a:b", "{t}", "}{", "~!@#$%^&()"])
def test_printable_ascii_keys_are_valid(key):
    assert validate_key(key) == key


@pytest.mark.parametrize("key", ["", "x" * 256, "a\nb", "a\rb", "tab\t", "\x00", "\x7f", "é", "ключ"])
def test_other_keys_are_rejected_with_400(key):
    with pytest.raises(ValidationFailed) as err:
        validate_key(key)
    assert err.value.http_status == 400


def test_header_key_wins_over_the_contract_field():
    data = {"title": "t", "clientMutationId": "0f8fad5b-d9cb-469f-a165-70867728950e"}
    assert call_key("hdr", CREATE_TICKET, data) == "hdr"
    assert call_key(None, CREATE_TICKET, data) == data["clientMutationId"]


def test_mutating_tool_without_key_is_400_and_read_only_is_none():
    with pytest.raises(ValidationFailed) as err:
        call_key(None, CREATE_TICKET, {"title": "t"})
    assert err.value.http_status == 400
    assert call_key(None, EXPORT_REPORT, {}) is None
    assert call_key(None, None, {}) is None  # an unregistered tool without a key


def test_a_non_string_key_field_is_400():
    with pytest.raises(ValidationFailed):
        call_key(None, CREATE_TICKET, {"clientMutationId": 42})


def test_redis_key_names_hide_the_user_key_and_share_one_slot():
    for key in ["*", "a:b", "{x}", "k}:lease", "a b", "[abc]"]:
        record, lease = Scope("acme", "u-1", key).redis_keys
        assert key not in record.removeprefix("toolgate:idem:") and key not in lease.removeprefix("toolgate:idem:")
        assert key_slot(record.encode()) == key_slot(lease.encode())
        assert record.startswith("toolgate:idem:{") and record.endswith("}:record")


def test_tenant_subject_and_key_cannot_be_shifted_into_each_other():
    triples = [("a:b", "s", "c"), ("a", "s", "b:c"), ("a", "s", "bc"), ("ab", "s", "c"), ('a","b', "s", "c"),
               ("a", "s", '","bc'), ("a", "s:c", "k"), ("a:s", "c", "k"), ("a", "sc", "k")]
    assert len({Scope(t, s, k).tag for t, s, k in triples}) == len(triples)


# --- the state machine ------------------------------------------------------------------------

def test_fresh_key_is_free_then_claimed(backend):
    store, scope = backend.store(), _scope()
    call = _call(scope)
    assert store.inspect(scope, call.fingerprint, retry_safe=False) is None
    token, lease_end_ms = store.claim(call)
    assert len(token) == 32 and lease_end_ms > time.time() * 1000 + 50_000
    record = backend.hgetall(scope.redis_keys[0])
    assert record["state"] == "processing" and record["token"] == token and record["subject"] == "u-1"
    assert backend.redis.run("test", lambda c: c.get(scope.redis_keys[1])) == token


def test_processing_is_409_retryable_with_seconds_left_on_the_lease(backend):
    store, scope = backend.store(lease_s=30), _scope()
    call = _call(scope, lease_s=30)
    store.claim(call)
    for attempt in (lambda: store.inspect(scope, call.fingerprint, retry_safe=False), lambda: store.claim(call)):
        with pytest.raises(Conflict) as err:
            attempt()
        assert err.value.http_status == 409 and err.value.retryable is True
        assert 20 <= err.value.retry_after_s <= 30
        assert err.value.headers == {"Retry-After": str(err.value.retry_after_s)}


def test_lease_and_retention_are_two_ttls(backend):
    store, scope = backend.store(lease_s=60, retention_s=3600), _scope()
    token, _ = store.claim(_call(scope))
    record, lease = scope.redis_keys
    # margins of 10 s: the lease is 60 s, the retention 3600 s, so the two cannot be confused
    assert 50_000 < backend.pttl(lease) <= 60_000
    assert 3_650_000 < backend.pttl(record) <= 3_660_000  # outlives the lease by the retention
    report = store.complete(scope, "u-1", TICKET, token=token)
    assert report.state == "completed"
    assert backend.pttl(lease) == -2
    assert 3_590_000 < backend.pttl(record) <= 3_600_000


def test_completed_is_replayed(backend):
    store, scope = backend.store(), _scope()
    call = _call(scope)
    token, _ = store.claim(call)
    store.complete(scope, "u-1", TICKET, token=token)
    assert store.inspect(scope, call.fingerprint, retry_safe=False) == Stored("completed", result=TICKET)
    assert store.claim(call) == Stored("completed", result=TICKET)  # claim never overwrites
    settled = store.settle(replace(call, stored=None))
    assert settled.model_dump(exclude_unset=True) == {"key": scope.key, "state": "replayed", "replayed": True, "outcome": "completed", "result": TICKET}


def test_other_fingerprint_is_422_and_leaves_the_record(backend):
    store, scope = backend.store(), _scope()
    token, _ = store.claim(_call(scope))
    store.complete(scope, "u-1", TICKET, token=token)
    before = backend.hgetall(scope.redis_keys[0])
    other = _call(scope, payload="b")
    for attempt in (lambda: store.inspect(scope, other.fingerprint, retry_safe=False), lambda: store.claim(other)):
        with pytest.raises(Conflict) as err:
            attempt()
        assert err.value.http_status == 422 and err.value.retryable is False
    assert backend.hgetall(scope.redis_keys[0]) == before


def test_complete_compares_and_sets_on_the_owner_token(backend):
    store, scope = backend.store(), _scope()
    token, _ = store.claim(_call(scope))
    with pytest.raises(Conflict) as err:
        store.complete(scope, "u-1", TICKET, token="x" * 32)
    assert err.value.http_status == 409 and err.value.retryable is False
    assert backend.hgetall(scope.redis_keys[0])["state"] == "processing"
    assert store.complete(scope, "u-1", TICKET, token=token).state == "completed"
    assert store.complete(scope, "u-1", TICKET, token=token).state == "completed"  # a repeated report
    with pytest.raises(Conflict):
        store.complete(scope, "u-1", {**TICKET, "id": "T-2"}, token=token)
    assert store.inspect(scope, _call(scope).fingerprint, retry_safe=False).result == TICKET


def test_report_without_token_applies_to_the_current_reservation(backend):
    store, scope = backend.store(), _scope()
    store.claim(_call(scope))
    assert store.complete(scope, "u-1", TICKET).state == "completed"


def test_only_the_reserving_subject_may_report(backend):
    store, scope = backend.store(), _scope()
    token, _ = store.claim(_call(scope))
    with pytest.raises(NotFound):
        store.complete(scope, "u-2", TICKET, token=token)
    with pytest.raises(NotFound):
        store.fail(Scope("other-tenant", "u-1", scope.key), "u-1", retryable=True, reason="x", token=token)
    with pytest.raises(NotFound):
        store.reserved_tool(scope, "u-2")
    assert store.reserved_tool(scope, "u-1") == ("createTicket", "1")
    with pytest.raises(NotFound):
        store.complete(_scope(), "u-1", TICKET)


def test_retryable_failure_releases_the_key(backend):
    store, scope = backend.store(), _scope()
    call = _call(scope)
    token, _ = store.claim(call)
    assert store.fail(scope, "u-1", retryable=True, reason="upstream 503", token=token).state == "released"
    assert backend.pttl(scope.redis_keys[0]) == -2 and backend.pttl(scope.redis_keys[1]) == -2
    assert store.inspect(scope, call.fingerprint, retry_safe=False) is None


def test_final_failure_is_kept_and_replayed(backend):
    store, scope = backend.store(retention_s=100), _scope()
    call = _call(scope)
    token, _ = store.claim(call)
    report = store.fail(scope, "u-1", retryable=False, reason="card declined", token=token)
    assert report.state == "failed" and report.expires_at
    assert store.fail(scope, "u-1", retryable=False, reason="card declined", token=token).state == "failed"
    assert store.inspect(scope, call.fingerprint, retry_safe=False) == Stored("failed", reason="card declined")
    assert 90_000 < backend.pttl(scope.redis_keys[0]) <= 100_000
    with pytest.raises(Conflict):
        store.complete(scope, "u-1", TICKET, token=token)


def test_expired_lease_is_an_unknown_outcome_unless_retry_safe(backend):
    store, scope = backend.store(), _scope()
    call = _call(scope)
    store.claim(call)
    _expire_lease(backend, scope)
    with pytest.raises(Conflict) as err:
        store.claim(call)
    assert err.value.http_status == 409 and err.value.retryable is False
    assert err.value.details == {"outcome": "unknown"}
    assert backend.hgetall(scope.redis_keys[0])["state"] == "processing"
    assert store.inspect(scope, call.fingerprint, retry_safe=True) is None


def test_late_complete_after_reclaim_does_not_overwrite(backend):
    store, scope = backend.store(), _scope()
    call = _call(scope, retry_safe=True)
    old_token, _ = store.claim(call)
    _expire_lease(backend, scope)
    new_token, _ = store.claim(call)
    assert new_token != old_token
    with pytest.raises(Conflict) as err:
        store.complete(scope, "u-1", {**TICKET, "id": "T-old"}, token=old_token)
    assert err.value.details == {"reason": "stale_reservation"}
    assert backend.hgetall(scope.redis_keys[0])["token"] == new_token
    store.complete(scope, "u-1", TICKET, token=new_token)
    assert store.inspect(scope, call.fingerprint, retry_safe=True).result == TICKET


def test_late_complete_after_expiry_without_reclaim_settles_the_unknown(backend):
    store, scope = backend.store(), _scope()
    call = _call(scope)
    token, _ = store.claim(call)
    _expire_lease(backend, scope)
    assert store.complete(scope, "u-1", TICKET, token=token).state == "completed"
    assert store.inspect(scope, call.fingerprint, retry_safe=False).result == TICKET


def test_operator_resolution(backend):
    store = backend.store()
    in_flight, unknown, gone = _scope(), _scope(), _scope()
    for scope in (in_flight, unknown):
        store.claim(_call(scope))
    _expire_lease(backend, unknown)
    with pytest.raises(Conflict) as err:
        store.resolve(in_flight, "released")
    assert err.value.retryable is True and 50 <= err.value.retry_after_s <= 60
    with pytest.raises(NotFound):
        store.resolve(gone, "completed")
    assert store.resolve(unknown, "completed") == "completed"
    assert store.inspect(unknown, _call(unknown).fingerprint, retry_safe=False) == Stored("completed", result=None)
    assert store.resolve(unknown, "released") == "released"  # an operator corrects an operator
    assert store.inspect(unknown, _call(unknown).fingerprint, retry_safe=False) is None


def test_a_completed_call_cannot_be_released(backend):
    """Releasing a record the tool service reported completed would let a retry run it again."""
    store, scope = backend.store(), _scope()
    token, _ = store.claim(_call(scope))
    store.complete(scope, "u-1", TICKET, token=token)
    with pytest.raises(Conflict) as err:
        store.resolve(scope, "released")
    assert err.value.retryable is False and err.value.details == {"state": "completed"}
    assert store.inspect(scope, _call(scope).fingerprint, retry_safe=False) == Stored("completed", result=TICKET)


def test_settle_reserves_and_reports_the_lease(backend):
    store, scope = backend.store(lease_s=45), _scope()
    info = store.settle(_call(scope, lease_s=45))
    assert info.state == "reserved" and info.replayed is False and info.key == scope.key
    assert info.lease_expires_at is not None and info.lease_expires_at.endswith("Z")
    assert info.reservation_token is not None and len(info.reservation_token) == 32


def _validated(contract, data: dict, header_key: str | None) -> Validated:
    """The validated stage of an exportReport call by u-1 of acme."""
    call = DecideCall(request_id="r", authorization=(), body=b"{}", idempotency_key=header_key)
    subject = Subject(id="u-1", tenant="acme", roles=("support_agent",))
    request = DecideRequest(tool="exportReport", version="1", input=data)
    parsed = Parsed(call=call, subject=subject, request=request, contract=contract, sensitive_paths=())
    return validate(parsed, Settings())


def test_check_uses_the_contract_lease_and_retry_safety(backend):
    store = backend.store(lease_s=60)
    data = {"start_date": "2025-01-01", "end_date": "2025-01-31"}
    lease_override = replace(EXPORT_REPORT, meta=EXPORT_REPORT.meta.model_copy(update={"lease_s": 7}))
    pending = reservations.check(_validated(lease_override, data, "r-1"), store)
    assert pending is not None
    assert pending.lease_s == 7 and pending.retry_safe is True and pending.stored is None
    assert pending.fingerprint == fingerprint("acme", "u-1", "exportReport", "1", data)
    assert reservations.check(_validated(EXPORT_REPORT, data, None), store) is None


def _claim_together(store, call, barrier: threading.Barrier, outcomes: list[object]) -> None:
    """Claim ``call`` once all threads wait on ``barrier``; appends the claim or the 409."""
    barrier.wait()
    try:
        outcomes.append(store.claim(call))
    except Conflict as exc:
        outcomes.append(exc.http_status)


def test_one_claim_wins_among_50_threads(backend):
    store = backend.store()
    for _ in range(5):
        call = _call(_scope())
        barrier = threading.Barrier(50)
        outcomes: list[object] = []
        threads = [threading.Thread(target=_claim_together, args=(store, call, barrier, outcomes)) for _ in range(50)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sum(isinstance(o, tuple) for o in outcomes) == 1
        assert outcomes.count(409) == 49


def test_scripts_reload_after_a_script_flush(backend):
    store, scope = backend.store(), _scope()
    store.claim(_call(scope))
    backend.redis.run("test", lambda c: c.script_flush())
    with pytest.raises(Conflict):
        store.inspect(scope, _call(scope).fingerprint, retry_safe=False)


def test_hostile_keys_reach_only_their_own_record(backend):
    store = backend.store()
    victim = Scope("acme", "u-1", "k")
    token, _ = store.claim(_call(victim))
    store.complete(victim, "u-1", TICKET, token=token)
    for key in ["*", "?", "[k]", "k*", "k:record", "{k}", "k}:record", "acme:k", " k", "k "]:
        for tenant in ("acme", "evil"):
            attacker = Scope(tenant, "u-1", key)
            call = _call(attacker)
            assert store.inspect(attacker, call.fingerprint, retry_safe=False) is None
            with pytest.raises(NotFound):
                store.complete(attacker, "u-1", {"id": "pwned"})
    evil = Scope("evil", "u-1", "k")
    assert store.inspect(evil, _call(evil).fingerprint, retry_safe=False) is None
    assert store.inspect(victim, _call(victim).fingerprint, retry_safe=False).result == TICKET


def test_redis_down_is_dependency_unavailable(backend):
    settings = Settings(redis_url=f"redis://127.0.0.1:{free_port()}/0", redis_cluster=backend.name == "cluster")
    redis = build_redis(settings)
    store = IdempotencyStore(redis, lease_s=60, retention_s=60)
    with pytest.raises(DependencyUnavailable) as err:
        store.inspect(_scope(), "f" * 64, retry_safe=False)
    redis.close()
    assert err.value.http_status == 503 and err.value.retryable and err.value.__cause__ is not None
    assert "redis idempotency inspect" in err.value.log_detail
