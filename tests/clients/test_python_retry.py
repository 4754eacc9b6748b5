"""The client's retry rules against real failures.

The 503s come from a real gateway whose own Redis is stopped: mutating calls then get
``503 DEPENDENCY_UNAVAILABLE`` with ``Retry-After: 1`` before the policy is asked, exactly as
in production, so no stand-in server is needed; the gateway's ``/metrics`` and decision log
count what reached it. That gateway has a 2 s idempotency lease, so a call in flight answers
``409`` with ``Retry-After: 2``. Transport failures use a closed loopback port and a loopback
socket that accepts connections but never answers.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from toolgate_client import (
    Conflict,
    DependencyUnavailable,
    RetryEvent,
    RetryPolicy,
    ToolgateClient,
    TransportError,
)

from tests.clients.gateway import ClientGateway, token_for
from tests.support.idempotency import ticket, ticket_input
from tests.support.servers import RedisServer, free_port

# Every call is timed against its retry deadline (a 16-client storm on a 2-worker gateway).
pytestmark = pytest.mark.serial

STORM_CLIENTS = 16
STORM = RetryPolicy(max_attempts=10, deadline_s=3.5, base_delay_s=0.05, max_delay_s=0.5)


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("outage-redis")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def outage_gateway(tmp_path_factory, own_redis, jwks_server) -> Iterator[ClientGateway]:
    gw = ClientGateway(redis_url=own_redis.url, jwks_url=jwks_server.jwks_url,
                       workdir=tmp_path_factory.mktemp("outage-gateway"), workers=2,
                       env={"TOOLGATE_IDEMPOTENCY_LEASE_S": "2"}).start()
    yield gw
    gw.stop()


@pytest.fixture
def redis_down(own_redis: RedisServer) -> Iterator[RedisServer]:
    """The gateway's Redis stopped for the test, started again (empty) afterwards."""
    own_redis.stop()
    yield own_redis
    if own_redis.proc is None:
        own_redis.start()


class Recorder:
    """Collects the client's ``RetryEvent``s."""

    def __init__(self) -> None:
        self.events: list[RetryEvent] = []

    def __call__(self, event: RetryEvent) -> None:
        self.events.append(event)


def _client(gateway: ClientGateway, name: str, policy: RetryPolicy, recorder: Recorder | None = None) -> ToolgateClient:
    return ToolgateClient(gateway.url, token_for(name), retry=policy, on_retry=recorder)


