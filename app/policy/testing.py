"""The embedded Rego test runner: ``toolgate policy test [DIR]`` when no ``opa`` binary is there
(``app.policy.opa_cli`` runs ``opa test`` otherwise). The bundle layout and loading are
``app.policy.bundle``'s.

A test is a rule whose head starts at column 0 with ``test_`` in a ``*_test.rego`` file. It
passes when ``data.<package>.<test>`` is exactly ``true``. Several bodies with one name are one
test (OPA ORs them into one rule).

A failing test is evaluated once more, alone and traced, to say why (``TestResult.details``):
what it printed (the shared fixtures' ``expect`` prints the decision it got, with its matched
rules, and what was expected), then each expression of the test's own body that failed, as
written in the file, with the values of the local variables OPA recorded at that point, the way
``opa test --var-values`` shows them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from opa_bindings import OpaEngine, OpaError, OpaUndefinedError

from app.policy.bundle import PolicyLoadError, load_bundle, read_directory

__all__ = [
    "PolicyLoadError",
    "PolicyTestReport",
    "TestCase",
    "TestResult",
    "discover_tests",
    "explain_failure",
    "run_policy_tests",
]

TEST_SUFFIX = "_test.rego"
_PACKAGE = re.compile(r"^package\s+([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*(?:#.*)?$")
_TEST_HEAD = re.compile(r"^(test_[A-Za-z0-9_]*)\b")

Outcome = Literal["pass", "fail", "error"]


@dataclass(frozen=True)
class TestCase:
    """One Rego test: ``data.<package>.<name>``, first defined at ``file:line``."""

    __test__ = False  # not a pytest test class

    package: str
    name: str
    file: Path
    line: int

    @property
    def qualified_name(self) -> str:
        return f"{self.package}.{self.name}"


@dataclass(frozen=True)
class TestResult:
    """The outcome of one test; ``message`` explains a fail or an error."""

    __test__ = False

    case: TestCase
    outcome: Outcome
    message: str = ""
    #: For a fail: ``file:line: <printed text>`` and ``file:line: failed: <expression>`` lines.
    details: tuple[str, ...] = ()


@dataclass
class PolicyTestReport:
    """All test results of one run, in discovery order."""

    policy_dir: Path
    results: list[TestResult] = field(default_factory=list)

    def _count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.results if r.outcome == outcome)

    @property
    def passed(self) -> int:
        return self._count("pass")

    @property
    def failed(self) -> int:
        return self._count("fail")

    @property
    def errored(self) -> int:
        return self._count("error")

    @property
    def ok(self) -> bool:
        """True when there is at least one test and every test passed."""
        return bool(self.results) and self.passed == len(self.results)

    def format_text(self) -> str:
        """One line per test (``PASS|FAIL|ERROR pkg.test_x (file:line)``, with the reason for
        fails and errors) and the totals line ``policy tests: N passed, M failed`` where
        failed counts fails and errors."""
        lines = []
        for r in self.results:
            line = f"{r.outcome.upper()} {r.case.qualified_name} ({r.case.file.as_posix()}:{r.case.line})"
            if r.message:
                line += f": {r.message}"
            lines.append(line)
            lines.extend(f"    {detail}" for detail in r.details)
        lines.append(f"policy tests: {self.passed} passed, {self.failed + self.errored} failed")
        return "\n".join(lines)


def discover_tests(policy_dir: Path) -> list[TestCase]:
    """The tests of every ``*_test.rego`` under ``policy_dir``, sorted by file then line.

    A test is a rule head ``test_<name>`` at column 0; its package comes from the file's
    ``package`` line. Same-named heads in one package are one test (first location kept).
    ``file`` is relative to ``policy_dir``. Raises ``PolicyLoadError`` for a test file without
    a package line or a missing ``policy_dir``.
    """
    bundle = read_directory(policy_dir, include_tests=True)
    cases: list[TestCase] = []
    seen: set[tuple[str, str]] = set()
    for name in bundle.modules:
        rel = Path(name)
        if not rel.name.endswith(TEST_SUFFIX):
            continue
        package = None
        for number, line in enumerate(bundle.files[name].decode("utf-8", "replace").splitlines(), start=1):
            if package is None:
                found = _PACKAGE.match(line)
                if found:
                    package = found[1]
                continue
            head = _TEST_HEAD.match(line)
            if head and (package, head[1]) not in seen:
                seen.add((package, head[1]))
                cases.append(TestCase(package=package, name=head[1], file=rel, line=number))
        if package is None:
            raise PolicyLoadError(f"{rel.as_posix()}: no package line", rel)
    return cases


_UNDEFINED = object()


def _judge(case: TestCase, value: object) -> TestResult:
    if value is True:
        return TestResult(case, "pass")
    if value is _UNDEFINED:
        return TestResult(case, "fail", "result is undefined")
    return TestResult(case, "fail", f"result is {json.dumps(value)[:200]}, not true")


def _run_one(engine: OpaEngine, case: TestCase) -> TestResult:
    try:
        return _judge(case, engine.eval_document(case.qualified_name))
    except OpaUndefinedError:
        return _judge(case, _UNDEFINED)
    except OpaError as exc:
        return TestResult(case, "error", exc.message)


def _run_package(engine: OpaEngine, package: str, cases: list[TestCase]) -> list[TestResult]:
    """Evaluate a whole test package in one query (each new query is compiled, which costs far
    more than evaluating); if that raises, evaluate test by test to attribute the error."""
    try:
        document = engine.eval_document(package)
    except OpaUndefinedError:
        document = {}
    except OpaError:
        return [_run_one(engine, case) for case in cases]
    if not isinstance(document, dict):
        return [_run_one(engine, case) for case in cases]
    return [_judge(case, document.get(case.name, _UNDEFINED)) for case in cases]


_MAX_VALUE_CHARS = 300


def _source_line(policy_dir: Path, location: str) -> str | None:
    """The stripped source text at ``file:line`` (relative to ``policy_dir``), or None."""
    file, _, row = location.rpartition(":")
    if not file or not row.isdigit():
        return None
    try:
        lines = (policy_dir / file).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    number = int(row)
    return lines[number - 1].strip() if 0 < number <= len(lines) else None


def _value(value: object) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 3] + "..."


def explain_failure(engine: OpaEngine, policy_dir: Path, case: TestCase) -> tuple[str, ...]:
    """Why ``case`` failed: its prints and the failed expressions of its own body with the
    local variables' values (see the module docstring). Empty when the trace says nothing."""
    try:
        engine.eval_document(case.qualified_name, trace=True)
    except OpaUndefinedError:
        pass
    except OpaError:
        return ()
    details = [f"{location}: {message}" for message, location in getattr(engine, "last_prints", None) or []]
    for event in getattr(engine, "last_trace", None) or []:
        if event.get("op") != "Fail" or event.get("parent_id") != 0 or event.get("query_id") == 0:
            continue
        location = str(event.get("location", ""))
        expression = _source_line(policy_dir, location) or str(event.get("node", ""))
        values = event.get("locals") or {}
        shown = ", ".join(f"{name} = {_value(value)}" for name, value in sorted(values.items()))
        details.append(f"{location}: failed: {expression}" + (f"    with {shown}" if shown else ""))
    return tuple(details)


def run_policy_tests(policy_dir: Path) -> PolicyTestReport:
    """Run every Rego test under ``policy_dir`` in a fresh embedded engine.

    Loads the whole bundle, tests included (``load_bundle``), then evaluates each discovered
    test: ``pass`` if its value is exactly ``true``, ``fail`` if it is undefined or anything
    else, ``error`` (with the engine's message) if evaluation raises. Raises
    ``PolicyLoadError`` when the bundle cannot be loaded.
    """
    engine = OpaEngine()
    engine.print_handler = lambda message, location: None  # shown with the failure they explain
    try:
        load_bundle(engine, policy_dir, include_tests=True)
        cases = discover_tests(policy_dir)
        by_package: dict[str, list[TestCase]] = {}
        for case in cases:
            by_package.setdefault(case.package, []).append(case)
        results: dict[TestCase, TestResult] = {}
        for package, members in by_package.items():
            results.update((r.case, r) for r in _run_package(engine, package, members))
        for case, result in results.items():
            if result.outcome == "fail":
                results[case] = replace(result, details=explain_failure(engine, Path(policy_dir), case))
        return PolicyTestReport(policy_dir=policy_dir, results=[results[case] for case in cases])
    finally:
        engine.close()
