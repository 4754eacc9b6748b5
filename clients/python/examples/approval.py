"""A call that needs a person's approval: the requester waits, the approver answers, the call
then runs once with the grant.

    export TOOLGATE_URL=http://127.0.0.1:8080
    export TOOLGATE_TOKEN=$(toolgate token --sub u-2 --tenant acme --role admin)
    export TOOLGATE_APPROVER_TOKEN=$(toolgate token --sub u-3 --tenant acme --role approver)
    .venv/bin/python clients/python/examples/approval.py
"""

from __future__ import annotations

import os
import threading
import uuid
from typing import Any

from toolgate_client import ApprovalRequired, ToolgateClient

PAYMENT = {"amount": 1500, "currency": "EUR", "recipient": "acct_42"}


def approve_pending(approver: ToolgateClient, tool_call_id: str) -> None:
    """The approver's side (normally another person, another program): find and approve."""
    for approval in approver.list_approvals():
        if approval.tool_call_id == tool_call_id:
            print(f"approver sees: {approval.tool.name} {approval.input} - {approval.request_reason}")
            approver.answer_approval(approval.approval_id, approved=True, reason="invoice 2291 checked")


def main() -> None:
    url = os.environ["TOOLGATE_URL"]
    payments: list[dict[str, Any]] = []

    def send_payment(payment: dict[str, Any]) -> dict[str, Any]:
        payments.append(payment)  # your payment system goes here
        return {"payment": f"pm-{len(payments)}", **payment}

    with ToolgateClient(url, os.environ["TOOLGATE_TOKEN"]) as requester, \
            ToolgateClient(url, os.environ["TOOLGATE_APPROVER_TOKEN"]) as approver:
        pay = requester.guarded(send_payment, tool="processPayment")
        tool_call_id = f"call-{uuid.uuid4().hex[:12]}"
        try:
            print("paid:", pay(PAYMENT, idempotency_key=f"pay-{tool_call_id}", tool_call_id=tool_call_id))
        except ApprovalRequired as needed:
            print("approval required:", needed.pending.request_reason)
            answer = threading.Timer(0.5, approve_pending, args=(approver, tool_call_id))
            answer.start()
            print("paid after approval:", needed.pending.retry(timeout_s=60, poll_interval_s=0.2))
            answer.join()
            print("paid again on retry:", needed.pending.retry())  # same grant and key: the stored result
        print("payments made:", len(payments))


if __name__ == "__main__":
    main()
