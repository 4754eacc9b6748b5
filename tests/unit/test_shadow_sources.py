"""Where a shadow policy comes from, with the real embedded engine: a candidate bundle tarball
(``TOOLGATE_SHADOW_POLICY_BUNDLE`` as a path), a candidate bundle URL (the development bundle
service on a loopback port, a real HTTP peer), a log-only family in the active policies, and the
revision archive that ``toolgate policy archive`` fills for bundles the gateway never sees."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.engine import build_shadow
from app.engine.embedded import EmbeddedEngine
from app.engine.sources import DirectorySource
from app.policy.bundle import PolicyBundle, build_tarball, read_directory, with_manifest
from app.policy.bundle_server import BundleCache, make_server
from app.settings import Settings
from tests.conftest import POLICY_DIR, PROJECT_ROOT

PAYMENTS = Path("tools/payments/payments.rego")


def payment(amount: float) -> dict[str, Any]:
    """The policy input of an admin's payment of ``amount`` EUR, as the gateway builds it."""
    return {
        "approval": None,
        "call": {"id": "call-1", "input": {"amount": amount, "currency": "EUR", "recipient": "acct_42"}},
        "context": {},
        "history": {},
        "request": {"id": "req-1", "time": "2026-12-01T12:00:00.000Z"},
        "subject": {"id": "u-1", "roles": ["admin"], "tenant": "acme"},
        "tool": {"mutating": True, "name": "processPayment", "namespace": "", "registered": True, "risk": "high", "version": "1"},
    }


@pytest.fixture(scope="module")
def candidate_dir(tmp_path_factory) -> Path:
    """The shipped policies with payments needing approval above 100 instead of 1000."""
    target = tmp_path_factory.mktemp("shadow-sources") / "candidate"
    shutil.copytree(POLICY_DIR, target)
    rego = target / PAYMENTS
    text = rego.read_text(encoding="utf-8")
    assert "default_approval_amount := 1000" in text
    rego.write_text(text.replace("default_approval_amount := 1000", "default_approval_amount := 100"), encoding="utf-8")
    return target


