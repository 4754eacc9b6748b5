"""The exact window semantics of a rate limit (docs/session.md "Rate limits"), against real
Redis and the real ADMIT script, on a clock the test moves: ``count`` per ``per_s`` is a GCRA
with a burst of ``count``, so one ``per_s`` window holds at most ``2 * count - 1`` calls (a
full burst, then one every ``per_s / count``), and any two windows in a row at most
``3 * count - 1``: over time the rate is ``count`` per ``per_s``."""

from __future__ import annotations

import uuid

import pytest

from app.errors import RateLimited
from app.models import RateLimitSpec
from app.redis_client import build_redis
from app.session.keys import SubjectKeys
from app.session.store import SessionStore
from app.settings import Settings

START_MS = 1_700_000_000_000


@pytest.fixture
def store(redis_server):
    connection = build_redis(Settings(redis_url=redis_server.url))
    connection.run("flush", lambda c: c.flushall())
    yield SessionStore(connection, Settings())
    connection.close()


def _admitted_at(store: SessionStore, monkeypatch, rate: RateLimitSpec, times_ms: list[int]) -> list[int]:
    """The times (ms) of the calls the rate limit let through, calls made at ``times_ms``."""
    clock = [START_MS]
    monkeypatch.setattr("app.session.store.now_ms", lambda: clock[0])
    keys, admitted = SubjectKeys("acme", "u-1"), []
    for at in times_ms:
        clock[0] = START_MS + at
        try:
            store.admit(keys, decision_id=uuid.uuid4().hex, conversation=None, rates=[rate], limits=[], commit=True)
        except RateLimited:
            continue
        admitted.append(at)
    return admitted


def _most_in_a_window(admitted: list[int], window_ms: int) -> int:
    return max(sum(1 for t in admitted if start <= t < start + window_ms) for start in admitted)


def test_the_worst_window_holds_twice_the_count_less_one(store, monkeypatch) -> None:
    """A caller that tries every 10 ms for 20 s against 10 per 5 s: 10 at once, then one
    every 500 ms; the worst 5 s window holds 19 calls, the 20 s 10 + 39 (the rate, 2 a second,
    after the burst)."""
    rate = RateLimitSpec(id="ten", scope="subject", count=10, per_s=5)
    admitted = _admitted_at(store, monkeypatch, rate, list(range(0, 20_000, 10)))
    assert admitted[:11] == [*range(0, 100, 10), 500]
    assert _most_in_a_window(admitted, 5_000) == 2 * 10 - 1
    assert _most_in_a_window(admitted, 10_000) == 3 * 10 - 1
    assert len(admitted) == 10 + 39


def test_after_a_pause_a_window_holds_at_most_the_count_at_once(store, monkeypatch) -> None:
    rate = RateLimitSpec(id="ten", scope="subject", count=10, per_s=5)
    admitted = _admitted_at(store, monkeypatch, rate, [0] * 25)
    assert admitted == [0] * 10
