"""Which session facts the policy reads, asked of the real embedded engine
(``app.session.reads.SessionReads``): the shipped families' declarations per tool, asked once
per tool and revision, a hot reload that declares more, and a policy without the document
(every member). tests/api/test_engine_parity.py asks the real ``opa`` server the same."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from app.engine.base import RawResult
from app.engine.embedded import EmbeddedEngine
from app.engine.sources import DirectorySource
from app.session.reads import SessionReads
from tests.conftest import POLICY_DIR


class Counting:
    """The real engine, counting the documents it is asked for."""

    def __init__(self, engine: EmbeddedEngine) -> None:
        self.engine, self.asked = engine, 0

    def evaluate_document(self, path: str, policy_input: dict[str, Any]) -> RawResult:
        self.asked += 1
        return self.engine.evaluate_document(path, policy_input)

    def revision(self) -> str:
        return self.engine.revision()


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    copy = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, copy, ignore=shutil.ignore_patterns("*_test.rego"))
    return copy


def _tool(name: str) -> dict[str, Any]:
    return {"name": name, "version": "1", "registered": True, "mutating": True, "risk": "high"}


def test_the_shipped_families_declare_what_they_read_asked_once_per_tool(policy_dir: Path) -> None:
    engine = EmbeddedEngine(DirectorySource(policy_dir), "toolgate/decision")
    counting = Counting(engine)
    reads = SessionReads(counting)
    try:
        assert reads.of_tool(_tool("exportReport")).members == frozenset()
        assert reads.of_tool(_tool("processPayment")).members == frozenset()
        assert reads.of_tool(_tool("deleteFile")).members == {
            "session.conversation.calls", "session.subject.calls", "session.windows"}
        assert reads.of_tool(_tool("send_money")).members == {
            "session.conversation.labels", "session.truncated", "provenance"}
        assert reads.of_tool(_tool("unknownTool")).members == frozenset()  # no family: the library decides
        for _ in range(3):
            assert reads.of_tool(_tool("exportReport")).revision == engine.revision()
        assert counting.asked == 5
    finally:
        engine.close()


def test_a_reloaded_policy_that_reads_more_is_asked_again(policy_dir: Path) -> None:
    engine = EmbeddedEngine(DirectorySource(policy_dir), "toolgate/decision")
    reads = SessionReads(engine)
    try:
        before = reads.of_tool(_tool("processPayment"))
        assert before.members == frozenset()
        payments = policy_dir / "tools" / "payments" / "payments.rego"
        payments.write_text(payments.read_text().replace("session_reads := set()", 'session_reads := {"session.recent"}'))
        assert engine.reload()
        after = reads.of_tool(_tool("processPayment"))
        assert after.members == {"session.recent"} and after.revision == engine.revision() != before.revision
        assert before.stale(engine.revision())
    finally:
        engine.close()


def test_a_policy_without_the_document_reads_everything(policy_dir: Path) -> None:
    (policy_dir / "toolgate" / "session_reads.rego").unlink()
    engine = EmbeddedEngine(DirectorySource(policy_dir), "toolgate/decision")
    try:
        answer = SessionReads(engine).of_tool(_tool("exportReport"))
        assert answer.members == {"*"} and answer.revision == engine.revision()
    finally:
        engine.close()
