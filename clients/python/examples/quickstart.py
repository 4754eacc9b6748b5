"""Quick start: ask toolgate before a tool runs, and run a mutating tool at most once.

    export TOOLGATE_URL=http://127.0.0.1:8080
    export TOOLGATE_TOKEN=$(toolgate token --sub u-1 --tenant acme --role support_agent)
    .venv/bin/python clients/python/examples/quickstart.py
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from toolgate_client import ToolCallDenied, ToolgateClient


def main() -> None:
    with ToolgateClient(os.environ["TOOLGATE_URL"], os.environ["TOOLGATE_TOKEN"]) as client:
        # 1. A read-only tool: ask, then run on allow.
        decision = client.decide("readFile", {"path": "/srv/reports/q1.csv"})
        print(f"readFile: {decision.decision} ({'; '.join(decision.reasons)})")

        # 2. A mutating tool, guarded: it runs once; the retry gets the stored result.
        tickets: list[dict[str, Any]] = []

        def create_ticket(ticket: dict[str, Any]) -> dict[str, Any]:
            tickets.append(ticket)  # your ticket system goes here
            return {"id": f"T-{len(tickets)}", "title": ticket["title"], "status": "open", "priority": ticket["priority"]}

        create = client.guarded(create_ticket, tool="createTicket")
        call = {"title": "  Printer jammed ", "description": "Floor 3 printer is jammed.", "priority": "high",
                "clientMutationId": str(uuid.uuid4())}  # the contract's key field: one per logical call
        print("first call:", create(call))
        print("retry:     ", create(call))
        print("tickets created:", len(tickets))

        # 3. A refused call never runs.
        pay = client.guarded(lambda payment: {"paid": payment["amount"]}, tool="processPayment")
        try:
            pay({"amount": 50, "currency": "EUR", "recipient": "acct_42"}, idempotency_key=f"pay-{uuid.uuid4()}")
        except ToolCallDenied as denied:
            print("processPayment denied:", "; ".join(denied.reasons))


if __name__ == "__main__":
    main()
