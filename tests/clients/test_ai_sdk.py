"""Runs the AI SDK adapter's own suite, ``npm test`` in ``clients/ai-sdk``, on the project's
Node.js 22 (``.tools/node22``, installed by ``scripts/install.sh``): it builds with ``tsc`` and
runs ``node --test``, whose tests start their own live gateway through ``tests.clients.gateway``
with this Python. The runner's summary must show every test passed, none skipped."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT

ADAPTER = PROJECT_ROOT / "clients" / "ai-sdk"
NODE22 = PROJECT_ROOT / ".tools" / "node22" / "bin"


@pytest.mark.timeout(900)
def test_ai_sdk_adapter_suite():
    assert (NODE22 / "node").exists(), "Node.js 22 is missing: run bash scripts/install.sh"
    assert (ADAPTER / "node_modules" / "ai").exists(), "the adapter's packages are missing: run bash scripts/install.sh"
    env = {**os.environ, "PATH": f"{NODE22}{os.pathsep}{os.environ.get('PATH', '')}", "TOOLGATE_PYTHON": sys.executable}
    result = subprocess.run(["npm", "test"], cwd=ADAPTER, env=env, capture_output=True, text=True, timeout=840, check=False)
    output = result.stdout + result.stderr
    summary = {name: int(count) for name, count in re.findall(r"^# (tests|pass|fail|skipped|todo|cancelled) (\d+)$", output, re.MULTILINE)}
    assert result.returncode == 0 and summary.get("fail") == 0, output[-6000:]
    assert summary["tests"] >= 16 and summary["pass"] == summary["tests"], summary
    assert summary["skipped"] == summary["todo"] == summary["cancelled"] == 0, summary