@pytest.fixture(scope="module")
def bundle_url(candidate_dir) -> Iterator[str]:
    server = make_server(BundleCache(candidate_dir), "candidate", "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/bundles/candidate.tar.gz"
    server.shutdown()
    server.server_close()


def _settings(**values: Any) -> Settings:
    return Settings(shadow_deadline_ms=5000, shadow_workers=1, policy_poll_interval_s=0, **values)


@pytest.mark.parametrize("where", ["tarball", "url"])
def test_a_candidate_bundle_is_evaluated_as_the_shadow(where, candidate_dir, bundle_url, tmp_path) -> None:
    expected = with_manifest(read_directory(candidate_dir)).revision
    if where == "tarball":
        tarball = tmp_path / "candidate.tar.gz"
        tarball.write_bytes(build_tarball(with_manifest(read_directory(candidate_dir))))
        source = str(tarball)
    else:
        source = bundle_url
    kept: list[PolicyBundle] = []
    shadow = build_shadow(_settings(shadow_policy_bundle=source), on_activate=kept.append)
    assert shadow is not None
    try:
        flipped = shadow.submit(payment(500)).outcome()
        same = shadow.submit(payment(50)).outcome()
    finally:
        shadow.close()
    assert flipped.source == "candidate" and flipped.error is None
    assert flipped.decision == "user-approval" and flipped.reasons == ("payment over 100 needs approval",)
    assert "payments.amount_over_threshold" in {r.id for r in flipped.matched_rules}
    assert same.decision == "allow"
    assert flipped.revision == same.revision == expected
    assert [b.revision for b in kept] == [expected]  # handed to the revision archive once


def test_a_candidate_bundle_that_cannot_be_read_is_an_unavailable_shadow(tmp_path) -> None:
    shadow = build_shadow(_settings(shadow_policy_bundle=str(tmp_path / "missing.tar.gz")))
    assert shadow is not None
    try:
        outcome = shadow.submit(payment(500)).outcome()
    finally:
        shadow.close()
    assert outcome.decision is None and outcome.error == "unavailable"


LOG_ONLY_FAMILY = """# METADATA
# title: Strict payments
# description: Tried as log-only before it decides - payments over 100 need approval.
# custom:
#   governs:
#     processPayment: {shared_with: [payments]}
#   approver_roles: default
#   log_only: true
package tools.strict_payments

import data.toolgate.lib

governs.processPayment := {"shared_with": ["payments"]}

log_only := true

approval_required contains {"rule": "over_100", "message": "payment over 100 needs approval"} if {
	lib.number_arg("amount", 0) > 100
}

# A shared tool is allowed only when every family that governs it allows.
allow contains {"rule": "up_to_100", "message": "a payment of at most 100"} if {
	lib.number_arg("amount", 0) <= 100
}
"""


def _with_log_only_family(root: Path) -> Path:
    target = root / "policies"
    shutil.copytree(POLICY_DIR, target)
    family = target / "tools" / "strict_payments"
    family.mkdir()
    (family / "strict_payments.rego").write_text(LOG_ONLY_FAMILY, encoding="utf-8")
    payments = target / PAYMENTS
    text = payments.read_text(encoding="utf-8")
    old = 'governs["processPayment"] := {"versions": ["1"]}'
    assert old in text, "the payments family's claim changed: update this test's edit"
    shared = 'governs["processPayment"] := {"versions": ["1"], "shared_with": ["strict_payments"]}'
    payments.write_text(text.replace(old, shared), encoding="utf-8")
    return target


def test_a_log_only_family_reports_its_view_and_changes_no_decision(tmp_path) -> None:
    engine = EmbeddedEngine(DirectorySource(_with_log_only_family(tmp_path)), "toolgate/decision", poll_interval_s=0)
    try:
        held_back = engine.evaluate(payment(500))
        small_payment = engine.evaluate(payment(50))
    finally:
        engine.close()
    assert held_back.decision == "allow" and held_back.reasons == ("allowed by policy",)
    assert "strict_payments.over_100" not in {r.id for r in held_back.matched_rules}
    view = held_back.log_only
    assert view is not None and view.source == "log_only" and view.revision == held_back.policy_revision
    assert view.decision == "user-approval" and view.reasons == ("payment over 100 needs approval",)
    assert "strict_payments.over_100" in {r.id for r in view.matched_rules}
    # The family claims every payment: a small one has a log-only view too, and it agrees.
    small = small_payment.log_only
    assert small_payment.decision == "allow" and "strict_payments.up_to_100" not in {r.id for r in small_payment.matched_rules}
    assert small is not None and small.decision == "allow" and "strict_payments.up_to_100" in {r.id for r in small.matched_rules}


def _toolgate(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120,
        check=False,
    )


def test_policy_archive_keeps_a_bundle_once(tmp_path, candidate_dir) -> None:
    dsn = tmp_path / "decisions.sqlite"
    env = {**os.environ, "TOOLGATE_AUDIT_DSN": str(dsn), "TOOLGATE_LOG_LEVEL": "ERROR"}
    missing = _toolgate("policy", "archive", str(candidate_dir), env=env)
    assert missing.returncode == 2 and "decisions.sqlite" in missing.stderr  # never creates a decision log
    from app.audit.stores import open_from_settings

    open_from_settings(Settings(audit_dsn=str(dsn))).close()
    revision = with_manifest(read_directory(candidate_dir)).revision
    first = _toolgate("policy", "archive", str(candidate_dir), env=env)
    again = _toolgate("policy", "archive", str(candidate_dir), env=env)
    assert first.returncode == again.returncode == 0, first.stderr
    assert first.stdout.startswith(f"archived: revision {revision} ")
    assert again.stdout.startswith(f"already archived: revision {revision} ")


def test_policy_diff_reads_a_candidate_tarball_or_url_and_refuses_a_missing_one(tmp_path, candidate_dir, bundle_url) -> None:
    from app.audit.stores import open_from_settings

    dsn = tmp_path / "decisions.sqlite"
    open_from_settings(Settings(audit_dsn=str(dsn))).close()
    env = {**os.environ, "TOOLGATE_AUDIT_DSN": str(dsn), "TOOLGATE_LOG_LEVEL": "ERROR"}
    tarball = tmp_path / "candidate.tar.gz"
    tarball.write_bytes(build_tarball(with_manifest(read_directory(candidate_dir))))
    revision = with_manifest(read_directory(candidate_dir)).revision
    for candidate in (str(tarball), bundle_url):
        done = _toolgate("policy", "diff", "--candidate", candidate, env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"candidate {revision} ({candidate})")
        assert "0 decide records" in done.stdout
    missing = _toolgate("policy", "diff", "--candidate", str(tmp_path / "missing.tar.gz"), env=env)
    assert missing.returncode == 2 and "the candidate does not load" in missing.stderr
