"""Signed checkpoints when their sinks fail, through the real app: the decision is still made
and recorded (its record is committed; a checkpoint is evidence about records, not a
precondition of a decision), the failure is counted, and what could not be written is
written at the next flush. And a gunicorn gateway writes its last checkpoints when it stops."""

from __future__ import annotations

import json
import time
from pathlib import Path

from prometheus_client import REGISTRY

from app.audit.chain import verify_chains
from app.audit.checkpoints import CheckpointingLog, checkpoint_ring, read_checkpoints
from app.audit.sinks import read_file
from app.audit.stores import checkpoint_key, open_decision_log
from app.auth.dev_tokens import mint_dev_token
from app.settings import Settings
from tests.faults.test_audit_faults import read_only
from tests.support.calls import auth, decide_body
from tests.support.gateway import GatewayProcess

AGENT = {"roles": ["support_agent"]}


def _read(client):
    return client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/reports/q1.csv"}), headers=auth(**AGENT))


def _errors(kind: str) -> float:
    return REGISTRY.get_sample_value("toolgate_audit_checkpoints_total", {"kind": kind, "outcome": "error"}) or 0.0


def _kinds(path: Path) -> list[str]:
    return [json.loads(line.text)["type"] for line in read_file(path)]


def _verified(app, path: Path):
    deps = app.extensions["toolgate"]
    ring = checkpoint_ring(deps.settings)
    signed = read_checkpoints(read_file(path), ring.public, deps.decision_reader.log_id())
    return verify_chains(deps.decision_reader, checkpoint_key(deps.settings), signed=signed)


def test_an_unwritable_checkpoint_file_never_fails_a_decision(make_app, tmp_path):
    path = tmp_path / "checkpoints.jsonl"
    app = make_app(checkpoint_file=path)
    client = app.test_client()
    assert _read(client).status_code == 200  # the chain starts: registered
    log = app.extensions["toolgate"].decision_log
    assert isinstance(log, CheckpointingLog) and _kinds(path) == ["register"]
    app2 = make_app(checkpoint_file=path, audit_dsn=str(tmp_path / "second.sqlite"))
    before = _errors("register"), _errors("checkpoint")
    with read_only([path]):
        assert _read(client).status_code == 200
        assert _read(app2.test_client()).status_code == 200  # a new chain, its registration fails
        log.flush()
        assert (_errors("register"), _errors("checkpoint")) == (before[0] + 1, before[1] + 1)
    assert _kinds(path) == ["register"]
    log.flush()
    app2.extensions["toolgate"].decision_log.flush()
    assert _kinds(path) == ["register", "checkpoint", "register", "checkpoint"]
    report = _verified(app, path)
    assert report.ok and report.covered == 2


def test_a_redis_stream_that_is_down_leaves_the_file_and_the_decision(make_app, tmp_path, redis_client):
    path = tmp_path / "checkpoints.jsonl"
    # The stream's key holds a string, so every XADD fails while Redis itself (which each decide
    # call needs for its session, docs/session.md) answers.
    redis_client.set("toolgate:audit:checkpoints", "not a stream")
    app = make_app(checkpoint_file=path, checkpoint_redis_stream="toolgate:audit:checkpoints")
    client = app.test_client()
    before = _errors("register")
    assert _read(client).status_code == 200
    assert _errors("register") == before + 1  # the stream failed ...
    assert _kinds(path) == ["register"]  # ... the file has it
    app.extensions["toolgate"].decision_log.flush()  # tried again: the file gets it twice, verify reads it once
    assert _kinds(path) == ["register", "register", "checkpoint"]
    assert _verified(app, path).ok


def test_a_stopping_gateway_writes_its_last_checkpoints(tmp_path, redis_server):
    path = tmp_path / "checkpoints.jsonl"
    dsn = str(tmp_path / "decisions.sqlite")
    gateway = GatewayProcess({"TOOLGATE_REDIS_URL": redis_server.url, "TOOLGATE_AUDIT_DSN": dsn,
                              "TOOLGATE_CHECKPOINT_FILE": str(path), "TOOLGATE_CHECKPOINT_INTERVAL_S": "3600"}).start()
    try:
        import requests

        token = mint_dev_token(Settings(), sub="u-1", tenant="acme", roles=["support_agent"])
        for i in range(6):
            answer = requests.post(f"{gateway.url}/v1/decide", json=decide_body("readFile", {"path": f"/srv/{i}"}),
                                   headers={"Authorization": f"Bearer {token}"}, timeout=10)
            assert answer.status_code == 200
        assert "checkpoint" not in _kinds(path)  # the interval is an hour away
    finally:
        gateway.stop()
    deadline = time.monotonic() + 5
    while "checkpoint" not in _kinds(path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _kinds(path).count("register") == 1 and "checkpoint" in _kinds(path)
    store = open_decision_log(dsn)
    settings = Settings(audit_dsn=dsn)
    try:
        signed = read_checkpoints(read_file(path), checkpoint_ring(settings).public, store.log_id())
        report = verify_chains(store, checkpoint_key(settings), signed=signed)
        assert report.ok and report.records == 6 and report.covered == 6  # every worker signed its last record
    finally:
        store.close()