def test_retry_storm_against_503_stays_inside_the_deadline(outage_gateway, redis_down, capsys):
    """16 clients at once, Redis gone: each retries after Retry-After (never sooner), stops
    when the next retry could not finish by its 3.5 s deadline, and every attempt carried the
    call's one Idempotency-Key."""
    before = outage_gateway.errors_total("DEPENDENCY_UNAVAILABLE")
    results: list[dict[str, Any]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(STORM_CLIENTS)

    def one_client() -> None:
        recorder = Recorder()
        call = ticket_input()
        with _client(outage_gateway, "agent", STORM, recorder) as client:
            barrier.wait()
            started = time.monotonic()
            try:
                client.decide("createTicket", call, idempotency_key=call["clientMutationId"])
                outcome: Any = "no error"
            except DependencyUnavailable as exc:
                outcome = exc
            elapsed = time.monotonic() - started
        with lock:
            results.append({"key": call["clientMutationId"], "outcome": outcome, "elapsed": elapsed,
                            "events": recorder.events})

    threads = [threading.Thread(target=one_client) for _ in range(STORM_CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    attempts = []
    for result in results:
        error = result["outcome"]
        assert isinstance(error, DependencyUnavailable), error
        assert error.status == 503 and error.retryable and error.retry_after_s == 1.0
        assert error.attempts == 1 + len(result["events"])
        assert all(event.delay_s >= 1.0 for event in result["events"]), "Retry-After undercut"
        assert result["elapsed"] < STORM.deadline_s
        attempts.append(error.attempts)
    sent = outage_gateway.errors_total("DEPENDENCY_UNAVAILABLE") - before
    assert sent == sum(attempts)
    assert min(attempts) >= 3  # attempts at about 0, 1, 2 (and 3) s fit in 3.5 s

    redis_down.start()
    with _client(outage_gateway, "auditor", STORM) as auditor:
        for result in results:
            recorded = list(auditor.iter_decisions(idempotency_key=result["key"]))
            assert len(recorded) == result["outcome"].attempts
            assert {r.error_code for r in recorded} == {"DEPENDENCY_UNAVAILABLE"}

    with capsys.disabled():
        print(f"\nretry storm: {STORM_CLIENTS} clients, attempts per client {sorted(attempts)}, "
              f"503s counted by the gateway {int(sent)}, longest call {max(r['elapsed'] for r in results):.2f} s "
              f"of a {STORM.deadline_s} s deadline")


def test_no_retry_is_started_that_cannot_finish_before_the_deadline(outage_gateway, redis_down):
    policy = RetryPolicy(max_attempts=10, deadline_s=0.8)
    with _client(outage_gateway, "agent", policy) as client:
        started = time.monotonic()
        with pytest.raises(DependencyUnavailable) as caught:
            client.decide("createTicket", ticket_input())
        elapsed = time.monotonic() - started
    assert caught.value.attempts == 1 and elapsed < 0.5  # gave up at once instead of sleeping 1 s


def test_outage_then_recovery_reserves_once(outage_gateway, redis_down):
    recorder = Recorder()
    policy = RetryPolicy(max_attempts=10, deadline_s=8.0, base_delay_s=0.05)
    restart = threading.Timer(1.5, redis_down.start)
    restart.start()
    call = ticket_input()
    with _client(outage_gateway, "agent", policy, recorder) as client:
        started = time.monotonic()
        decision = client.decide("createTicket", call)
        elapsed = time.monotonic() - started
        restart.join()
        assert decision.idempotency is not None and decision.idempotency.state == "reserved"
        assert len(recorder.events) >= 1 and elapsed < policy.deadline_s
        assert all(isinstance(e.error, DependencyUnavailable) for e in recorder.events)
        client.complete(call["clientMutationId"], ticket(), reservation_token=decision.idempotency.reservation_token)
        replay = client.decide("createTicket", call)
    assert replay.idempotency is not None and replay.idempotency.state == "replayed"


def test_in_flight_conflict_waits_for_retry_after_then_gets_the_replay(outage_gateway):
    call = ticket_input()
    key = call["clientMutationId"]
    with _client(outage_gateway, "agent", RetryPolicy()) as owner:
        reserved = owner.decide("createTicket", call)
        assert reserved.idempotency is not None and reserved.idempotency.state == "reserved"

        with _client(outage_gateway, "agent", RetryPolicy(max_attempts=5, deadline_s=1.0)) as impatient:
            started = time.monotonic()
            with pytest.raises(Conflict) as caught:
                impatient.decide("createTicket", call)
            assert caught.value.status == 409 and caught.value.retryable and caught.value.retry_after_s in (1.0, 2.0)
            assert caught.value.attempts == 1 and time.monotonic() - started < 0.5

        recorder = Recorder()
        finish = threading.Timer(0.3, lambda: owner.complete(key, ticket("T-5"),
                                                             reservation_token=reserved.idempotency.reservation_token))
        finish.start()
        with _client(outage_gateway, "agent", RetryPolicy(max_attempts=5, deadline_s=6.0), recorder) as patient:
            started = time.monotonic()
            replay = patient.decide("createTicket", call)
            waited = time.monotonic() - started
        finish.join()
    assert replay.idempotency is not None and replay.idempotency.result == ticket("T-5")
    assert len(recorder.events) == 1
    event = recorder.events[0]
    assert isinstance(event.error, Conflict) and event.error.retry_after_s in (1.0, 2.0)
    assert event.delay_s >= event.error.retry_after_s and waited >= event.delay_s  # Retry-After never undercut


def test_many_threads_one_key_run_the_tool_once(outage_gateway):
    """20 threads call one guarded tool with one key at once: one runs it; the others get 409
    in flight, wait for Retry-After and get the replay."""
    runs: list[int] = []
    results: list[Any] = []
    lock = threading.Lock()
    call = ticket_input()
    barrier = threading.Barrier(20)

    def create(tool_input: dict[str, Any]) -> dict[str, Any]:
        with lock:
            runs.append(1)
        return ticket("T-99")

    def one() -> None:
        with _client(outage_gateway, "agent", RetryPolicy(max_attempts=5, deadline_s=10.0)) as client:
            guarded = client.guarded(create, tool="createTicket")
            barrier.wait()
            result = guarded(call)
        with lock:
            results.append(result)

    threads = [threading.Thread(target=one) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [ticket("T-99")] * 20
    assert len(runs) == 1


def test_connection_refused_is_retried_with_backoff_up_to_the_cap():
    recorder = Recorder()
    policy = RetryPolicy(max_attempts=4, deadline_s=5.0, base_delay_s=0.05, max_delay_s=0.2)
    with ToolgateClient(f"http://127.0.0.1:{free_port()}", "token", retry=policy, on_retry=recorder) as client:
        started = time.monotonic()
        with pytest.raises(TransportError) as caught:
            client.answer_approval("ap_" + "x" * 32, approved=True)  # not sent: safe to retry
        elapsed = time.monotonic() - started
    assert caught.value.attempts == 4 and caught.value.sent is False and elapsed < policy.deadline_s
    assert [e.attempt for e in recorder.events] == [1, 2, 3]
    for n, event in enumerate(recorder.events):
        assert 0 <= event.delay_s <= min(policy.max_delay_s, policy.base_delay_s * 2**n)


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A loopback socket that accepts connections (in the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


def test_timeout_after_sending_is_retried_only_for_idempotent_calls(silent_server):
    policy = RetryPolicy(max_attempts=3, deadline_s=3.0, base_delay_s=0.05, attempt_timeout_s=0.3)
    with ToolgateClient(f"http://127.0.0.1:{silent_server}", "token", retry=policy) as client:
        started = time.monotonic()
        with pytest.raises(TransportError) as decide_error:
            client.decide("readFile", {"path": "/srv/a"})
        elapsed = time.monotonic() - started
        with pytest.raises(TransportError) as answer_error:
            client.answer_approval("ap_" + "x" * 32, approved=True)
    assert decide_error.value.sent is True and decide_error.value.attempts == 3 and elapsed < policy.deadline_s
    assert answer_error.value.sent is True and answer_error.value.attempts == 1
