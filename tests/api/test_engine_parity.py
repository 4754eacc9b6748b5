"""One table of decision cases against both engines: the embedded engine and the OPA sidecar
over the REST Data API must give identical decisions and reasons.

The sidecar is a real ``opa run --server`` when an ``opa`` binary is on PATH; otherwise (as on
the build machines, where no OPA binary can be installed) the test server in
tests/support/opa_server.py, which serves the REST Data API from the embedded engine.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.api.test_decisions_per_tool import decide_case
from tests.conftest import POLICY_DIR
from tests.support.decision_cases import CASES
from tests.support.opa_server import OpaTestServer
from tests.support.servers import free_port, wait_for_port


def _sidecars():
    yield "test-server"
    if shutil.which("opa"):
        yield "opa-binary"


@pytest.fixture(scope="module", params=list(_sidecars()))
def sidecar_url(request):
    if request.param == "test-server":
        server = OpaTestServer(POLICY_DIR)
        yield server.start()
        server.stop()
        return
    port = free_port()
    proc = subprocess.Popen(
        ["opa", "run", "--server", f"--addr=127.0.0.1:{port}", "--bundle", str(POLICY_DIR)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_for_port(port)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


def test_both_engines_decide_identically(make_app, sidecar_url, redis_server):
    # Each engine decides against a session of its own (another Redis database): a case's call
    # under one engine must not count in the other's session (one delete per conversation).
    embedded = make_app().test_client()
    other_db = redis_server.url.rsplit("/", 1)[0] + "/1"
    sidecar = make_app(engine="opa", opa_url=sidecar_url, opa_read_timeout_ms=2000, redis_url=other_db).test_client()
    mismatches = []
    for case in CASES:
        a = decide_case(embedded, case).get_json()
        b = decide_case(sidecar, case).get_json()
        if (a["decision"], a["reasons"]) != (b["decision"], b["reasons"]) or a["decision"] != case.expected:
            mismatches.append((case.id, a["decision"], a["reasons"], b["decision"], b["reasons"]))
    assert mismatches == []
