"""The gateway trusts a policy revision's ``session_reads`` only once it has checked them
against the revision's Rego (``app.session.declarations``): with the real embedded engine and
the pinned ``opa`` binary. A revision whose family reads a member it does not declare (hot
reloaded without ``policy check``) gets the whole session on every call, so a rule over that
member still sees it; tests/api/test_session_declarations_api.py shows the decision."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from app import metrics
from app.engine.embedded import EmbeddedEngine
from app.engine.sources import DirectorySource
from app.policy.toolchain import opa_binary
from app.session.declarations import DeclarationsAudit, declaration_gaps
from app.session.reads import EVERYTHING, SessionReads
from tests.conftest import POLICY_DIR

#: A files-family rule over a member its declaration leaves out (resources).
UNDECLARED_READ = """
deny contains {"rule": "read_once", "message": "a file is read once per conversation"} if {
	input.tool.name == "readFile"
	input.call.input.path in input.session.conversation.resources.read
}
"""
FILES = Path("tools") / "files" / "files.rego"
DECLARED = {"session.conversation.calls", "session.subject.calls", "session.windows"}


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    copy = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, copy, ignore=shutil.ignore_patterns("*_test.rego"))
    return copy


@pytest.fixture
def engine(policy_dir: Path) -> Any:
    built = EmbeddedEngine(DirectorySource(policy_dir), "toolgate/decision")
    yield built
    built.close()


def _tool(name: str) -> dict[str, Any]:
    return {"name": name, "version": "1", "registered": True}


def test_the_shipped_policy_is_verified_and_read_as_declared(engine: EmbeddedEngine) -> None:
    reads = SessionReads(engine, DeclarationsAudit(engine.policy_modules, opa_binary()))
    reads.prime()
    assert reads.of_tool(_tool("deleteFile")).members == DECLARED
    assert reads.of_tool(_tool("exportReport")).members == frozenset()


def test_a_reload_that_reads_an_undeclared_member_builds_the_whole_session(
    engine: EmbeddedEngine, policy_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reads = SessionReads(engine, DeclarationsAudit(engine.policy_modules, opa_binary()))
    reads.prime()
    before = engine.revision()
    files = policy_dir / FILES
    files.write_text(files.read_text() + UNDECLARED_READ)
    assert engine.reload() and engine.revision() != before
    assert reads.of_tool(_tool("readFile")) == EVERYTHING  # not checked yet
    reads.prime()
    assert reads.of_tool(_tool("readFile")) == EVERYTHING  # checked: short
    assert reads.of_tool(_tool("exportReport")) == EVERYTHING  # the whole revision, not one family
    assert metrics.SESSION_READS_GAPS._value.get() == 1
    gap = next(r for r in caplog.records if getattr(r, "event", None) == "session_reads_gap")
    assert "family files reads input.session.conversation.resources" in gap.getMessage()


def test_the_gaps_are_the_findings_of_policy_check(engine: EmbeddedEngine, policy_dir: Path) -> None:
    opa = opa_binary()
    assert opa is not None
    engine.revision()  # loads the first bundle
    modules = engine.policy_modules()
    assert modules is not None and declaration_gaps(modules, opa) == []
    files = policy_dir / FILES
    files.write_text(files.read_text().replace("session_reads := {", "session_reads := {1, "))
    assert engine.reload()
    modules = engine.policy_modules()
    assert modules is not None
    assert declaration_gaps(modules, opa) == ["family files: session_reads is not a literal set of strings"]


def test_without_an_opa_binary_nothing_is_trusted(engine: EmbeddedEngine, policy_dir: Path) -> None:
    files = policy_dir / FILES
    files.write_text(files.read_text() + "\n# content this process has not verified before\n")
    assert engine.reload()
    reads = SessionReads(engine, DeclarationsAudit(engine.policy_modules, None))
    reads.prime()
    assert reads.of_tool(_tool("exportReport")) == EVERYTHING


def test_an_engine_that_cannot_show_its_modules_is_never_trusted(engine: EmbeddedEngine) -> None:
    reads = SessionReads(engine, DeclarationsAudit(lambda: None, opa_binary()))
    reads.prime()
    assert reads.of_tool(_tool("deleteFile")) == EVERYTHING
