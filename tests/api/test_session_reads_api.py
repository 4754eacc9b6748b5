"""Session facts on demand through HTTP with the shipped policy, the real embedded engine and
real Redis (docs/session.md "Facts on demand"): a call of a tool whose families read no session
runs no session snapshot in Redis (watched with MONITOR), and its decision record keeps no
session; a call of a tool whose family reads the session gets the declared members only."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import redis

from app.session import scripts
from tests.support.calls import auth, decide_body

ADMIN = ("u-admin", "acme", ["admin"])
SENTINEL = "end-of-watch"


class Watch:
    """Every command Redis runs while the watch is on (a MONITOR connection on a thread)."""

    def __init__(self, url: str) -> None:
        self.url, self.commands = url, []
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        client = redis.Redis.from_url(self.url, socket_timeout=10)
        with client.monitor() as monitor:
            self._ready.set()
            for command in monitor.listen():
                if SENTINEL in command["command"]:
                    break
                self.commands.append(command["command"])
        client.close()

    def __enter__(self) -> Watch:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        redis.Redis.from_url(self.url).echo(SENTINEL)
        self._thread.join(10)

    def ran(self, script: Any) -> int:
        return sum(command.startswith(f"EVALSHA {script.sha}") for command in self.commands)


def decide(client, tool: str, tool_input: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    headers = auth(*ADMIN) | ({"Idempotency-Key": key} if key else {})
    body = decide_body(tool, tool_input, context={"conversation_id": "c-reads"})
    resp = client.post("/v1/decide", json=body, headers=headers)
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def test_a_tool_whose_families_read_no_session_runs_no_snapshot(client, redis_server, redis_client):
    client.get("/healthz")
    with Watch(redis_server.url) as watch:
        for _ in range(3):
            decide(client, "exportReport", {"start_date": "2026-01-01", "end_date": "2026-03-31"})
    assert watch.ran(scripts.SNAPSHOT) == 0
    assert watch.ran(scripts.NOTE) == 3  # the calls still join the session
    with Watch(redis_server.url) as watch:
        deleted = decide(client, "deleteFile", {"path": "/srv/tmp/old.log"}, key=uuid.uuid4().hex)
    assert deleted["decision"] == "allow"
    assert watch.ran(scripts.SNAPSHOT) == 1


def test_the_policy_input_holds_the_declared_members_only(client, redis_client):
    decide(client, "exportReport", {"start_date": "2026-01-01", "end_date": "2026-03-31"})
    decide(client, "deleteFile", {"path": "/srv/tmp/old.log"}, key=uuid.uuid4().hex)
    records = client.get("/v1/decisions?limit=10", headers=auth("u-auditor", "acme", ["auditor"])).get_json()
    inputs = {r["policy_input"]["tool"]["name"]: r["policy_input"] for r in records["records"] if r.get("policy_input")}
    assert "session" not in inputs["exportReport"] and "history" not in inputs["exportReport"]
    session = inputs["deleteFile"]["session"]
    assert set(session) == {"windows", "conversation", "subject"}
    assert set(session["conversation"]) == {"id", "calls"} and set(session["subject"]) == {"calls"}
    assert session["subject"]["calls"]["1m"] == {"exportReport": 1}
    assert "history" not in inputs["deleteFile"]
