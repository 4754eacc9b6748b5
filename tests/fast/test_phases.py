"""Per-phase durations (app.decide.phases): exclusive, summed over repeats, ``total`` inclusive.

The clock is scripted (``time.perf_counter`` of the module replaced by a counter the test moves),
so nothing here depends on how fast the machine is."""

from __future__ import annotations

import pytest

from app.decide import phases as phases_module
from app.decide.phases import Phases


class ScriptedClock:
    """``perf_counter`` that returns ``now``; ``advance(ms)`` moves it."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> None:
        self.now += ms / 1000


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> ScriptedClock:
    scripted = ScriptedClock()
    monkeypatch.setattr(phases_module.time, "perf_counter", scripted)
    return scripted


def test_nested_phases_count_their_own_time_only(clock: ScriptedClock) -> None:
    """The approval step asks the policy, which admits the call: approval's figure leaves out
    the policy's and the limits', so the phases add up to the call's total."""
    phases = Phases()
    with phases.measure("total"):
        clock.advance(1)
        with phases.measure("approval"):
            clock.advance(2)
            with phases.measure("policy"):
                clock.advance(50)
            with phases.measure("limits"):
                clock.advance(3)
            clock.advance(4)
        clock.advance(5)
    assert phases.ms == {"policy": 50.0, "limits": 3.0, "approval": 6.0, "total": 65.0}
    assert sum(ms for phase, ms in phases.ms.items() if phase != "total") <= phases.ms["total"]


def test_a_phase_that_runs_twice_counts_both_runs(clock: ScriptedClock) -> None:
    """A call with a grant is evaluated twice: both evaluations count as policy time."""
    phases = Phases()
    with phases.measure("approval"):
        for cost in (7, 11):
            with phases.measure("policy"):
                clock.advance(cost)
    assert phases.ms == {"policy": 18.0, "approval": 0.0}


def test_spans_keep_each_phase_from_its_start_to_its_end(clock: ScriptedClock) -> None:
    phases = Phases()
    with phases.measure("approval"):
        clock.advance(2)
        with phases.measure("policy"):
            clock.advance(5)
    lengths = {name: (end - start) / 1e6 for name, start, end in phases.spans}
    assert lengths == pytest.approx({"policy": 5.0, "approval": 7.0})


def test_a_phase_that_raises_is_still_counted(clock: ScriptedClock) -> None:
    phases = Phases()
    with pytest.raises(RuntimeError), phases.measure("policy"):
        clock.advance(3)
        raise RuntimeError("engine down")
    assert phases.ms == {"policy": 3.0}
