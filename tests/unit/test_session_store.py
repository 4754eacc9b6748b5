"""The session's Redis state (app.session.store) against real Redis: a standalone server and a
3-master Redis Cluster (every test runs on both). Every new key of a subject in one slot, the
event trimming and TTLs, limits that hold under concurrent reservations, GCRA rate limits,
give-backs that happen once, and fail closed when Redis is gone."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from redis.cluster import RedisCluster
from redis.crc import key_slot

from app.errors import DependencyUnavailable, RateLimited
from app.models import LimitSpec, RateLimitSpec
from app.redis_client import RedisConnection, build_redis
from app.session.events import Event, Outcome
from app.session.keys import SubjectKeys, TenantKeys
from app.session.limits import UNIT
from app.session.store import SessionStore
from app.settings import Settings
from tests.support.redis_cluster import RedisClusterHarness
from tests.support.servers import free_port

HOSTILE = ["*", "{u}", "u}:x", "a b", "toolgate:sess:{x}:timeline", "ü-1"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    harness = RedisClusterHarness(tmp_path_factory.mktemp("cluster")).start()
    yield harness
    harness.stop()


@pytest.fixture(params=["standalone", "cluster"])
def redis(request, redis_server):
    cluster = request.param == "cluster"
    url = request.getfixturevalue("cluster").url if cluster else redis_server.url
    connection = build_redis(Settings(redis_url=url, redis_cluster=cluster, threads=32, redis_socket_timeout_ms=2000))
    connection.run("flush", lambda c: c.flushall())
    yield connection
    connection.close()


def _store(redis: RedisConnection, **overrides) -> SessionStore:
    return SessionStore(redis, Settings(**overrides))


def _event(tool: str = "readFile", conversation: str | None = "c-1", decision: str = "allow") -> Event:
    return Event(conversation=conversation, tool=tool, version="1", decision=decision, replayed=False, approved=False,
                 mutating=False, amounts={}, counterparties=(), resources=())


def _all_keys(redis: RedisConnection, pattern: str) -> list[str]:
    def keys(client) -> list[str]:
        if isinstance(client, RedisCluster):
            return client.keys(pattern, target_nodes=RedisCluster.PRIMARIES)
        return client.keys(pattern)

    return sorted(redis.run("test", keys))


def _id() -> str:
    from app.audit.records import new_decision_id

    return new_decision_id()


@pytest.mark.parametrize("subject", HOSTILE)
def test_every_key_of_a_subject_is_in_one_slot_and_names_no_caller_text(redis, subject: str) -> None:
    store = _store(redis)
    keys = SubjectKeys("acme", subject)
    decision_id = _id()
    limit = LimitSpec(id="l", scope="conversation", window_s=60, max=5)
    rate = RateLimitSpec(id="r", scope="subject", count=5, per_s=60)
    admitted = store.admit(keys, decision_id=decision_id, conversation="{c}*", rates=[rate], limits=[(limit, UNIT)], commit=True)
    store.note(keys, decision_id, _event(), args='{"path":"/a"}', shares=admitted.shares)
    store.settle(keys, decision_id, Outcome("completed", ("private_data",), ("x",)))
    store.admit(keys, decision_id=_id(), conversation=None, rates=[RateLimitSpec(id="t", scope="tenant", count=5, per_s=60)],
                limits=[], commit=True)
    session_keys = _all_keys(redis, "toolgate:sess:*")
    assert len(session_keys) == 8  # timeline, events, outcomes, args, shares, a limit and its sum, a rate
    assert len({key_slot(k.encode()) for k in session_keys}) == 1
    [tenant_key] = _all_keys(redis, "toolgate:rate:*")
    assert tenant_key == TenantKeys("acme").rate("t")
    for key in [*session_keys, tenant_key]:
        assert subject not in key and "{c}*" not in key


def test_two_subjects_and_two_tenants_never_share_a_session(redis) -> None:
    store = _store(redis)
    store.note(SubjectKeys("acme", "u-1"), _id(), _event(), args="", shares=())
    for keys in (SubjectKeys("acme", "u-2"), SubjectKeys("globex", "u-1")):
        assert store.snapshot(keys, "c-1").events == []
    assert len(store.snapshot(SubjectKeys("acme", "u-1"), "c-1").events) == 1


def test_events_are_trimmed_to_the_newest_and_args_to_the_recent(redis) -> None:
    store = _store(redis, session_max_events=10, session_recent_calls=3)
    keys = SubjectKeys("acme", "u-1")
    ids = []
    for n in range(15):
        ids.append(_id())
        store.note(keys, ids[-1], _event(tool=f"t{n}"), args=f'{{"n":{n}}}', shares=())
    snapshot = store.snapshot(keys, "c-1")
    assert [e.event.tool for e in snapshot.events] == [f"t{n}" for n in range(14, 4, -1)]
    assert snapshot.truncated is True  # more were noted than are kept: the counts are lower bounds
    assert [e.args for e in snapshot.events[:4]] == [{"n": 14}, {"n": 13}, {"n": 12}, None]
    timeline, events, _, args, _ = keys.events
    # One event more than max_events is kept: it tells a snapshot that older ones were dropped.
    assert redis.run("t", lambda c: c.zcard(timeline)) == 11 and redis.run("t", lambda c: c.hlen(events)) == 11
    assert redis.run("t", lambda c: c.hlen(args)) <= 4
    assert 86_390_000 < redis.run("t", lambda c: c.pttl(timeline)) <= 86_400_000


def test_a_snapshot_says_when_the_window_holds_more_than_it_reads(redis) -> None:
    writer = _store(redis, session_max_events=50)
    keys = SubjectKeys("acme", "u-1")
    for _ in range(12):
        writer.note(keys, _id(), _event(), args="", shares=())
    reader = _store(redis, session_max_events=10)
    snapshot = reader.snapshot(keys, "c-1")
    assert len(snapshot.events) == 10 and snapshot.truncated is True
    assert snapshot.as_input()["truncated"] is True


def test_events_older_than_the_retention_drop_out(redis) -> None:
    store = _store(redis, session_windows_s="1")
    keys = SubjectKeys("acme", "u-1")
    store.note(keys, _id(), _event(tool="old"), args="", shares=())
    time.sleep(1.1)
    store.note(keys, _id(), _event(tool="new"), args="", shares=())
    assert [e.event.tool for e in store.snapshot(keys, "c-1").events] == ["new"]
    assert redis.run("t", lambda c: c.zcard(keys.events[0])) == 1


def test_twenty_concurrent_reservations_under_at_most_five_admit_exactly_five(redis) -> None:
    store = _store(redis)
    keys = SubjectKeys("acme", "u-1")
    limit = LimitSpec(id="five", scope="subject", window_s=3600, max=5)
    barrier = threading.Barrier(20)

    def reserve(_: int) -> bool:
        barrier.wait(timeout=30)
        admission = store.admit(keys, decision_id=_id(), conversation=None, rates=[], limits=[(limit, UNIT)], commit=True)
        return admission.refused is None

    with ThreadPoolExecutor(20) as pool:
        admitted = list(pool.map(reserve, range(20)))
    assert admitted.count(True) == 5
    assert redis.run("t", lambda c: c.zcard(keys.limit(limit, None))) == 5


def test_a_budget_counts_amounts_exactly_and_a_give_back_happens_once(redis) -> None:
    store = _store(redis)
    keys = SubjectKeys("acme", "u-1")
    budget = LimitSpec(id="eur", scope="conversation", window_s=86_400, max=0.3)
    first, second = _id(), _id()
    a = store.admit(keys, decision_id=first, conversation="c-1", rates=[], limits=[(budget, 100_000)], commit=True)
    store.admit(keys, decision_id=second, conversation="c-1", rates=[], limits=[(budget, 200_000)], commit=True)
    over = store.admit(keys, decision_id=_id(), conversation="c-1", rates=[], limits=[(budget, 1)], commit=True)
    assert over.refused == budget and over.used_units == 300_000  # 0.1 + 0.2 is exactly 0.3
    assert store.admit(keys, decision_id=_id(), conversation="c-2", rates=[], limits=[(budget, 1)], commit=True).refused is None
    store.note(keys, first, _event(), args="", shares=a.shares)
    assert store.linked_shares(keys, first) == a.shares
    assert store.give_back(keys, first, a.shares, linked=True) is True
    assert store.give_back(keys, first, a.shares, linked=True) is False
    again = store.admit(keys, decision_id=_id(), conversation="c-1", rates=[], limits=[(budget, 100_000)], commit=True)
    assert again.refused is None


def test_a_check_without_commit_writes_nothing(redis) -> None:
    store = _store(redis)
    keys = SubjectKeys("acme", "u-1")
    limit = LimitSpec(id="one", scope="subject", window_s=60, max=1)
    rate = RateLimitSpec(id="r", scope="subject", count=1, per_s=60)
    for _ in range(3):
        assert store.admit(keys, decision_id=_id(), conversation=None, rates=[rate], limits=[(limit, UNIT)], commit=False).refused is None
    assert _all_keys(redis, "toolgate:*") == []


def test_a_rate_limit_allows_its_count_then_says_how_long_to_wait(redis) -> None:
    store = _store(redis)
    keys = SubjectKeys("acme", "u-1")
    rate = RateLimitSpec(id="three", scope="subject", count=3, per_s=60)
    for _ in range(3):
        store.admit(keys, decision_id=_id(), conversation=None, rates=[rate], limits=[], commit=True)
    with pytest.raises(RateLimited) as refused:
        store.admit(keys, decision_id=_id(), conversation=None, rates=[rate], limits=[], commit=True)
    assert 19 <= refused.value.retry_after_s <= 20  # one slot (60 s / 3) frees up
    assert refused.value.details == {"rate_limit": "three", "scope": "subject"}
    assert 59_000 < redis.run("t", lambda c: c.pttl(keys.rate("three"))) <= 60_000
    assert store.admit(SubjectKeys("acme", "u-2"), decision_id=_id(), conversation=None, rates=[rate], limits=[],
                       commit=True).refused is None


def test_a_refused_rate_limit_reserves_no_limit(redis) -> None:
    store = _store(redis)
    keys = SubjectKeys("acme", "u-1")
    rate = RateLimitSpec(id="one", scope="subject", count=1, per_s=60)
    limit = LimitSpec(id="l", scope="subject", window_s=60, max=10)
    store.admit(keys, decision_id=_id(), conversation=None, rates=[rate], limits=[(limit, UNIT)], commit=True)
    with pytest.raises(RateLimited):
        store.admit(keys, decision_id=_id(), conversation=None, rates=[rate], limits=[(limit, UNIT)], commit=True)
    assert redis.run("t", lambda c: c.zcard(keys.limit(limit, None))) == 1


def test_a_settlement_for_an_event_that_dropped_out_is_ignored(redis) -> None:
    store = _store(redis)
    keys = SubjectKeys("acme", "u-1")
    assert store.settle(keys, _id(), Outcome("completed")) is False
    assert _all_keys(redis, "toolgate:*") == []


def test_redis_down_fails_closed(tmp_path) -> None:
    store = SessionStore(build_redis(Settings(redis_url=f"redis://127.0.0.1:{free_port()}/0")), Settings())
    keys = SubjectKeys("acme", "u-1")
    with pytest.raises(DependencyUnavailable):
        store.snapshot(keys, None)
    with pytest.raises(DependencyUnavailable):
        store.admit(keys, decision_id=_id(), conversation=None, rates=[RateLimitSpec(id="r", scope="subject", count=1, per_s=1)],
                    limits=[], commit=True)
    with pytest.raises(DependencyUnavailable):
        store.note(keys, _id(), _event(), args="", shares=())


def test_conversation_ids_pick_different_limit_sets_and_none_is_one_of_them() -> None:
    keys = SubjectKeys("acme", "u-1")
    per_conversation = LimitSpec(id="l", scope="conversation", window_s=60, max=1)
    per_subject = LimitSpec(id="l", scope="subject", window_s=60, max=1)
    assert keys.limit(per_conversation, "c-1") != keys.limit(per_conversation, "c-2") != keys.limit(per_conversation, None)
    assert keys.limit(per_subject, "c-1") == keys.limit(per_subject, "c-2") == keys.limit(per_subject, None)
    assert keys.limit(per_subject, None) != keys.limit(per_conversation, None)
    assert str(uuid.uuid4()) not in keys.prefix


def test_units_that_left_their_window_are_not_counted_nor_given_back_twice(redis) -> None:
    store = _store(redis)
    keys = SubjectKeys("acme", "u-1")
    limit = LimitSpec(id="two", scope="subject", window_s=1, max=2)
    first = _id()
    old = store.admit(keys, decision_id=first, conversation=None, rates=[], limits=[(limit, UNIT)], commit=True)
    store.note(keys, first, _event(), args="", shares=old.shares)
    time.sleep(1.1)
    for _ in range(2):
        assert store.admit(keys, decision_id=_id(), conversation=None, rates=[], limits=[(limit, UNIT)], commit=True).refused is None
    assert store.give_back(keys, first, old.shares, linked=True) is True  # its unit had already left the window
    refused = store.admit(keys, decision_id=_id(), conversation=None, rates=[], limits=[(limit, UNIT)], commit=True)
    assert refused.refused == limit and refused.used_units == 2 * UNIT
    assert redis.run("t", lambda c: c.get(keys.limit(limit, None) + ":sum")) == str(2 * UNIT)
