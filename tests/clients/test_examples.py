"""The tested examples of docs/clients.md: the Python examples run as scripts against a live
gateway, their output compared line by line (ids that change per run are matched by pattern)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.clients.gateway import token_for
from tests.conftest import PROJECT_ROOT

EXAMPLES = PROJECT_ROOT / "clients" / "python" / "examples"


def _run(script: str, gateway, **tokens: str) -> list[str]:
    env = {**os.environ, "TOOLGATE_URL": gateway.url, **tokens}
    result = subprocess.run([sys.executable, str(EXAMPLES / script)], env=env, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()


def test_quickstart(gateway):
    lines = _run("quickstart.py", gateway, TOOLGATE_TOKEN=token_for("agent"))
    assert lines == [
        "readFile: allow (allowed by policy)",
        "first call: {'id': 'T-1', 'title': 'Printer jammed', 'status': 'open', 'priority': 'high'}",
        "retry:      {'id': 'T-1', 'priority': 'high', 'status': 'open', 'title': 'Printer jammed'}",  # stored JSON
        "tickets created: 1",
        "processPayment denied: role support_agent may not use tool processPayment",
    ]


def test_approval(gateway):
    lines = _run("approval.py", gateway, TOOLGATE_TOKEN=token_for("admin"), TOOLGATE_APPROVER_TOKEN=token_for("approver"))
    assert lines[0] == "approval required: payment over 1000 needs approval"
    assert re.fullmatch(r"approver sees: processPayment \{'amount': 1500, 'currency': 'EUR', 'recipient': 'acct_42'\}"
                        r" - payment over 1000 needs approval", lines[1])
    assert lines[2:] == [
        "paid after approval: {'payment': 'pm-1', 'amount': 1500, 'currency': 'EUR', 'recipient': 'acct_42'}",
        "paid again on retry: {'amount': 1500, 'currency': 'EUR', 'payment': 'pm-1', 'recipient': 'acct_42'}",
        "payments made: 1",
    ]
