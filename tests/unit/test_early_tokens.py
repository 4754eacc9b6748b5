"""tests.support.early_tokens: a test module that mints a token at import or in a
``parametrize`` list fails collection; one that mints in its body runs. Real pytest runs in a
subprocess on files written here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT

HEADER = "from app.auth.dev_tokens import mint_dev_token\nfrom app.settings import Settings\n\n"
MINT = 'mint_dev_token(Settings(), sub="u-1", tenant="acme", roles=["admin"])'


def _pytest(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_minting.py").write_text(HEADER + body)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.support.early_tokens", "-p", "no:cacheprovider",
         "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), str(tmp_path / "test_minting.py")],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120, check=False,
    )


@pytest.mark.parametrize("body", [
    f"TOKEN = {MINT}\n\ndef test_uses_it():\n    assert TOKEN\n",
    f"import pytest\n\n@pytest.mark.parametrize('token', [{MINT}])\ndef test_uses_it(token):\n    assert token\n",
], ids=["module-constant", "parametrize"])
def test_a_token_minted_at_collection_fails_the_run(tmp_path, body):
    result = _pytest(tmp_path, body)
    assert result.returncode == 2, result.stdout
    assert "EarlyToken" in result.stdout and "never at import or in parametrize" in result.stdout


def test_a_token_minted_in_the_test_body_is_fine(tmp_path):
    result = _pytest(tmp_path, f"def test_mints():\n    assert {MINT}.count('.') == 2\n")
    assert result.returncode == 0, result.stdout
