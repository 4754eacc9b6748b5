"""The import rules (tests/support/import_layers.py) hold for the code base, and the checks
themselves find a layer violation and a cycle in a small package written for the purpose."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import grimp
import pytest

from tests.support.import_layers import import_cycles, imports_between, layer_of, layer_violations

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("app", "bench", "tests")


def test_no_import_goes_up_a_layer(graph: grimp.ImportGraph) -> None:
    assert layer_violations(graph) == []


def test_no_import_cycles(graph: grimp.ImportGraph) -> None:
    assert import_cycles(graph) == []


def test_bench_never_imports_tests(graph: grimp.ImportGraph) -> None:
    assert imports_between(graph, "bench", "tests") == []


def test_every_app_module_has_a_layer(graph: grimp.ImportGraph) -> None:
    for module in graph.modules:
        if module == "app" or module.startswith("app."):
            layer_of(module)  # raises for a module no rule places


def test_importing_the_errors_loads_nothing_else() -> None:
    """``import app.errors`` loads only ``app`` and ``app.errors`` (a fresh interpreter)."""
    code = "import app.errors, sys; print(sorted(m for m in sys.modules if m.startswith('app')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['app', 'app.errors']"


def _package(root: Path, files: dict[str, str]) -> grimp.ImportGraph:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    sys.path.insert(0, str(root))
    try:
        return grimp.build_graph("app")
    finally:
        sys.path.remove(str(root))


@pytest.fixture
def isolated_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Build graphs of a throwaway package named ``app`` (grimp reads files, imports nothing)."""
    monkeypatch.delitem(sys.modules, "app", raising=False)
    return lambda files: _package(tmp_path / "src", files)


def test_the_checks_find_a_deliberate_cycle_and_an_upward_import(isolated_app) -> None:
    graph = isolated_app({
        "app/__init__.py": "",
        "app/errors.py": "from app.settings import X\n",
        "app/settings.py": "from app.errors import Y\n",
        "app/models.py": "from app.web import thing\n",
        "app/web/__init__.py": "",
        "app/web/thing.py": "from app.models import Z\n",
    })
    assert import_cycles(graph) == [["app.errors", "app.settings"], ["app.models", "app.web.thing"]]
    violations = {(v.importer, v.imported) for v in layer_violations(graph)}
    assert violations == {("app.models", "app.web.thing")}
