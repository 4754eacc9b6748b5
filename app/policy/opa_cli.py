"""``opa test`` for ``toolgate policy test`` when an ``opa`` binary is there: the test results
as OPA prints them, and with coverage the line coverage of each policy file (tests excluded)
with its uncovered lines.

``opa test --coverage --format json`` reports, per file, the ``covered`` and ``not_covered``
row ranges; a row counts once even when several expressions start on it.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from app.policy.bundle import TEST_SUFFIX


class OpaRunError(RuntimeError):
    """``opa`` could not run or printed something that is not its report."""


@dataclass(frozen=True)
class FileCoverage:
    """Line coverage of one policy file: covered and uncovered row numbers."""

    path: str
    covered: frozenset[int]
    uncovered: tuple[int, ...]

    @property
    def percent(self) -> float:
        total = len(self.covered) + len(self.uncovered)
        return 100.0 if total == 0 else 100.0 * len(self.covered) / total


@dataclass
class CoverageReport:
    """Coverage of the policy files (``*_test.rego`` excluded), sorted by path."""

    files: list[FileCoverage] = field(default_factory=list)

    @property
    def percent(self) -> float:
        covered = sum(len(f.covered) for f in self.files)
        total = covered + sum(len(f.uncovered) for f in self.files)
        return 100.0 if total == 0 else 100.0 * covered / total

    def format_text(self) -> str:
        """One line per file (``percent path``, then ``uncovered: rows`` when any) and the total."""
        lines = ["coverage (policy files, tests excluded):"]
        for f in self.files:
            lines.append(f"  {f.percent:6.2f}%  {f.path}")
            if f.uncovered:
                lines.append(f"           uncovered lines: {_ranges(f.uncovered)}")
        lines.append(f"  {self.percent:6.2f}%  total")
        return "\n".join(lines)


def _ranges(rows: tuple[int, ...]) -> str:
    parts: list[str] = []
    start = prev = rows[0]
    for row in (*rows[1:], None):
        if row is not None and row == prev + 1:
            prev = row
            continue
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
        if row is not None:
            start = prev = row
    return ", ".join(parts)


def _rows(ranges: list[dict]) -> set[int]:
    rows: set[int] = set()
    for r in ranges:
        rows.update(range(int(r["start"]["row"]), int(r["end"]["row"]) + 1))
    return rows


def parse_coverage(document: dict) -> CoverageReport:
    """The ``CoverageReport`` of an ``opa test --coverage --format json`` document. Raises
    ``OpaRunError`` when it is not one."""
    files = document.get("files") if isinstance(document, dict) else None
    if not isinstance(files, dict):
        raise OpaRunError("opa test --coverage printed no coverage report")
    report = CoverageReport()
    for path in sorted(files):
        if path.endswith(TEST_SUFFIX):
            continue
        entry = files[path]
        covered = _rows(entry.get("covered") or [])
        uncovered = _rows(entry.get("not_covered") or []) - covered
        report.files.append(FileCoverage(path, frozenset(covered), tuple(sorted(uncovered))))
    return report


#: ``opa test``'s time per test (its default, 5 s, fails the heaviest test, which evaluates every
#: shipped decision case, on a loaded machine).
TEST_TIMEOUT = "60s"


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OpaRunError(f"{argv[0]} could not run: {exc}") from None


def run_opa_test(opa: Path, policy_dir: Path) -> tuple[bool, str]:
    """``opa test --var-values DIR``: (all passed, OPA's output). For each failure OPA prints
    what the test printed (the fixtures' ``expect``: the decision with its matched rules, and
    what was expected), then the failed expression with the value of each of its variables
    under it; passing tests are only counted."""
    done = _run([str(opa), "test", "--timeout", TEST_TIMEOUT, "--var-values", str(policy_dir)])
    return done.returncode == 0, (done.stdout + done.stderr).rstrip()


def run_opa_coverage(opa: Path, policy_dir: Path) -> CoverageReport:
    """``opa test --coverage --format json DIR`` parsed. Raises ``OpaRunError``."""
    done = _run([str(opa), "test", "--timeout", TEST_TIMEOUT, "--coverage", "--format", "json", str(policy_dir)])
    try:
        document = json.loads(done.stdout)
    except ValueError:
        raise OpaRunError(f"opa test --coverage failed: {(done.stderr or done.stdout)[-2000:]}") from None
    return parse_coverage(document)
