"""Nothing under ``tests/`` or ``bench/`` reads outside the repository: a fresh clone anywhere
must pass on its own. The test data lives in ``tests/data/`` (tests/data/README.md).

Two checks over every text file of both trees:

- no path into the folder of reference data that sits beside a clone on the development
  machines (a path segment named ``shared``, as in ``..`` then ``shared``, or a ``"shared"``
  joined onto a path), and not the environment variable or the helper that used to name it;
- in Python, every ``Path(__file__)``-relative path (``.parent`` chains and ``.parents[n]``)
  stays inside the repository root.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support.paths import DATA_DIR, PROJECT_ROOT

TREES = ("tests", "bench")
TEXT_SUFFIXES = {".py", ".md", ".sh", ".json", ".jsonl", ".toml", ".yaml", ".yml", ".lua", ".txt", ".cfg", ".ini"}

# The patterns are built from pieces so that this file does not match them itself.
OUTSIDE = {
    "a path segment 'shared'": re.compile(r"[/\\]" + "shared" + r"([/\\'\"]|$)"),
    "a 'shared' folder joined onto a path": re.compile(r"/\s*['\"]" + "shared" + r"['\"]"),
    "the variable that named a folder outside": re.compile("TOOLGATE_" + "SHARED" + "_DIR"),
    "the helper that returned that folder": re.compile(r"\b" + "shared" + r"_dir\b"),
}


def _files() -> list[Path]:
    """The project's own text files of ``TREES`` (installed packages under node_modules left out)."""
    return sorted(
        path
        for tree in TREES
        for path in (PROJECT_ROOT / tree).rglob("*")
        if path.is_file() and path.suffix in TEXT_SUFFIXES and not {"__pycache__", "node_modules"} & set(path.parts)
    )


def _levels_up(node: ast.AST) -> int | None:
    """How many folders above ``__file__`` the expression ``node`` names, or None when it does
    not start from ``__file__`` (``Path(__file__).resolve().parent`` is 1, ``.parents[2]`` 3)."""
    if isinstance(node, ast.Name):
        return 0 if node.id == "__file__" else None
    if isinstance(node, ast.Attribute):
        base = _levels_up(node.value)
        if base is None:
            return None
        return base + 1 if node.attr == "parent" else base
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
        base = _levels_up(node.value.value)
        index = node.slice
        if base is None or not (isinstance(index, ast.Constant) and isinstance(index.value, int)):
            return None
        return base + index.value + 1
    if isinstance(node, ast.Call):
        # Path(__file__), Path(__file__).resolve(), os.path.dirname(__file__): the argument or
        # the object the method is called on.
        if isinstance(node.func, ast.Attribute):
            found = _levels_up(node.func.value)
            if found is not None:
                return found + (1 if node.func.attr == "dirname" else 0)
        for argument in node.args:
            found = _levels_up(argument)
            if found is not None:
                return found + (1 if isinstance(node.func, ast.Attribute) and node.func.attr == "dirname" else 0)
    return None


def _escapes(path: Path) -> list[str]:
    """The ``__file__``-relative expressions of a Python file that leave the repository."""
    depth = len(path.relative_to(PROJECT_ROOT).parts)  # tests/unit/x.py: 3 levels up is the root
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        levels = _levels_up(node) if isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)) else None
        if levels is not None and levels > depth:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_scan_covers_both_trees_and_the_data():
    files = _files()
    assert PROJECT_ROOT / "tests" / "conftest.py" in files and PROJECT_ROOT / "bench" / "run.py" in files
    assert DATA_DIR / "agentdojo-banking" / "calls.jsonl" in files


@pytest.mark.parametrize("what", sorted(OUTSIDE))
def test_no_file_names_a_folder_outside_the_repository(what):
    pattern = OUTSIDE[what]
    hits = [
        f"{path.relative_to(PROJECT_ROOT)}:{number}: {line.strip()}"
        for path in _files()
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == [], f"{what}: {hits}"


def test_file_relative_paths_stay_inside_the_repository():
    escapes = {str(p.relative_to(PROJECT_ROOT)): e for p in _files() if p.suffix == ".py" if (e := _escapes(p))}
    assert escapes == {}


@pytest.mark.parametrize(
    ("source", "levels"),
    [
        ("Path(__file__).resolve().parents[2]", 3),
        ("Path(__file__).resolve().parent.parent", 2),
        ("Path(__file__).parent.parents[1]", 3),
        ("os.path.dirname(os.path.dirname(__file__))", 2),
        ("Path(x).parents[5]", None),
    ],
)
def test_levels_up_reads_the_usual_spellings(source, levels):
    """The checker itself: it must see each spelling, or the test above checks nothing."""
    assert _levels_up(ast.parse(source, mode="eval").body) == levels


def test_the_data_tests_read_is_in_the_repository_with_its_notice():
    notice = (DATA_DIR / "agentdojo-banking" / "NOTICE").read_text(encoding="utf-8")
    assert "MIT License, Copyright (c) 2024 Edoardo Debenedetti, Jie Zhang, Mislav Balunovic" in notice
    assert "Florian Tramèr" in notice
    calls = (DATA_DIR / "agentdojo-banking" / "calls.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(calls) == 45
    for name in ("README.md", "jwt-retry-cases.jsonl", "policy-cases.jsonl"):
        assert (DATA_DIR / "cases" / name).is_file(), name
