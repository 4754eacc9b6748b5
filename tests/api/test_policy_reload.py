"""Hot reload of the embedded engine: a changed rule file decides the next call within the poll
interval, without a restart; a broken edit changes nothing but the reported refusal. Through
the app in-process, through a real gunicorn gateway with two workers, and from a bundle file
and a bundle URL (ETag)."""

from __future__ import annotations

import json
import shutil
import threading
import time

import pytest
import requests

from app.auth.dev_tokens import mint_dev_token
from app.engine.sources import BundleUrlSource
from app.policy.bundle import read_directory
from app.policy.bundle_server import BundleCache, make_server
from app.settings import Settings
from tests.conftest import POLICY_DIR
from tests.support.calls import auth, decide_body
from tests.support.errors import assert_error
from tests.support.gateway import GatewayProcess
from tests.support.opa_process import write_bundle
from tests.support.servers import free_port

READ = decide_body("readFile", {"path": "/srv/reports/q1.csv"})
# A rule of the library's form whose body is never closed: a parse error at the end of the file (line 4).
BROKEN_RULE = 'package tools.files\n\nallow contains {"rule": "read_anywhere", "message": "any path"} if {\n'


@pytest.fixture
def policies(tmp_path):
    copy = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, copy)
    return copy


def _revoke_read_file(policy_dir):
    """Take readFile away from support_agent in data.json (a real policy change)."""
    path = policy_dir / "data.json"
    data = json.loads(path.read_text())
    data["roles"]["support_agent"]["tools"].remove("readFile")
    path.write_text(json.dumps(data, indent=2))


def _decide(client):
    resp = client.post("/v1/decide", json=READ, headers=auth(roles=["support_agent"]))
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


#: How long a test waits for a reload it only needs to happen (no latency is asserted): generous,
#: so that a machine busy with other work does not fail it. The latency bound has its own test.
RELOAD_WAIT_S = 15.0


