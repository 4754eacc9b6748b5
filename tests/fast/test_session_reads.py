"""Session facts on demand (app.session.reads, docs/session.md "Facts on demand"): the gateway
builds only the members the policy's ``data.toolgate.session_reads`` names for the call's tool,
reads no session when it names none, and builds everything when in doubt (no answer, an engine
error, a shadow candidate, a decision by another policy revision). The engine is scripted (the
socket-free tier); tests/unit/test_session_reads.py asks the real embedded engine."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from app.decide.phases import Phases
from app.decide.pipeline import decide
from app.decide.stages import DecideCall, Progress
from app.engine.base import RawResult
from app.engine.shadow import ShadowEvaluator
from app.errors import DependencyUnavailable
from app.session.reads import EVERYTHING, Reads
from app.session.store import SessionStore
from tests.fast.test_shadow import Candidate
from tests.support import fakes


class DeclaringEngine(fakes.ScriptedEngine):
    """A scripted engine whose ``toolgate/session_reads`` answer is ``reads`` (made by
    ``reads_revision``; an exception: raised), and that counts the questions."""

    def __init__(self, reads: Any, reads_revision: str = fakes.REVISION) -> None:
        super().__init__()
        self.reads, self.reads_revision, self.asked = reads, reads_revision, 0

    def evaluate_document(self, path: str, policy_input: dict[str, Any]) -> RawResult:
        assert path == "toolgate/session_reads" and set(policy_input) == {"tool"}
        self.asked += 1
        if isinstance(self.reads, Exception):
            raise self.reads
        return RawResult(self.reads, True, self.reads_revision)


def _read(config, engine: DeclaringEngine, snapshots: list[bool]) -> Any:
    """Deps over ``engine`` whose session store notes each snapshot it takes (``with_recent``)."""
    built = fakes.deps(config, engine)

    class CountingStore(SessionStore):
        def snapshot(self, *args: Any, **kwargs: Any) -> Any:
            snapshots.append(kwargs.get("with_recent", True))
            return super().snapshot(*args, **kwargs)

    return replace(built, sessions=CountingStore(built.redis, config))


def run(deps, tool: str, tool_input: dict[str, Any], conversation: str = "c-1") -> Any:
    body = {"tool": tool, "version": "1", "input": tool_input, "context": {"conversation_id": conversation}}
    call = DecideCall(request_id="req-1", authorization=(fakes.bearer(deps.settings),), body=json.dumps(body).encode())
    return decide(deps, Progress(call), Phases())


def test_a_tool_whose_families_read_no_session_costs_no_session_read(config) -> None:
    engine, snapshots = DeclaringEngine([]), []
    deps = _read(config, engine, snapshots)
    for _ in range(3):
        assert run(deps, "readFile", {"path": "/srv/a.csv"}).decision == "allow"
    assert snapshots == []
    assert all("session" not in seen and "history" not in seen for seen in engine.inputs)
    assert engine.asked == 1  # once per tool and policy revision
    deps.decision_log.close()


def test_only_the_declared_members_are_built(config) -> None:
    engine, snapshots = DeclaringEngine(["history", "session.conversation.labels", "session.subject.calls"]), []
    deps = _read(config, engine, snapshots)
    run(deps, "readFile", {"path": "/srv/a.csv"})
    run(deps, "readFile", {"path": "/srv/b.csv"})
    seen = engine.inputs[-1]
    # The first read was allowed: its label counts, reported or not (unknown is not clean).
    assert seen["session"] == {"conversation": {"id": "c-1", "labels": ["untrusted_content"]},
                               "subject": {"calls": {"1m": {"readFile": 1}, "1h": {"readFile": 1}, "24h": {"readFile": 1}}}}
    assert seen["history"]["tools"] == {"readFile": 1}
    assert snapshots == [False, False]  # the recent calls' arguments are not read
    deps.decision_log.close()


def test_a_decision_by_another_policy_revision_is_asked_again_with_the_whole_session(config) -> None:
    """The reads were answered by an older revision (a reload came between): the decision may
    rest on members that were not built, so the policy is asked again with all of them."""
    engine, snapshots = DeclaringEngine([], reads_revision="sha256:older"), []
    deps = _read(config, engine, snapshots)
    assert run(deps, "readFile", {"path": "/srv/a.csv"}).decision == "allow"
    first, second = engine.inputs
    assert "session" not in first
    assert set(second["session"]) == {"windows", "conversation", "subject", "recent", "truncated"}
    assert "history" in second and snapshots == [True]
    deps.decision_log.close()


def test_when_the_answer_is_in_doubt_every_member_is_built(config) -> None:
    for answer in ({"not": "a list"}, [1], DependencyUnavailable("policy engine is unavailable")):
        engine, snapshots = DeclaringEngine(answer), []
        deps = _read(config, engine, snapshots)
        run(deps, "readFile", {"path": "/srv/a.csv"})
        assert set(engine.inputs[-1]["session"]) == {"windows", "conversation", "subject", "recent", "truncated"}
        deps.decision_log.close()


def test_reads_are_wanted_by_path_and_stale_only_for_another_revision() -> None:
    reads = Reads(frozenset({"session.conversation.labels", "history"}), "r1")
    assert reads.wants("session") and reads.wants("session.conversation") and reads.wants("session.conversation.labels")
    assert not reads.wants("session.subject") and not reads.wants("session.conversation.calls")
    assert reads.wants("history") and reads.any_session
    assert not Reads(frozenset(), "r1").any_session
    assert (reads.stale("r1"), reads.stale("r2")) == (False, True)
    assert not EVERYTHING.stale("r2") and EVERYTHING.wants("session.recent")


def test_a_shadow_candidate_sees_the_whole_session(config) -> None:
    """The candidate policy may read members the active one does not declare."""
    engine, snapshots = DeclaringEngine([]), []
    deps = _read(config, engine, snapshots)
    candidate = Candidate()
    deps = replace(deps, shadow=ShadowEvaluator(candidate, deadline_ms=2000, workers=1))
    run(deps, "readFile", {"path": "/srv/a.csv"})
    assert set(candidate.inputs[-1]["session"]) == {"windows", "conversation", "subject", "recent", "truncated"}
    assert engine.inputs[-1] == candidate.inputs[-1] and engine.asked == 0
    deps.shadow.close()
    deps.decision_log.close()
