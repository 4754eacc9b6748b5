"""``Recorder.run`` (app.decide.recorder): do it and record it, whatever the outcome."""

from __future__ import annotations

import pytest

from app.audit.records import AuditEvent
from app.decide.phases import Phases
from app.decide.recorder import Recorder
from app.errors import Conflict, DependencyUnavailable, ToolgateError
from tests.support import fakes


def event(result: object, error: ToolgateError | None) -> AuditEvent:
    return AuditEvent(event="decide", tenant="acme", request_id="r", reasons=(f"{result!r}/{error and error.code}",))


@pytest.fixture
def log(deps):
    return deps.decision_log


@pytest.fixture
def recorder(log) -> Recorder:
    return Recorder(log, key_hash_secret="s" * 32)


def test_a_success_is_returned_after_its_record(recorder, deps) -> None:
    seen = []
    assert recorder.run(lambda: 7, event, recorded=lambda record: seen.append(record.seq)) == 7
    assert [r.reasons for r in fakes.records(deps)] == [("7/None",)] and seen == [1]


def test_a_refusal_is_recorded_and_re_raised(recorder, deps) -> None:
    def refuse() -> int:
        raise Conflict("taken")

    with pytest.raises(Conflict):
        recorder.run(refuse, event)
    assert [r.reasons for r in fakes.records(deps)] == [("None/CONFLICT",)]


def test_an_unexpected_failure_is_described_with_neither_result_nor_error(recorder, deps) -> None:
    def crash() -> int:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        recorder.run(crash, event)
    assert [r.reasons for r in fakes.records(deps)] == [("None/None",)]


def test_an_outcome_described_as_nothing_leaves_no_record(recorder, deps) -> None:
    assert recorder.run(lambda: 1, lambda result, error: None) == 1
    assert list(fakes.records(deps)) == []


def test_an_unwritable_record_fails_the_call_and_undoes_a_success(recorder, log) -> None:
    log.failing = True
    undone = []
    with pytest.raises(DependencyUnavailable):
        recorder.run(lambda: "reserved", event, unrecorded=undone.append)
    assert undone == ["reserved"]


def test_an_unwritable_record_of_a_refusal_replaces_it_with_503_and_undoes_nothing(recorder, log) -> None:
    log.failing = True
    undone = []

    def refuse() -> str:
        raise Conflict("taken")

    with pytest.raises(DependencyUnavailable):
        recorder.run(refuse, event, unrecorded=undone.append)
    assert undone == []


def test_the_append_is_timed_as_the_log_phase_and_not_in_the_record(recorder, deps) -> None:
    phases = Phases()
    recorder.run(lambda: 1, lambda r, e: AuditEvent(event="decide", tenant="acme", request_id="r",
                                                    durations_ms=dict(phases.ms)), phases=phases)
    assert "log" in phases.ms
    assert "log" not in next(fakes.records(deps)).durations_ms


def test_key_hashes_are_keyed_and_stable(recorder) -> None:
    assert recorder.key_hash("k") == recorder.key_hash("k") != Recorder(recorder._log, key_hash_secret="t" * 32).key_hash("k")
    assert "k" not in recorder.key_hash("k") or len(recorder.key_hash("k")) == 64
