"""Helpers for approval tests through HTTP: pay, request an approval, answer it, present a grant.

Identities (tenant ``acme`` unless said otherwise): ``u-admin`` (role admin) asks for payments,
``u-approver`` (role approver) answers. Every decide call sends a fresh ``Idempotency-Key``
(processPayment is a mutating tool) unless one is given.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

from tests.conftest import POLICY_DIR
from tests.support.calls import auth, decide_body

ADMIN = ("u-admin", "acme", ["admin"])
APPROVER = ("u-approver", "acme", ["approver"])
PAYMENT_REASON = "payment over 1000 needs approval"


def headers(identity: tuple[str, str, list[str]] = ADMIN, key: str | None = None) -> dict[str, str]:
    """Authorization for ``identity`` plus an Idempotency-Key (fresh unless given)."""
    return {**auth(*identity), "Idempotency-Key": key or uuid.uuid4().hex}


def payment(amount: float = 1500, **extra: Any) -> dict[str, Any]:
    """A processPayment decide body with a fresh tool_call_id."""
    return decide_body("processPayment", {"amount": amount, "currency": "EUR", "recipient": "acct_42"}, **extra)


def with_grant(body: dict[str, Any], approval_id: str, grant: str | None) -> dict[str, Any]:
    """``body`` presenting ``{approval_id, grant}`` (no grant member when ``grant`` is None)."""
    presented = {"approval_id": approval_id} if grant is None else {"approval_id": approval_id, "grant": grant}
    return {**body, "approval": presented}


def decide(client, body: dict[str, Any], identity=ADMIN, key: str | None = None) -> dict[str, Any]:
    """POST /v1/decide; asserts 200 and returns the body."""
    resp = client.post("/v1/decide", json=body, headers=headers(identity, key))
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def request_approval(client, body: dict[str, Any], identity=ADMIN) -> str:
    """Decide ``body`` (must need approval); returns the approval id."""
    data = decide(client, body, identity)
    assert data["decision"] == "user-approval", data
    return data["approval"]["approval_id"]


def answer(client, approval_id: str, identity=APPROVER, approved: bool = True, reason: str = "looks fine"):
    """POST /v1/approvals/<id>; returns the response."""
    return client.post(
        f"/v1/approvals/{approval_id}", json={"approved": approved, "reason": reason}, headers=auth(*identity)
    )


def approve(client, body: dict[str, Any], requester=ADMIN, approver=APPROVER) -> tuple[str, str]:
    """Ask for ``body`` as ``requester`` and approve as ``approver``; returns (approval id, grant)."""
    approval_id = request_approval(client, body, requester)
    resp = answer(client, approval_id, approver)
    assert resp.status_code == 200, resp.get_json()
    return approval_id, resp.get_json()["grant"]


def policy_copy(tmp_path: Path, **data_changes: Any) -> Path:
    """A copy of the shipped ``policies/`` whose data.json has top-level members replaced or,
    for dict members, updated one level deep."""
    target = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, target)
    edit_data(target, **data_changes)
    return target


def edit_data(policy_dir: Path, **changes: Any) -> None:
    """Change ``policy_dir/data.json`` in place (see ``policy_copy``)."""
    path = policy_dir / "data.json"
    data = json.loads(path.read_text())
    for name, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(name), dict):
            data[name].update(value)
        else:
            data[name] = value
    path.write_text(json.dumps(data))
