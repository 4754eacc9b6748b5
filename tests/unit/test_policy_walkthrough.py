"""docs/policy-authors.md's walkthrough for a new tool (the ``sendEmail`` contract and the
``mail`` family, steps 1 to 5), performed on a copy of the repository from the commands the page
shows: every ``sh`` block runs, every ``$`` command of a ``console`` block prints what the page
shows (counts, times and column spacing aside), and the last one runs the tests that read the decision cases, the
contract lock and the catalog, which must pass. Real opa, Regal, embedded engine and pytest."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT

DOC = PROJECT_ROOT / "docs" / "policy-authors.md"
FIRST_STEP, AFTER_LAST_STEP = "**1. The contract and its lock**", "**6. Look at a decision"
_BLOCK = re.compile(r"^```(sh|console)\n(.*?)^```\n", re.S | re.M)


def walkthrough_steps(text: str) -> list[tuple[str, str]]:
    """``(command, expected output)`` in page order: a ``sh`` block is one command with no
    output shown; each ``$`` line of a ``console`` block is one, with the lines up to the next."""
    section = text[text.index(FIRST_STEP):text.index(AFTER_LAST_STEP)]
    steps: list[tuple[str, str]] = []
    for kind, body in _BLOCK.findall(section):
        if kind == "sh":
            steps.append((body, ""))
            continue
        for chunk in re.split(r"^\$ ", body, flags=re.M)[1:]:
            command, _, output = chunk.partition("\n")
            steps.append((command, output))
    return steps


def _counts_aside(text: str) -> str:
    """``text`` with every number as ``N`` and every run of spaces as one (columns move)."""
    return re.sub(r"[ \t]+", " ", re.sub(r"\d+(\.\d+)?", "N", text)).strip()


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """The working tree's files (tracked and untracked, not ignored) in a fresh git repository,
    sharing this checkout's ``.venv`` and ``.tools``."""
    copy = tmp_path / "repo"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=PROJECT_ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = PROJECT_ROOT / name
        if source.is_file() and not name.startswith("clients/ai-sdk/node_modules/"):
            target = copy / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
            target.chmod(source.stat().st_mode)
    for shared in (".venv", ".tools"):
        (copy / shared).symlink_to(PROJECT_ROOT / shared)
    for argv in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "copy"]):
        subprocess.run(["git", *argv], cwd=copy, check=True, capture_output=True)
    return copy


def test_the_walkthrough_steps_are_found() -> None:
    commands = [command for command, _ in walkthrough_steps(DOC.read_text(encoding="utf-8"))]
    assert any("contracts lock" in c for c in commands) and any("decision_cases.py" in c for c in commands)
    assert any("check-policies" in c for c in commands) and any("--coverage" in c for c in commands)


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the property checks and the nested pytest run take minutes on a loaded machine
def test_the_walkthrough_leaves_the_checks_and_tests_green(repository: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(repository), "TOOLGATE_LOG_LEVEL": "ERROR"}
    env.pop("TOOLGATE_CONTRACTS_DIR", None)
    root = subprocess.run([".venv/bin/python", "-c", "from app.settings import PROJECT_ROOT; print(PROJECT_ROOT)"],
                          cwd=repository, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert root == str(repository), "the copy's own app must run (it writes contracts.lock.json)"
    for command, shown in walkthrough_steps(DOC.read_text(encoding="utf-8")):
        done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=repository, env=env,
                              capture_output=True, text=True, timeout=900, check=False)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        assert _counts_aside(done.stdout) == _counts_aside(shown), command
