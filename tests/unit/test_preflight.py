"""The gateway's start-up check (``python -m app.policy.preflight``, run by gunicorn's
``on_starting``) with production settings: the real embedded engine on a policy directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import POLICY_DIR

SECRET = "p" * 40
PRODUCTION = {
    "TOOLGATE_ENV": "production", "TOOLGATE_JWT_HS256_SECRET": SECRET, "TOOLGATE_JWT_ISSUER": "https://idp.example",
    "TOOLGATE_JWT_AUDIENCE": "toolgate-prod", "TOOLGATE_AUDIT_KEY_HASH_SECRET": "q" * 40,
    "TOOLGATE_AUTHZEN_PDP_URL": "https://toolgate.example",
}
#: The shipped families whose rules include approval_required.
ASKING_FAMILIES = ("banking", "commands", "files", "inbox", "payments", "web")


def _preflight(policy_dir: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    env.update(PRODUCTION, TOOLGATE_POLICY_DIR=str(policy_dir), **extra)
    return subprocess.run([sys.executable, "-m", "app.policy.preflight"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def _policies_without_approvals(tmp_path: Path) -> Path:
    """The shipped policies without the families that ask for approval and without a role
    whose unregistered tools need approval."""
    policy_dir = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, policy_dir)
    for family in ASKING_FAMILIES:
        shutil.rmtree(policy_dir / "tools" / family)
    data = json.loads((policy_dir / "data.json").read_text())
    for role in data["roles"].values():
        role["dynamic_tools"] = False
    (policy_dir / "data.json").write_text(json.dumps(data))
    return policy_dir


def test_production_without_approval_keys_refuses_a_policy_that_asks_for_approval():
    done = _preflight(POLICY_DIR)
    assert done.returncode == 1, done.stderr
    assert "toolgate: not starting: TOOLGATE_APPROVAL_KEYS is unset and TOOLGATE_ENV=production" in done.stderr
    assert "family banking (approval_required)" in done.stderr
    assert "role developer (dynamic_tools: true)" in done.stderr
    assert SECRET not in done.stderr


def test_production_without_approval_keys_starts_when_nothing_asks_for_approval(tmp_path):
    done = _preflight(_policies_without_approvals(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "not starting" not in done.stderr


def test_production_with_approval_keys_starts_with_a_policy_that_asks_for_approval():
    done = _preflight(POLICY_DIR, TOOLGATE_APPROVAL_KEYS="k1:" + "s" * 40)
    assert done.returncode == 0, done.stderr
