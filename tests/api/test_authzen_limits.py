"""AuthZEN answers cannot be used to skip limits, and one AuthZEN request's work is bounded
(docs/design.md §12, docs/integrators.md "AuthZEN"): through HTTP, with the shipped policies,
the real embedded engine and real Redis.

A PEP enforces an AuthZEN ``true`` without a later decide, so an evaluation spends what the
call would (a rate-limit slot, a budget share, a per-conversation count); a ``dry_run`` decide
states whether the call would be allowed now, rate limits included, and spends nothing.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from app.settings import Settings
from tests.support.calls import auth, decide_body
from tests.support.errors import assert_error

ADMIN = ("u-admin", "acme", ["admin"])
PAYMENT = {"currency": "EUR", "recipient": "acct_42", "amount": 1000}


def tool_evaluation(tool: str, arguments: dict[str, Any], *, conversation: str | None = None) -> dict[str, Any]:
    return {
        "subject": {"type": "user", "id": ADMIN[0]},
        "action": {"name": "tools/call", "properties": {"arguments": arguments}},
        "resource": {"type": "tool", "id": tool},
        "context": {"conversation_id": conversation} if conversation else {},
    }


def evaluate(client, tool: str, arguments: dict[str, Any], **kw: Any) -> Any:
    return client.post("/access/v1/evaluation", json=tool_evaluation(tool, arguments, **kw), headers=auth(*ADMIN))


def test_evaluations_count_against_the_rate_limit(make_app) -> None:
    """10 a minute: past the 10th evaluation the PEP is told 429, not ``true`` (a slot frees
    every 6 s, so a slow run may see one more)."""
    client = make_app(rate_limit_per_subject="10/60s").test_client()
    started = time.monotonic()
    statuses = [evaluate(client, "readFile", {"path": "/srv/reports/q1.csv"}).status_code for _ in range(30)]
    allowed = statuses.count(200)
    assert 10 <= allowed <= 10 + int((time.monotonic() - started) / 6) + 1, statuses
    assert set(statuses) == {200, 429}


def test_a_batch_counts_each_evaluation_and_stops_at_the_full_rate_limit(make_app) -> None:
    client = make_app(rate_limit_per_subject="10/60s").test_client()
    batch = {**tool_evaluation("readFile", {"path": "/srv/reports/q1.csv"}), "evaluations": [{}] * 30}
    response = client.post("/access/v1/evaluations", json=batch, headers=auth(*ADMIN))
    assert_error(response, 429, "RATE_LIMITED", retryable=True)
    assert evaluate(client, "readFile", {"path": "/srv/reports/q1.csv"}).status_code == 429


def test_payments_evaluated_true_spend_the_daily_budget(make_app) -> None:
    """60 payments of 1,000 EUR under the 50,000 budget: exactly 50 are ``true``."""
    client = make_app().test_client()
    answers = [evaluate(client, "processPayment", PAYMENT, conversation=uuid.uuid4().hex).get_json() for _ in range(60)]
    assert [a["decision"] for a in answers].count(True) == 50
    assert answers[-1]["context"]["reasons"] == ["limit payments.daily_budget reached (50000 of 50000 used in 24h)"]
    over = client.post("/v1/decide", json=decide_body("processPayment", PAYMENT),
                       headers={**auth(*ADMIN), "Idempotency-Key": uuid.uuid4().hex})
    assert over.get_json()["decision"] == "deny"


def test_one_delete_per_conversation_holds_for_evaluations(make_app) -> None:
    client = make_app().test_client()
    answers = [evaluate(client, "deleteFile", {"path": f"/srv/tmp/{n}.log"}, conversation="c-1").get_json()
               for n in range(5)]
    assert [a["decision"] for a in answers] == [True, False, False, False, False]
    assert answers[1]["context"]["reasons"] == ["limit files.delete_per_conversation reached (1 of 1 used in 24h)"]
    assert evaluate(client, "deleteFile", {"path": "/srv/tmp/x.log"}, conversation="c-2").get_json()["decision"] is True


def test_a_dry_run_decide_states_the_rate_limit_and_spends_nothing(make_app) -> None:
    client = make_app(rate_limit_per_subject="3/60s").test_client()
    read = decide_body("readFile", {"path": "/srv/reports/q1.csv"})
    for _ in range(5):
        assert client.post("/v1/decide", json={**read, "dry_run": True}, headers=auth(*ADMIN)).status_code == 200
    for _ in range(3):
        assert client.post("/v1/decide", json=read, headers=auth(*ADMIN)).status_code == 200
    assert_error(client.post("/v1/decide", json={**read, "dry_run": True}, headers=auth(*ADMIN)), 429, "RATE_LIMITED", retryable=True)


def test_a_dry_run_decide_spends_no_budget(make_app) -> None:
    client = make_app().test_client()
    for _ in range(60):
        dry = client.post("/v1/decide", json=decide_body("processPayment", PAYMENT, dry_run=True), headers=auth(*ADMIN))
        assert dry.get_json()["decision"] == "allow"


def test_a_batch_over_the_cap_is_413_and_evaluates_nothing(make_app) -> None:
    app = make_app(authzen_max_evaluations=5)
    client = app.test_client()
    batch = {**tool_evaluation("readFile", {"path": "/srv/reports/q1.csv"}), "evaluations": [{}] * 6}
    response = client.post("/access/v1/evaluations", json=batch, headers=auth(*ADMIN))
    error = assert_error(response, 413, "VALIDATION_ERROR", retryable=False)
    assert error["details"] == {"max_evaluations": 5}
    assert client.post("/access/v1/evaluations", json={**batch, "evaluations": [{}] * 5}, headers=auth(*ADMIN)).status_code == 200
    app.extensions["toolgate"].decision_log.flush()
    records = client.get("/v1/decisions?limit=100", headers=auth("u-aud", "acme", ["auditor"])).get_json()["records"]
    assert len([r for r in records if r["event"] == "decide_dry_run"]) == 5


@pytest.mark.parametrize("deadline_ms", [1])
def test_a_batch_stops_at_the_request_deadline(make_app, deadline_ms) -> None:
    """The work stops, not only the answer: no evaluation after the deadline is decided or
    recorded."""
    app = make_app(request_deadline_ms=deadline_ms)
    client = app.test_client()
    batch = {**tool_evaluation("readFile", {"path": "/srv/reports/q1.csv"}), "evaluations": [{}] * 50}
    response = client.post("/access/v1/evaluations", json=batch, headers=auth(*ADMIN))
    error = assert_error(response, 503, "DEPENDENCY_UNAVAILABLE", retryable=True)
    assert error["details"] == {"deadline_ms": deadline_ms}
    app.extensions["toolgate"].decision_log.flush()
    records = client.get("/v1/decisions?limit=100", headers=auth("u-aud", "acme", ["auditor"])).get_json()["records"]
    assert len(records) < 50


def test_production_takes_the_metadata_address_from_its_settings_only(make_app) -> None:
    """A metadata document built from the ``Host`` header would point PEPs wherever the last
    request claimed to be: production refuses to start without ``TOOLGATE_AUTHZEN_PDP_URL``."""
    production = {"env": "production", "jwt_issuer": "https://idp.example", "jwt_audience": "aud",
                  "jwt_hs256_secret": "p" * 32, "audit_key_hash_secret": "q" * 40}
    with pytest.raises(ValueError, match="set TOOLGATE_AUTHZEN_PDP_URL in production"):
        Settings(**production)
    pinned = Settings(**production, authzen_pdp_url="https://pdp.toolgate.test")
    assert pinned.authzen_pdp_url == "https://pdp.toolgate.test"
    client = make_app(authzen_pdp_url="https://pdp.toolgate.test").test_client()
    metadata = client.get("/.well-known/authzen-configuration", base_url="https://attacker.example").get_json()
    assert metadata["access_evaluation_endpoint"] == "https://pdp.toolgate.test/access/v1/evaluation"


def test_a_batch_that_fails_part_way_gives_back_what_its_decided_evaluations_took(make_app) -> None:
    """A full rate limit stops a batch of 1,000 EUR payments after 51 evaluations (429 for the
    whole request), 50 of them allowed, which spent the whole 50,000 budget: none of their
    answers is delivered, so none of it stays spent."""
    client = make_app(rate_limit_per_subject="51/60s").test_client()
    batch = {**tool_evaluation("processPayment", PAYMENT), "evaluations": [{}] * 60}
    response = client.post("/access/v1/evaluations", json=batch, headers=auth(*ADMIN))
    assert_error(response, 429, "RATE_LIMITED", retryable=True)
    time.sleep(1.3)  # the next slot of 51/60s
    answer = client.post("/v1/decide", json={**decide_body("processPayment", PAYMENT), "dry_run": True},
                         headers=auth(*ADMIN)).get_json()
    assert answer["decision"] == "allow", answer["reasons"]
