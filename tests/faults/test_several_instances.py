"""Several gateway instances on one Redis Cluster and one PostgreSQL decision log (docs/operators.md,
the documented way to outgrow one machine): three gunicorn gateways (separate processes and
ports, one worker each) against a real 3-master Redis Cluster and a real PostgreSQL.

Concurrent retries of one key across the instances reserve it once; concurrent payments under
one budget allow exactly what fits; a rate limit holds across instances; each tenant's chain
stays linear and ``toolgate audit verify`` is ok, also after one instance was killed (SIGKILL)
mid-call, and no answered decision is missing from the log. It also measures the record
throughput of one tenant with 1 and 3 instances writing (printed; no bound asserted), so it is
``serial``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
import requests

from app.auth.dev_tokens import mint_dev_token
from app.settings import Settings
from tests.support.calls import decide_body
from tests.support.gateway import PROJECT_ROOT, GatewayProcess
from tests.support.postgres import fresh_database
from tests.support.redis_cluster import RedisClusterHarness

pytestmark = pytest.mark.serial

INSTANCES = 3
ADMIN = ("u-admin", "acme", ["admin"])
EMMA = ("emma", "bank-demo", ["account_holder"])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[RedisClusterHarness]:
    harness = RedisClusterHarness(tmp_path_factory.mktemp("cluster")).start()
    yield harness
    harness.stop()


@pytest.fixture(scope="module")
def dsn() -> str:
    return fresh_database()


@pytest.fixture(scope="module")
def instances(cluster, dsn) -> Iterator[list[GatewayProcess]]:
    env = {"TOOLGATE_REDIS_URL": cluster.url, "TOOLGATE_REDIS_CLUSTER": "true", "TOOLGATE_AUDIT_DSN": dsn,
           "TOOLGATE_REDIS_SOCKET_TIMEOUT_MS": "2000"}
    started: list[GatewayProcess] = []
    try:
        for _ in range(INSTANCES):
            started.append(GatewayProcess(env, workers=1, threads=8).start())
        yield started
    finally:
        for gateway in started:
            gateway.stop()


def _post(url: str, body: dict[str, Any], identity, key: str | None = None) -> tuple[int, dict[str, Any]]:
    sub, tenant, roles = identity
    headers = {"Authorization": f"Bearer {mint_dev_token(Settings(), sub=sub, tenant=tenant, roles=roles)}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    response = requests.post(f"{url}/v1/decide", json=body, headers=headers, timeout=30)
    return response.status_code, response.json()


def _together(calls: list) -> list:
    """Run every call at once (a barrier releases them together); their results in order."""
    barrier = threading.Barrier(len(calls))

    def run(call):
        barrier.wait(timeout=60)
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def _verify(dsn: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TOOLGATE_AUDIT_DSN": dsn, "TOOLGATE_LOG_LEVEL": "ERROR"}
    return subprocess.run([sys.executable, "-m", "app.cli", "audit", "verify"], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def _chains_linear(dsn: str) -> None:
    """Each tenant's seq runs 1..n without a gap or a repeat."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT tenant, array_agg(seq ORDER BY seq) FROM decision_records GROUP BY tenant").fetchall()
    assert rows
    for tenant, seqs in rows:
        assert seqs == list(range(1, len(seqs) + 1)), tenant


def test_retries_of_one_key_across_instances_reserve_it_once(instances) -> None:
    key = uuid.uuid4().hex
    body = decide_body("processPayment", {"amount": 10, "currency": "EUR", "recipient": "acct_42"})
    results = _together([lambda g=g: _post(g.url, body, ADMIN, key) for g in instances for _ in range(6)])
    reserved = [b for s, b in results if s == 200 and b["idempotency"]["state"] == "reserved"]
    assert len(reserved) == 1, results
    assert all(s == 409 or b["idempotency"]["state"] == "replayed" for s, b in results if b not in reserved)


