"""Load a policy bundle directory into the embedded OPA engine and run its Rego unit tests.

This is the code behind ``toolgate policy test [DIR]`` (DESIGN §9). The layout follows OPA
bundles: every ``**/*.rego`` file is a module (``*_test.rego`` files hold the tests), and a
``data.json`` in folder ``a/b`` (relative to the bundle root) is merged at ``data.a.b``; the one
at the root is merged at ``data``. ``load_bundle`` is shared with the embedded policy engine.

A test is a rule whose head starts at column 0 with ``test_`` in a ``*_test.rego`` file. It
passes when ``data.<package>.<test>`` is exactly ``true``. Several bodies with one name are one
test (OPA ORs them into one rule).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from opa_bindings import OpaEngine, OpaError, OpaUndefinedError

__all__ = [
    "PolicyLoadError",
    "PolicyTestReport",
    "TestCase",
    "TestResult",
    "discover_tests",
    "load_bundle",
    "run_policy_tests",
]

TEST_SUFFIX = "_test.rego"
DATA_FILE = "data.json"
_PACKAGE = re.compile(r"^package\s+([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*(?:#.*)?$")
_TEST_HEAD = re.compile(r"^(test_[A-Za-z0-9_]*)\b")
_ERROR_LOCATION = re.compile(r"(?P<file>[^\s:]+\.rego):\d+")

Outcome = Literal["pass", "fail", "error"]


class PolicyLoadError(ValueError):
    """A policy bundle cannot be loaded: a parse or compile error, invalid or conflicting
    data, a missing directory. ``path`` is the offending file (relative to the bundle root)
    when it is known. A ``ValueError``, so callers that treat bad content generically work."""

    def __init__(self, message: str, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


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
        lines.append(f"policy tests: {self.passed} passed, {self.failed + self.errored} failed")
        return "\n".join(lines)


def _bundle_files(policy_dir: Path, *, include_tests: bool) -> tuple[list[Path], list[Path]]:
    if not policy_dir.is_dir():
        raise PolicyLoadError(f"policy directory {policy_dir} does not exist")
    modules, data_files = [], []
    for path in sorted(policy_dir.rglob("*")):
        rel = path.relative_to(policy_dir)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        if path.suffix == ".rego" and (include_tests or not path.name.endswith(TEST_SUFFIX)):
            modules.append(rel)
        elif path.name == DATA_FILE:
            data_files.append(rel)
    data_files.sort(key=lambda rel: (len(rel.parts), rel))  # the root data.json first
    return modules, data_files


def _read(policy_dir: Path, rel: Path) -> str:
    try:
        return (policy_dir / rel).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyLoadError(f"{rel.as_posix()}: cannot read: {exc}", rel) from None


def load_bundle(engine: OpaEngine, policy_dir: Path, *, include_tests: bool) -> list[Path]:
    """Load the bundle at ``policy_dir`` into ``engine`` and check that it compiles.

    Adds every ``**/*.rego`` module (``*_test.rego`` only with ``include_tests``) under its
    POSIX path relative to ``policy_dir``, and merges every ``data.json`` at the data path of
    its folder (root: ``data``; ``a/b/data.json``: ``data.a.b``). Hidden files and folders are
    skipped. Modules are added in sorted path order, data files shallowest first, then by path.

    Returns the loaded files, relative to ``policy_dir``: modules first, then data files.
    Raises ``PolicyLoadError`` naming the file on an unreadable file, a Rego parse or compile
    error, invalid JSON or a data merge conflict, or when ``policy_dir`` is not a directory.
    """
    modules, data_files = _bundle_files(policy_dir, include_tests=include_tests)
    for rel in modules:
        try:
            engine.add_policy(rel.as_posix(), _read(policy_dir, rel))
        except OpaError as exc:
            raise PolicyLoadError(f"{rel.as_posix()}: {exc.message}", rel) from None
    for rel in data_files:
        try:
            value = json.loads(_read(policy_dir, rel))
        except json.JSONDecodeError as exc:
            raise PolicyLoadError(f"{rel.as_posix()}: invalid JSON: {exc}", rel) from None
        data_path = ".".join(rel.parent.parts)
        if not data_path and not isinstance(value, dict):
            raise PolicyLoadError(f"{rel.as_posix()}: the root data.json must hold a JSON object", rel)
        try:
            engine.add_data(value, path=data_path)
        except OpaError as exc:
            target = f"data.{data_path}" if data_path else "data"
            raise PolicyLoadError(f"{rel.as_posix()}: cannot merge at {target}: {exc.message}", rel) from None
    try:
        engine.eval_query("true")  # compiles every module: unsafe vars, type and conflict errors
    except OpaError as exc:
        match = _ERROR_LOCATION.search(exc.message)
        rel = Path(match["file"]) if match else None
        raise PolicyLoadError(f"policy bundle {policy_dir} does not compile: {exc.message}", rel) from None
    return modules + data_files


def discover_tests(policy_dir: Path) -> list[TestCase]:
    """The tests of every ``*_test.rego`` under ``policy_dir``, sorted by file then line.

    A test is a rule head ``test_<name>`` at column 0; its package comes from the file's
    ``package`` line. Same-named heads in one package are one test (first location kept).
    ``file`` is relative to ``policy_dir``. Raises ``PolicyLoadError`` for a test file without
    a package line or a missing ``policy_dir``.
    """
    modules, _ = _bundle_files(policy_dir, include_tests=True)
    cases: list[TestCase] = []
    seen: set[tuple[str, str]] = set()
    for rel in modules:
        if not rel.name.endswith(TEST_SUFFIX):
            continue
        package = None
        for number, line in enumerate(_read(policy_dir, rel).splitlines(), start=1):
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


def run_policy_tests(policy_dir: Path) -> PolicyTestReport:
    """Run every Rego test under ``policy_dir`` in a fresh embedded engine.

    Loads the whole bundle, tests included (``load_bundle``), then evaluates each discovered
    test: ``pass`` if its value is exactly ``true``, ``fail`` if it is undefined or anything
    else, ``error`` (with the engine's message) if evaluation raises. Raises
    ``PolicyLoadError`` when the bundle cannot be loaded.
    """
    engine = OpaEngine()
    try:
        load_bundle(engine, policy_dir, include_tests=True)
        cases = discover_tests(policy_dir)
        by_package: dict[str, list[TestCase]] = {}
        for case in cases:
            by_package.setdefault(case.package, []).append(case)
        results: dict[TestCase, TestResult] = {}
        for package, members in by_package.items():
            results.update((r.case, r) for r in _run_package(engine, package, members))
        return PolicyTestReport(policy_dir=policy_dir, results=[results[case] for case in cases])
    finally:
        engine.close()
