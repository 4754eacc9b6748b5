"""``toolgate_client.inputs.executable_input``: the tool runs with the gateway's normalized input
and its own values where the gateway redacted them (a pure function: no gateway needed)."""

from __future__ import annotations

from toolgate_client.inputs import executable_input


def test_redacted_members_come_back_from_the_sent_arguments():
    sent = {"to": "bob@acme.example", "body": "the secret plan", "cc": [{"addr": "a@x", "note": "n1"}]}
    decided = {"to": "bob@acme.example", "body": "[REDACTED]", "cc": [{"addr": "a@x", "note": "[REDACTED]"}], "subject": ""}
    assert executable_input(decided, sent) == {
        "to": "bob@acme.example", "body": "the secret plan", "cc": [{"addr": "a@x", "note": "n1"}], "subject": "",
    }


def test_the_gateway_wins_everywhere_else():
    """Normalized values and an approver's edit (sensitive members are never edited) stay."""
    sent = {"amount": 1500, "memo": "  pay  ", "secret": "s3"}
    decided = {"amount": 1200, "memo": "pay", "secret": "[REDACTED]"}
    assert executable_input(decided, sent) == {"amount": 1200, "memo": "pay", "secret": "s3"}


def test_a_redacted_member_the_caller_did_not_send_stays_redacted():
    assert executable_input({"token": "[REDACTED]"}, {}) == {"token": "[REDACTED]"}
    assert executable_input({"xs": ["[REDACTED]"]}, {"xs": ["a", "b"]}) == {"xs": ["[REDACTED]"]}
