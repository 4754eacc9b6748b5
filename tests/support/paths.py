"""Where the tests find the repository's files. Everything the suite reads is inside the
repository (tests/unit/test_repository_paths.py checks that no test reaches outside it)."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
POLICY_DIR = PROJECT_ROOT / "policies"
CONTRACTS_DIR = PROJECT_ROOT / "contracts"
#: Test data (tests/data/README.md): the reference cases and the AgentDojo banking suite.
DATA_DIR = PROJECT_ROOT / "tests" / "data"
CASES_DIR = DATA_DIR / "cases"
BANKING_DIR = DATA_DIR / "agentdojo-banking"
BANKING_CALLS = BANKING_DIR / "calls.jsonl"
BANKING_TRAJECTORIES = BANKING_DIR / "trajectories.jsonl"
