"""scripts/serve.sh and scripts/stop.sh as an operator runs them, on free loopback ports with
their state in a temporary SERVE_STATE_DIR: a local Redis on the port TOOLGATE_REDIS_URL
names, the real OPA sidecar serving the bundle of TOOLGATE_POLICY_DIR (TOOLGATE_ENGINE=opa, a
copy of policies/ that differs from it), nginx in front of gunicorn, pidfiles, the gateway's log
file, the proxy and the sidecar stopped with the gateway, and ``serve.sh stop`` stopping what is
left."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import redis
import requests

from app.auth.dev_tokens import mint_dev_token
from app.policy.bundle import read_directory
from app.settings import Settings
from tests.conftest import POLICY_DIR, PROJECT_ROOT
from tests.support.servers import free_port


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def _ready(url: str) -> bool:
    try:
        return requests.get(url + "/readyz", timeout=1).status_code == 200
    except requests.RequestException:
        return False


def test_serve_with_the_opa_engine_then_stop(tmp_path):
    ports = {name: free_port() for name in ("proxy", "gateway", "redis", "opa", "bundles")}
    state = tmp_path / "state"
    policies = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, policies)
    with (policies / "toolgate" / "catalog.rego").open("a") as rego:
        rego.write("\n# a copy of the shipped policies with a revision of its own\n")
    revision = read_directory(policies).revision
    assert revision != read_directory(POLICY_DIR).revision
    env = {
        **os.environ,
        "TOOLGATE_ENGINE": "opa",
        "TOOLGATE_BIND": f"127.0.0.1:{ports['gateway']}",
        "TOOLGATE_PROXY_LISTEN": f"127.0.0.1:{ports['proxy']}",
        "TOOLGATE_REDIS_URL": f"redis://127.0.0.1:{ports['redis']}/0",
        "TOOLGATE_OPA_URL": f"http://127.0.0.1:{ports['opa']}",
        "TOOLGATE_AUDIT_DSN": str(tmp_path / "decisions.sqlite"),
        "TOOLGATE_LOG_LEVEL": "WARNING",
        "SERVE_BUNDLE_BIND": f"127.0.0.1:{ports['bundles']}",
        "SERVE_STATE_DIR": str(state),
        "TOOLGATE_POLICY_DIR": str(policies),
    }
    url = f"http://127.0.0.1:{ports['proxy']}"  # the public address: nginx in front of gunicorn
    serve = subprocess.Popen(["bash", "scripts/serve.sh"], cwd=PROJECT_ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pids: dict[str, int] = {}
    try:
        assert _wait(lambda: _ready(url), 90), "the gateway did not become ready"
        for name in ("gateway", "proxy", "opa", "bundle-server", "redis"):
            pids[name] = int((state / "run" / f"{name}.pid").read_text())
            assert _alive(pids[name]), name
        assert redis.Redis(port=ports["redis"]).ping()
        health = requests.get(f"http://127.0.0.1:{ports['opa']}/health?bundles", timeout=2)
        assert health.status_code == 200
        token = mint_dev_token(Settings(), sub="u-1", tenant="acme", roles=["support_agent"])
        resp = requests.post(url + "/v1/decide", headers={"Authorization": f"Bearer {token}"}, timeout=5,
                             json={"tool": "readFile", "input": {"path": "/srv/reports/q1.csv"}})
        assert resp.json()["decision"] == "allow"
        assert resp.json()["policy_revision"] == revision
        details = requests.get(url + "/readyz", timeout=5).json()["details"]["policy_engine"]
        assert details["sidecar"]["bundle"]["active_revision"] == revision
        assert details["configured_revision"] == revision and details["serves_configured_revision"] is True
        assert "development mode: accepting HS256 tokens" in (state / "log" / "gateway.log").read_text()

        os.kill(pids["gateway"], signal.SIGTERM)  # stopping the gateway stops the sidecar it started
        serve.wait(timeout=30)
        assert _wait(lambda: not any(_alive(pids[n]) for n in ("opa", "bundle-server", "proxy")), 10)
        assert not (state / "run" / "opa.pid").exists()
        assert _alive(pids["redis"]), "Redis stays for the next run"

        stop_env = {**env}
        stopped = subprocess.run(["bash", "scripts/serve.sh", "stop"], cwd=PROJECT_ROOT, env=stop_env,
                                 capture_output=True, text=True, timeout=30, check=False)
        assert stopped.returncode == 0, stopped.stderr
        assert f"stopped redis (pid {pids['redis']})" in stopped.stdout
        assert _wait(lambda: not _alive(pids["redis"]), 10)
    finally:
        if serve.poll() is None:
            serve.terminate()
            serve.wait(timeout=30)
        if serve.stdout:
            serve.stdout.close()
        for pid in pids.values():
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
