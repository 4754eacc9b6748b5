"""The receipt step of the decide pipeline over in-memory stand-ins: which responses carry one,
what it says (the same facts as the record), and that a decision without its record has no
receipt either (the call fails before anything is returned)."""

from __future__ import annotations

import dataclasses

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.errors import DependencyUnavailable
from app.models import MatchedRule, PolicyDecision
from app.receipts.keys import KeyRing
from app.receipts.signer import ReceiptSigner
from app.receipts.verify import verify_receipt
from tests.fast.test_pipeline import PAY, READ, run
from tests.support import fakes


@pytest.fixture
def signer() -> ReceiptSigner:
    return ReceiptSigner(KeyRing.from_private_key(Ed25519PrivateKey.generate()))


@pytest.fixture
def signing(deps, signer):
    return dataclasses.replace(deps, receipts=signer)


def test_every_decision_carries_a_receipt_with_the_records_facts(signing, signer, engine) -> None:
    for word in ("allow", "deny", "user-approval"):
        engine.script = lambda _, word=word: PolicyDecision(decision=word, reasons=(f"{word} by script",))
        response, progress = run(signing, READ)
        claims = verify_receipt(response.receipt, signer.public_keys).claims
        record = list(fakes.records(signing))[-1]
        assert claims.decision == response.decision == record.decision == word
        assert (claims.decision_id, claims.tenant, claims.subject, claims.tool, claims.version) == (
            record.decision_id, record.tenant, record.subject_id, record.tool, record.version
        )
        assert claims.input_fingerprint == record.input_fingerprint == progress.stage.fingerprint
        assert claims.policy_revision == record.policy_revision == fakes.REVISION


def test_matched_rules_are_signed_when_the_decision_reports_them(signing, signer, engine) -> None:
    rule = {"id": "files.read_under_root", "effect": "allow", "message": "a readable path under a read root"}
    engine.script = lambda _: PolicyDecision(decision="allow", reasons=("allowed by policy",),
                                             matched_rules=(MatchedRule(**rule),))
    response, _ = run(signing, READ)
    assert verify_receipt(response.receipt, signer.public_keys).claims.matched_rules == [rule]


def test_a_dry_run_or_a_gateway_without_a_key_gives_no_receipt(deps, signing) -> None:
    response, _ = run(signing, {**READ, "dry_run": True})
    assert response.dry_run is True and response.receipt is None
    response, _ = run(deps, READ)
    assert response.receipt is None and "receipt" not in response.model_dump(exclude_unset=True)


def test_an_unrecorded_decision_returns_no_receipt(signing) -> None:
    signing.decision_log.failing = True
    outcome, progress = run(signing, {**PAY, "input": {**PAY["input"], "amount": 10}}, key="pay-9")
    assert isinstance(outcome, DependencyUnavailable) and not progress.recorded
