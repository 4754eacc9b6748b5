"""The provenance store (app.provenance.store) and what a result leaves to remember
(app.provenance.results), against real Redis: a standalone server and a 3-master Redis Cluster.
Digests only (no raw value in Redis), keyed per tenant, one slot per subject, bounded in values,
sources and time, read in one round trip."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from app.contracts.contract import ContractMetadata
from app.provenance import store as store_module
from app.provenance.results import remembered
from app.provenance.store import ProvenanceStore, Remembered, Source
from app.redis_client import RedisConnection, build_redis
from app.session.keys import SubjectKeys
from app.settings import Settings
from tests.unit.test_session_store import cluster  # noqa: F401

ATTACKER = "US133000000121212121212"


@pytest.fixture(params=["standalone", "cluster"])
def redis(request, redis_server):
    clustered = request.param == "cluster"
    url = request.getfixturevalue("cluster").url if clustered else redis_server.url
    connection = build_redis(Settings(redis_url=url, redis_cluster=clustered, threads=8, redis_socket_timeout_ms=2000))
    connection.run("flush", lambda c: c.flushall())
    yield connection
    connection.close()


def _keys(redis: RedisConnection) -> list[str]:
    found: list[str] = []
    redis.run("scan", lambda c: found.extend(c.scan_iter("*")))
    return found


def _values(redis: RedisConnection) -> str:
    text: list[str] = []
    for key in _keys(redis):
        kind = redis.run("type", lambda c, k=key: c.type(k))
        if kind == "hash":
            text.extend(f"{f}={v}" for f, v in redis.run("hgetall", lambda c, k=key: c.hgetall(k)).items())
    return " ".join(text)


def test_values_are_stored_as_tenant_keyed_digests_in_the_subjects_slot(redis):
    store = ProvenanceStore(redis, Settings())
    keys = SubjectKeys.of("bank-demo", "u-alice")
    store.remember(keys, "c-1", tool="read_file", decision_id="d-1",
                   values=[Remembered("iban", ATTACKER, "", "untrusted_content")])
    assert ATTACKER not in _values(redis) and ATTACKER.lower() not in _values(redis)
    assert {key_slot(k.encode()) for k in _keys(redis)} == {key_slot(f"{keys.prefix}:timeline".encode())}
    digest = store.digest("bank-demo", "iban", ATTACKER)
    assert digest != store.digest("other-tenant", "iban", ATTACKER) and len(digest) == 32
    assert store.digest("bank-demo", "number", "10") == store.digest("bank-demo", "amount", "10")
    found = store.sources(keys, "c-1", [digest, store.digest("bank-demo", "iban", "DE89370400440532013000")])
    assert found == {digest: [Source("read_file", "", "untrusted_content", "d-1")]}
    assert store.sources(keys, "c-2", [digest]) == {} and store.sources(SubjectKeys.of("bank-demo", "u-bob"), "c-1", [digest]) == {}


def test_a_secret_of_its_own_changes_every_digest():
    first = ProvenanceStore(None, Settings())  # type: ignore[arg-type]  # digests need no Redis
    second = ProvenanceStore(None, Settings(provenance_secret="another-secret-of-at-least-32-bytes!!"))  # type: ignore[arg-type]
    assert first.digest("t", "iban", ATTACKER) != second.digest("t", "iban", ATTACKER)


def test_bounded_in_values_sources_and_time(redis, monkeypatch):
    store = ProvenanceStore(redis, Settings(provenance_max_values=10))
    keys = SubjectKeys.of("t", "u")
    clock = iter(range(10**12, 10**12 + 100))
    monkeypatch.setattr(store_module, "now_ms", lambda: next(clock))
    store.remember(keys, None, tool="t", decision_id="d-0", values=[Remembered("text", f"v{i}", f"/{i}", "l") for i in range(10)])
    store.remember(keys, None, tool="t", decision_id="d-1", values=[Remembered("text", f"v{i}", f"/{i}", "l") for i in range(10, 15)])
    digests = [store.digest("t", "text", f"v{i}") for i in range(15)]
    kept = store.sources(keys, None, digests)
    assert len(kept) == 10 and set(digests[10:]) <= set(kept)
    for n in range(store_module.MAX_SOURCES + 3):
        store.remember(keys, None, tool="t", decision_id=f"d-{n}", values=[Remembered("text", "v14", "/x", "l")])
    kept = store.sources(keys, None, [digests[14]])[digests[14]]
    assert len(kept) == store_module.MAX_SOURCES and kept[-1].decision_id == f"d-{store_module.MAX_SOURCES + 2}"
    ttl = redis.run("pttl", lambda c: [c.pttl(k) for k in _keys(redis)])
    assert all(0 < t <= 86_400_000 for t in ttl)
    later = next(clock) + 86_400_001
    monkeypatch.setattr(store_module, "now_ms", lambda: later)
    assert store.sources(keys, None, digests) == {}


BANK = ContractMetadata(
    name="history", version="1", mutating=False, risk="low", output_labels=("private_data", "untrusted_content"),
    output_fields=({"pointer": "/*/subject", "labels": ["untrusted_content"], "extract": ["iban", "url"]},
                   {"pointer": "/*/recipient", "labels": ["private_data"], "kind": "iban"}),
)


def test_a_result_is_remembered_field_by_field_under_its_marks():
    result = [{"recipient": "GB29 NWBK 6016 1331 9268 19", "amount": 10.5, "subject": f"send to {ATTACKER} at https://x.example/a"}]
    got = {(r.kind, r.key, r.pointer, r.label) for r in remembered(BANK, result).values}
    assert got == {
        ("text", "gb29 nwbk 6016 1331 9268 19", "/0/recipient", "private_data"),
        ("iban", "GB29NWBK60161331926819", "/0/recipient", "private_data"),
        ("text", f"send to {ATTACKER.lower()} at https://x.example/a", "/0/subject", "untrusted_content"),
        ("iban", ATTACKER, "/0/subject", "untrusted_content"),
        ("url", "https://x.example/a", "/0/subject", "untrusted_content"),
        ("domain", "x.example", "/0/subject", "untrusted_content"),
        # Unmarked: the whole-output labels, each its own entry.
        ("amount", "10.5", "/0/amount", "private_data"), ("amount", "10.5", "/0/amount", "untrusted_content"),
    }


def test_remember_returns_the_labels_of_the_values_it_pushed_out(redis, monkeypatch):
    store = ProvenanceStore(redis, Settings(provenance_max_values=10))
    keys = SubjectKeys.of("t", "u")
    clock = iter(range(10**12, 10**12 + 100))
    monkeypatch.setattr(store_module, "now_ms", lambda: next(clock))
    assert store.remember(keys, "c", tool="t", decision_id="d-0", values=[Remembered("text", "a", "/0", "private_data")]) == []
    assert store.remember(keys, "c", tool="t", decision_id="d-1", values=[Remembered("text", "b", "/0", "untrusted_content")]) == []
    filler = [Remembered("text", f"f{i}", f"/{i}", "z") for i in range(7)]
    assert store.remember(keys, "c", tool="t", decision_id="d-2", values=filler) == []  # 9 of 10
    pushing = [Remembered("text", "c", "/0", "x"), Remembered("text", "d", "/1", "x")]
    assert store.remember(keys, "c", tool="t", decision_id="d-3", values=pushing) == ["private_data"]
    # More than one chunk of the script's reads at once; each label once.
    flood = [Remembered("text", f"v{i}", f"/{i}", "y") for i in range(1500)]
    assert store.remember(keys, "c", tool="t", decision_id="d-4", values=flood) == ["untrusted_content", "x", "y", "z"]
    assert store.remember(keys, "other", tool="t", decision_id="d-5", values=pushing) == []