def test_payments_across_instances_allow_exactly_the_budget(instances) -> None:
    """60 payments of 1,000 EUR at once, 20 per instance, under the 50,000 daily budget."""
    body = {"currency": "EUR", "recipient": "acct_42", "amount": 1000}
    subject = ("u-payer", "acme", ["admin"])
    results = _together([lambda g=g: _post(g.url, decide_body("processPayment", body), subject, uuid.uuid4().hex)
                         for g in instances for _ in range(20)])
    decisions = [b["decision"] for _, b in results]
    assert decisions.count("allow") == 50, decisions
    assert set(decisions) == {"allow", "deny"}


def test_a_rate_limit_holds_across_instances(instances) -> None:
    """send_money: 30 a minute for a subject (policy data), a slot every 2 s after the burst."""
    money = {"amount": 1, "subject": "tip", "date": "2026-12-01", "recipient": "GB29NWBK60161331926819"}
    started = time.monotonic()
    results = _together([lambda g=g: _post(g.url, decide_body("send_money", money), EMMA, uuid.uuid4().hex)
                         for g in instances for _ in range(15)])
    elapsed = time.monotonic() - started
    allowed = [b for s, b in results if s == 200]
    assert 30 <= len(allowed) <= 30 + int(elapsed / 2) + 1, (len(allowed), elapsed)
    assert all(s == 429 and b["error"]["code"] == "RATE_LIMITED" for s, b in results if s != 200)


def test_per_tenant_record_throughput_with_1_and_3_writers(instances, dsn) -> None:
    """Not a bound: the figures for docs/operators.md (12 client threads). One tenant through 1
    and 3 instances, then 3 tenants through 3 instances: the same total for both says the
    machine, not the tenant's head row, is what bounds it."""
    def rate(gateways: list[GatewayProcess], tenants: tuple[str, ...] = ("acme",), calls: int = 90) -> float:
        body = decide_body("readFile", {"path": "/srv/reports/q1.csv"})
        started = time.monotonic()
        with ThreadPoolExecutor(12) as pool:
            statuses = list(pool.map(
                lambda n: _post(gateways[n % len(gateways)].url, body, ("u-rate", tenants[n % len(tenants)], ["support_agent"]))[0],
                range(calls)))
        assert statuses == [200] * calls
        return calls / (time.monotonic() - started)

    rate(instances)  # warm every instance's engine
    one, three = rate(instances[:1]), rate(instances)
    spread = rate(instances, ("acme", "globex", "initech"))
    print(f"\nrecords/s on PostgreSQL: one tenant, 1 writer {one:.0f}, {INSTANCES} writers {three:.0f}; "
          f"3 tenants, {INSTANCES} writers {spread:.0f}")


def test_an_instance_killed_mid_call_loses_no_answered_record(instances, dsn) -> None:
    """Calls run on every instance while one is killed: every decision a caller got is in the
    log, each chain stays linear, and audit verify is ok."""
    answered: list[str] = []
    failures: list[str] = []
    stop = threading.Event()
    body = decide_body("readFile", {"path": "/srv/reports/q1.csv"})

    def caller(gateway: GatewayProcess, subject: str) -> None:
        while not stop.is_set():
            try:
                status, answer = _post(gateway.url, body, (subject, "acme", ["support_agent"]))
            except requests.RequestException as exc:
                failures.append(type(exc).__name__)
                time.sleep(0.05)
                continue
            if status == 200:
                answered.append(answer["decision_id"])

    threads = [threading.Thread(target=caller, args=(g, f"u-kill-{n}")) for n, g in enumerate(instances) for _ in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(2)
    victim = instances[-1]
    for pid in [*victim.worker_pids(), victim.master_pid]:
        os.kill(pid, signal.SIGKILL)
    time.sleep(2)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    assert answered and failures  # calls were answered, and some went to the killed instance
    with psycopg.connect(dsn) as conn:
        recorded = {row[0] for row in conn.execute("SELECT decision_id FROM decision_records")}
    assert set(answered) <= recorded
    _chains_linear(dsn)
    verified = _verify(dsn)
    assert verified.returncode == 0, verified.stdout + verified.stderr
