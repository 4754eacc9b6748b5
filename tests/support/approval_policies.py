"""Test-only policies for the approval rules (real Rego, run by the real embedded engine),
written to a temporary policy directory: processPayment over 1000 asks for approval with the
``approval`` object given in ``data.test.approval``; ``data.test.extra_reasons`` adds approval
reasons (a changed policy); an amount over 100000 is denied; everything else is allowed.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

POLICY = """package toolgate

import rego.v1

needs_approval if {
	input.tool.name == "processPayment"
	input.call.input.amount > 1000
}

reasons contains "payment over 1000 needs approval" if needs_approval

reasons contains reason if {
	needs_approval
	some reason in data.test.extra_reasons
}

approval_ok if {
	input.approval.approved == true
	some role in input.approval.approver.roles
	role in data.test.approval.approver_roles
}

default decision := {"decision": "deny", "reasons": ["no policy rule allows this call"]}

decision := {"decision": "deny", "reasons": ["amount over 100000 is refused"]} if {
	input.call.input.amount > 100000
} else := {"decision": "user-approval", "reasons": sort(reasons), "approval": data.test.approval} if {
	count(reasons) > 0
	not approval_ok
} else := {"decision": "allow", "reasons": [sprintf("%s (approved by %s)", [r, input.approval.approver.id]) | some r in sort(reasons)]} if {
	count(reasons) > 0
	approval_ok
} else := {"decision": "allow", "reasons": ["allowed by policy"]}
"""


def write_policy(directory: Path, approval: dict[str, Any], *, extra_reasons: list[str] | None = None, comment: str = "") -> Path:
    """Write the test policy with ``approval`` (the policy's approval object) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "decision.rego").write_text(POLICY + (f"\n# {comment}\n" if comment else ""))
    data = {"test": {"approval": {"approver_roles": ["approver"], "ttl_s": 600, **approval}, "extra_reasons": extra_reasons or []}}
    (directory / "data.json").write_text(json.dumps(data))
    return directory


class WebhookReceiver:
    """A real HTTP server on loopback that records every POST (headers and body) and answers
    with the next status of ``statuses`` (then 200)."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.statuses = list(statuses or [])
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.event = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.event:
                    receiver.received.append((dict(self.headers.items()), body))
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    receiver.event.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def __enter__(self) -> WebhookReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, count: int, timeout_s: float = 10) -> list[tuple[dict[str, str], bytes]]:
        with self.event:
            self.event.wait_for(lambda: len(self.received) >= count, timeout=timeout_s)
            return list(self.received)