def _wait_for(predicate, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return predicate()


@pytest.mark.serial  # the reload must decide within 1 s of the edit
def test_a_changed_rule_decides_the_next_call_and_a_broken_edit_is_refused(make_app, policies):
    app = make_app(policy_dir=policies, policy_poll_interval_s=0.2)
    client = app.test_client()
    first = _decide(client)
    assert first["decision"] == "allow" and first["policy_revision"] == read_directory(POLICY_DIR).revision

    _revoke_read_file(policies)
    changed = read_directory(policies).revision
    started = time.monotonic()
    after = _wait_for(lambda: (d := _decide(client))["policy_revision"] == changed and d, 2.0)
    assert after and after["decision"] == "deny" and time.monotonic() - started < 1.0

    (policies / "tools" / "files" / "files.rego").write_text(BROKEN_RULE)
    engine = app.extensions["toolgate"].engine
    refusal = _wait_for(lambda: engine.status()["last_refusal"], RELOAD_WAIT_S)
    assert refusal["kind"] == "compile" and "files.rego" in refusal["detail"]
    assert refusal["revision"] == read_directory(policies).revision
    kept = _decide(client)
    assert (kept["decision"], kept["policy_revision"]) == ("deny", changed)

    ready = client.get("/readyz")
    assert ready.status_code == 200
    details = ready.get_json()["details"]["policy_engine"]
    assert details["revision"] == changed and details["last_refusal"]["kind"] == "compile"
    assert "detail" not in details["last_refusal"]  # operator-only, in /v1/policy/status
    from prometheus_client import REGISTRY

    assert REGISTRY.get_sample_value("toolgate_policy_reload_refusals_total", {"kind": "compile"}) >= 1


def test_every_thread_evaluates_one_whole_revision(make_app, policies):
    """Evaluations racing a swap: each decision is the one of the revision it names."""
    app = make_app(policy_dir=policies, policy_poll_interval_s=0.05)
    engine = app.extensions["toolgate"].engine
    old = read_directory(policies).revision
    seen: list[tuple[str, str]] = []
    stop = threading.Event()
    policy_input = {
        "subject": {"id": "u-1", "tenant": "acme", "roles": ["support_agent"]},
        "tool": {"name": "readFile", "version": "1", "registered": True, "mutating": False, "risk": "low"},
        "call": {"id": "c", "input": {"path": "/srv/reports/q1.csv"}}, "context": {}, "history": {},
        "approval": None, "request": {"id": "r", "time": "2026-01-01T00:00:00Z"},
    }

    def run():
        while not stop.is_set():
            decision = engine.evaluate(policy_input)
            seen.append((decision.policy_revision, decision.decision))

    threads = [threading.Thread(target=run, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.2)
        _revoke_read_file(policies)
        new = read_directory(policies).revision
        assert _wait_for(lambda: any(rev == new for rev, _ in seen[-20:]), RELOAD_WAIT_S)
    finally:
        stop.set()
        for t in threads:
            t.join(5)
    assert set(seen) == {(old, "allow"), (new, "deny")}


def test_a_bundle_file_is_reloaded_when_replaced(make_app, policies, tmp_path):
    bundle = write_bundle(policies, tmp_path / "bundle.tar.gz")
    client = make_app(policy_bundle=str(bundle), policy_poll_interval_s=0.2).test_client()
    assert _decide(client)["decision"] == "allow"
    _revoke_read_file(policies)
    write_bundle(policies, tmp_path / "next.tar.gz").replace(bundle)
    assert _wait_for(lambda: _decide(client)["decision"] == "deny", RELOAD_WAIT_S)


def test_a_bundle_url_is_polled_with_etags(make_app, policies):
    server = make_server(BundleCache(policies), "toolgate", "127.0.0.1", free_port())
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/bundles/toolgate.tar.gz"
    try:
        first = requests.get(url, timeout=5)
        assert first.status_code == 200 and first.headers["ETag"] == f'"{read_directory(policies).revision}"'
        assert requests.get(url, headers={"If-None-Match": first.headers["ETag"]}, timeout=5).status_code == 304
        source = BundleUrlSource(url, timeout_s=2, max_bytes=1 << 20)
        assert source.fetch() is not None and source.fetch() is None  # the second poll is a 304

        client = make_app(policy_bundle=url, policy_poll_interval_s=0.2).test_client()
        assert _decide(client)["decision"] == "allow"
        _revoke_read_file(policies)
        assert _wait_for(lambda: _decide(client)["decision"] == "deny", RELOAD_WAIT_S)
    finally:
        server.shutdown()
        server.server_close()


def test_an_unreachable_bundle_url_is_503_and_never_allows(make_app):
    client = make_app(policy_bundle=f"http://127.0.0.1:{free_port()}/bundles/toolgate.tar.gz").test_client()
    resp = client.post("/v1/decide", json=READ, headers=auth(roles=["support_agent"]))
    assert_error(resp, 503, "DEPENDENCY_UNAVAILABLE", retryable=True)
    assert client.get("/readyz").get_json()["details"]["policy_engine"]["last_refusal"]["kind"] == "unavailable"


def _dev_token(**kw):
    return mint_dev_token(Settings(), sub="u-1", tenant="acme", ttl_s=600, **kw)


@pytest.mark.serial  # every worker must have reloaded 1 s after the edit
def test_a_running_gateway_reloads_in_every_worker(policies, tmp_path, redis_server):
    gateway = GatewayProcess({
        "TOOLGATE_POLICY_DIR": str(policies), "TOOLGATE_POLICY_POLL_INTERVAL_S": "0.5",
        "TOOLGATE_REDIS_URL": redis_server.url, "TOOLGATE_AUDIT_DSN": str(tmp_path / "decisions.sqlite"),
    }).start()
    agent = {"Authorization": f"Bearer {_dev_token(roles=['support_agent'])}"}
    operator = {"Authorization": f"Bearer {_dev_token(roles=['operator'])}"}

    def decisions(n=16):
        out = set()
        for _ in range(n):  # fresh connections, spread over both workers by SO_REUSEPORT
            resp = requests.post(gateway.url + "/v1/decide", json=READ, headers={**agent, "Connection": "close"}, timeout=5)
            out.add((resp.json()["decision"], resp.json()["policy_revision"]))
        return out

    try:
        assert decisions() == {("allow", read_directory(POLICY_DIR).revision)}
        _revoke_read_file(policies)
        changed = read_directory(policies).revision
        time.sleep(1.0)  # the poll interval, twice
        assert decisions() == {("deny", changed)}

        (policies / "tools" / "files" / "files.rego").write_text(BROKEN_RULE)
        time.sleep(1.0)
        assert decisions() == {("deny", changed)}
        status = requests.get(gateway.url + "/v1/policy/status", headers=operator, timeout=5).json()
        workers = status["workers"]
        assert len(workers) == 2 and {w["revision"] for w in workers} == {changed}
        assert {w["last_refusal"]["kind"] for w in workers} == {"compile"}
        assert_error(requests.get(gateway.url + "/v1/policy/status", headers=agent, timeout=5), 403, "FORBIDDEN",
                     retryable=False)
        assert_error(requests.get(gateway.url + "/v1/policy/status", timeout=5), 401, "UNAUTHENTICATED", retryable=False)
    finally:
        gateway.stop()


def test_serve_refuses_policies_that_do_not_compile(policies, tmp_path, redis_server):
    (policies / "tools" / "files" / "files.rego").write_text(BROKEN_RULE)
    gateway = GatewayProcess({
        "TOOLGATE_POLICY_DIR": str(policies), "TOOLGATE_REDIS_URL": redis_server.url,
        "TOOLGATE_AUDIT_DSN": str(tmp_path / "decisions.sqlite"),
    })
    with pytest.raises(RuntimeError) as failed:
        gateway.start(timeout_s=30)
    assert gateway.proc is None and gateway.returncode == 1  # exited by itself, then stopped
    message = str(failed.value)
    assert "not starting" in message and "files.rego:4: rego_parse_error" in message


def test_toolgate_serve_exits_1_with_the_compile_error(policies, tmp_path, redis_server):
    import os
    import subprocess
    import sys

    (policies / "tools" / "files" / "files.rego").write_text(BROKEN_RULE)
    env = {**os.environ, "TOOLGATE_POLICY_DIR": str(policies), "TOOLGATE_REDIS_URL": redis_server.url,
           "TOOLGATE_AUDIT_DSN": str(tmp_path / "d.sqlite"), "TOOLGATE_BIND": f"127.0.0.1:{free_port()}"}
    done = subprocess.run([sys.executable, "-m", "app.cli", "serve"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert "files.rego:4: rego_parse_error" in done.stderr and "not starting" in done.stderr
