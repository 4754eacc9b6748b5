"""A seeded banking workload with simulated approver answers, for ``toolgate policy insights``
and ``toolgate policy suggest`` (tests/api/test_policy_intel.py, docs/policy-authors.md).

Four account holders of tenant ``bank-demo`` send money through a gateway (real decide calls):
to payees the tenant knows (allowed up to its limit of 1000), to four new payees people trust,
and twice to one planted fraudulent payee; a few transfers go over the limit to known payees.
Every call held for approval is answered by its requester with a step-up token (the shipped
banking policy lets the account holder confirm her own transfers): approved, except the
fraudulent payee and any amount over 5000, which are denied. Nothing is retried with the grant:
the log holds the decide records and the answers.

Run against a live development gateway (HS256 development tokens)::

    python tests/data/approval_workload.py --url http://127.0.0.1:8090 [--seed 28]
"""

from __future__ import annotations

import argparse
import random
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SEED = 28
TENANT = "bank-demo"
HOLDERS = ("emma", "frank", "gina", "hugo")
#: Payees bank-demo already has (policies/tenants/bank-demo/data.json).
KNOWN_PAYEES = ("GB29NWBK60161331926819", "SE3550000000054910000003")
#: New payees the account holders trust and approve every time.
GOOD_PAYEES = ("FR1420041010050500013M02606", "DE75512108001245126199", "NL91ABNA0417164300",
               "IT60X0542811101000000123456")
#: The planted fraudulent payee: denied every time.
FRAUD_PAYEE = "LT601010012345678901"
#: Amounts over this are denied whoever the payee is.
DENY_OVER = 5000

#: ``post(path, json body, headers) -> (status, json)``; ``token(sub, step_up) -> bearer token``.
Post = Callable[[str, dict[str, Any], dict[str, str]], tuple[int, Any]]
Token = Callable[[str, bool], str]


@dataclass
class Summary:
    """What the workload did: decide calls by decision, answers by outcome, and the approval
    ids of the denied fraudulent transfers."""

    decisions: Counter[str] = field(default_factory=Counter)
    answers: Counter[str] = field(default_factory=Counter)
    fraud_approvals: list[str] = field(default_factory=list)


def plan(seed: int = SEED) -> list[tuple[str, str, float]]:
    """``(holder, payee, amount)`` of every transfer, in order."""
    rng = random.Random(seed)
    calls = [(HOLDERS[i % 4], payee, round(rng.uniform(20, 900), 2)) for i, payee in
             enumerate([p for p in GOOD_PAYEES for _ in range(rng.randint(4, 7))])]
    calls += [(rng.choice(HOLDERS), rng.choice(KNOWN_PAYEES), round(rng.uniform(20, 900), 2)) for _ in range(6)]
    calls += [(rng.choice(HOLDERS), rng.choice(KNOWN_PAYEES), amount) for amount in (1200, 1800, 2400, 3100, 8000)]
    calls += [(HOLDERS[0], FRAUD_PAYEE, 480.0), (HOLDERS[2], FRAUD_PAYEE, 760.0)]
    rng.shuffle(calls)
    return calls


def run(post: Post, token: Token, seed: int = SEED) -> Summary:
    """Send the planned transfers and answer each escalation (see the module docstring)."""
    summary = Summary()
    for holder, payee, amount in plan(seed):
        body = {"tool": "send_money", "version": "1", "tool_call_id": f"call-{uuid.uuid4().hex[:12]}",
                "input": {"recipient": payee, "amount": amount, "subject": "invoice", "date": "2026-12-01"}}
        headers = {"Authorization": f"Bearer {token(holder, False)}", "Idempotency-Key": uuid.uuid4().hex}
        status, decided = post("/v1/decide", body, headers)
        if status != 200:
            raise RuntimeError(f"decide answered {status}: {decided}")
        summary.decisions[decided["decision"]] += 1
        if decided["decision"] != "user-approval":
            continue
        approval_id = decided["approval"]["approval_id"]
        approved = payee != FRAUD_PAYEE and amount <= DENY_OVER
        answer = {"approved": approved, "reason": "I know this payee" if approved else "I never ordered this"}
        status, answered = post(f"/v1/approvals/{approval_id}", answer, {"Authorization": f"Bearer {token(holder, True)}"})
        if status != 200:
            raise RuntimeError(f"the answer was refused with {status}: {answered}")
        summary.answers["approved" if approved else "denied"] += 1
        if payee == FRAUD_PAYEE:
            summary.fraud_approvals.append(approval_id)
    return summary


def _live(url: str) -> tuple[Post, Token]:
    """``post`` and ``token`` for a live development gateway (HS256 development tokens)."""
    import jwt
    import requests

    from app.auth.dev_tokens import mint_dev_token
    from app.settings import load_settings

    settings = load_settings()

    def post(path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        resp = requests.post(url + path, json=body, headers=headers, timeout=30)
        return resp.status_code, resp.json()

    def token(sub: str, step_up: bool) -> str:
        minted = mint_dev_token(settings, sub=sub, tenant=TENANT, roles=["account_holder"])
        if not step_up:
            return minted
        secret = settings.hs256_secret
        assert secret is not None
        claims = jwt.decode(minted, options={"verify_signature": False})
        return jwt.encode({**claims, "aud": settings.approval_step_up_audience}, secret, "HS256")

    return post, token


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the gateway's base URL")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    summary = run(*_live(args.url.rstrip("/")), seed=args.seed)
    print(f"decisions: {dict(summary.decisions)}; answers: {dict(summary.answers)}")


if __name__ == "__main__":
    main()
