"""The decide path's CPU budget (bench.budget): the verdict logic on given figures, and the
table in docs/performance.md, which must state the same budget as ``BUDGET``. Nothing here is
timed: the check itself runs as ``python -m bench.phases --check`` in .ci/run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import budget

DOC = Path(__file__).resolve().parents[2] / "docs" / "performance.md"


def at_budget() -> dict[str, float]:
    """A mix (report phase -> µs) that spends exactly each line's budget: a line of several
    phases spends it in its first (``policy`` what ``engine`` leaves of it)."""
    mix = {phase: 0.0 for _, phases in budget.BUDGET.values() for phase in phases}
    for name, (us, phases) in budget.BUDGET.items():
        if name not in ("policy",):
            mix[phases[0]] = float(us)
    mix["policy"] = float(budget.BUDGET["policy"][0] - budget.BUDGET["engine"][0])
    return mix


def test_a_mix_at_its_budget_passes_on_the_reference_machine() -> None:
    lines = budget.judge(at_budget(), factor=1.0)
    assert [line.name for line in lines] == list(budget.BUDGET)
    assert not [line for line in lines if line.over]


@pytest.mark.parametrize("phase, line", [("auth", "auth"), ("grant", "idempotency"), ("limits", "session"),
                                         ("engine", "engine"), ("respond", "web + respond")])
def test_a_phase_twice_as_slow_fails_its_line(phase: str, line: str) -> None:
    mix = at_budget()
    mix[phase] += budget.BUDGET[line][0]  # the line now costs twice its budget
    over = {entry.name for entry in budget.judge(mix, factor=1.0) if entry.over}
    assert line in over


def test_the_tolerance_is_half_the_budget_scaled_by_the_machine() -> None:
    mix = at_budget()
    auth_budget = budget.BUDGET["auth"][0]
    mix["auth"] = auth_budget * 1.5 * 2.0  # exactly the allowance on a machine twice as slow
    [auth] = [line for line in budget.judge(mix, factor=2.0) if line.name == "auth"]
    assert auth.allowed == auth_budget * 3 and not auth.over
    mix["auth"] += 0.2
    [auth] = [line for line in budget.judge(mix, factor=2.0) if line.name == "auth"]
    assert auth.over


def test_the_speed_factor_is_the_median_reference_over_the_reference_machines() -> None:
    samples = [budget.REFERENCE_US * f for f in (0.9, 2.0, 2.0, 2.1, 40.0)]
    assert budget.speed_factor(samples) == pytest.approx(2.0)


def test_a_faster_machine_is_judged_at_the_budget_itself() -> None:
    assert budget.speed_factor([budget.REFERENCE_US * 0.6] * 3) == 1.0


def test_the_verdict_names_the_lines_over_budget() -> None:
    mix = at_budget()
    mix["record"] = budget.BUDGET["record"][0] * 2
    lines = budget.judge(mix, factor=1.0)
    text = budget.format_verdict(lines, 1.0, [budget.REFERENCE_US])
    assert text.splitlines()[-1] == "FAILED: over budget: record"
    assert "record" in text and "OVER" in text


def test_the_reference_workload_does_its_work() -> None:
    assert budget.reference_unit(rounds=2) == budget.reference_unit(rounds=2) > 0


def test_docs_state_the_same_budget() -> None:
    """docs/performance.md's budget table, row by row, against ``BUDGET``."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## CPU budget", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([a-z +]+) \| ([\d,]+) \| ([\d,]+) \| ([^|]+) \|$", section, flags=re.MULTILINE)
    stated = {name.strip(): (float(us.replace(",", "")), float(target.replace(",", "")))
              for name, us, target, _ in rows}
    assert stated == {name: (us, budget.TARGET[name]) for name, (us, _) in budget.BUDGET.items()}
    assert f"{budget.TOLERANCE * 100:.0f} %" in section
