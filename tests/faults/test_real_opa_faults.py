"""Faults of a real ``opa run --server`` sidecar, produced for real: the process killed, stopped
with SIGSTOP (it hangs), restarted under load, and a bundle that fails to compile, at start or
in a reload through OPA's own bundle polling. Every fault ends in deny or 503, never allow."""

from __future__ import annotations

import shutil
import threading
import time
import uuid

import pytest

from app.policy.bundle import read_directory
from app.policy.bundle_server import BundleCache, make_server
from tests.conftest import POLICY_DIR
from tests.support.calls import auth, decide_body
from tests.support.errors import assert_error
from tests.support.opa_process import OpaProcess, write_bundle
from tests.support.servers import free_port

# Every fault is bounded in wall-clock seconds (latencies against the deadline, a restart under load).
pytestmark = pytest.mark.serial

ALLOWED = decide_body("readFile", {"path": "/srv/reports/q1.csv"})
DENIED = decide_body("processPayment", {"amount": 50, "currency": "EUR", "recipient": "acct_42"})


def _post(client, body=ALLOWED):
    # A fresh token per call: one minted at import time expires before a long suite gets here.
    headers = {**auth(roles=["support_agent"]), "Idempotency-Key": f"k-{uuid.uuid4().hex}"}
    started = time.monotonic()
    resp = client.post("/v1/decide", json=body, headers=headers)
    return resp, time.monotonic() - started


@pytest.fixture
def opa(tmp_path):
    server = OpaProcess(tmp_path, bundle=write_bundle(POLICY_DIR, tmp_path / "toolgate.tar.gz")).start()
    yield server
    server.stop()


@pytest.fixture
def sidecar(make_app, opa):
    return make_app(engine="opa", opa_url=opa.url).test_client()


def test_killed_sidecar_is_503_within_the_deadline(sidecar, opa):
    assert _post(sidecar)[0].get_json()["decision"] == "allow"
    opa.kill()
    resp, latency = _post(sidecar)
    assert_error(resp, 503, "DEPENDENCY_UNAVAILABLE", retryable=True)
    assert resp.get_json()["error"] == {"code": "DEPENDENCY_UNAVAILABLE", "message": "policy engine is unavailable",
                                        "retryable": True, "retry_after_seconds": 1}
    assert resp.headers["Retry-After"] == "1"
    assert latency < 2.3
    assert sidecar.get("/readyz").status_code == 503


def test_stopped_sidecar_is_503_and_the_deadline_bounds_the_call(make_app, opa):
    """SIGSTOP: the kernel still accepts connections, nothing answers; read timeouts of 250 ms
    per attempt and the 1 s deadline bound the call, and nothing is allowed."""
    client = make_app(engine="opa", opa_url=opa.url, opa_deadline_ms=1000, opa_read_timeout_ms=250).test_client()
    assert _post(client)[0].status_code == 200  # a kept-alive connection exists before the hang
    opa.pause()
    try:
        for body in (ALLOWED, DENIED):
            resp, latency = _post(client, body)
            assert_error(resp, 503, "DEPENDENCY_UNAVAILABLE", retryable=True)
            assert latency < 1.3
    finally:
        opa.resume()
    assert _post(client)[0].get_json()["decision"] == "allow"


def test_restart_under_load_never_allows_what_is_denied(make_app, opa):
    """One attempt per call, so that the calls during the restart fail (with retries they are
    bridged: the restart takes less than the 2 s deadline)."""
    client = make_app(engine="opa", opa_url=opa.url, opa_max_attempts=1).test_client()
    outcomes: list[tuple[str, int, str | None]] = []
    stop = threading.Event()

    def load(kind: str, body: dict) -> None:
        while not stop.is_set():
            resp, _ = _post(client, body)
            outcomes.append((kind, resp.status_code, (resp.get_json() or {}).get("decision")))

    threads = [threading.Thread(target=load, args=args) for args in (("allowed", ALLOWED), ("denied", DENIED)) * 2]
    for t in threads:
        t.start()
    time.sleep(0.5)
    opa.restart()
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(10)
    kinds = {(kind, status, decision) for kind, status, decision in outcomes}
    assert kinds <= {("allowed", 200, "allow"), ("allowed", 503, None), ("denied", 200, "deny"), ("denied", 503, None)}
    assert ("allowed", 200, "allow") in kinds and ("denied", 200, "deny") in kinds
    assert any(status == 503 for _, status, _ in outcomes), "the restart was seen by the load"
    assert _post(client)[0].get_json()["decision"] == "allow"


def test_a_bundle_that_does_not_compile_stops_opa_and_the_gateway_answers_503(make_app, tmp_path):
    broken = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, broken)
    (broken / "toolgate" / "decision.rego").write_text("package toolgate\n\ndecision := {\n")
    server = OpaProcess(tmp_path / "opa", bundle=write_bundle(broken, tmp_path / "broken.tar.gz"))
    with pytest.raises(RuntimeError, match="rego_parse_error"):
        server.start(timeout_s=15)
    client = make_app(engine="opa", opa_url=server.url).test_client()
    assert_error(_post(client)[0], 503, "DEPENDENCY_UNAVAILABLE", retryable=True)
    assert client.get("/readyz").status_code == 503


def test_a_broken_bundle_polled_by_opa_keeps_the_last_good_one(make_app, tmp_path):
    """OPA polls the development bundle service; a broken edit is refused by OPA itself, which
    keeps the active revision, and /readyz reports the sidecar's failing bundle."""
    policies = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, policies)
    bundles = make_server(BundleCache(policies), "toolgate", "127.0.0.1", free_port())
    threading.Thread(target=bundles.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    host, port = bundles.server_address[:2]
    config = {
        "services": {"bundles": {"url": f"http://{host}:{port}"}},
        "bundles": {"toolgate": {"service": "bundles", "resource": "/bundles/toolgate.tar.gz",
                                 "polling": {"min_delay_seconds": 1, "max_delay_seconds": 1}}},
        "status": {"console": True},
    }
    opa = OpaProcess(tmp_path / "opa", config=config).start()
    try:
        client = make_app(engine="opa", opa_url=opa.url).test_client()
        good = read_directory(policies).revision
        first = _post(client)[0].get_json()
        assert (first["decision"], first["policy_revision"]) == ("allow", good)
        (policies / "tools" / "files" / "files.rego").write_text('package tools.files\n\nallow contains {"rule": "read_anywhere", "message": "any path"} if {\n')
        deadline = time.monotonic() + 10
        sidecar = {}
        while time.monotonic() < deadline:
            sidecar = client.get("/readyz").get_json()["details"]["policy_engine"]["sidecar"]
            if (sidecar.get("bundle") or {}).get("failing"):
                break
            time.sleep(0.2)
        assert sidecar["bundle"]["failing"] is True
        assert sidecar["bundle"]["active_revision"] == good
        after = _post(client)[0].get_json()
        assert (after["decision"], after["policy_revision"]) == ("allow", good)
    finally:
        opa.stop()
        bundles.shutdown()
        bundles.server_close()
