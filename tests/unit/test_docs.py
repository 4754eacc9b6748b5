"""The documentation still matches the code: commands parse, links resolve, DESIGN §n exists.

What counts as a runnable command: in README.md and docs/*.md, a fenced block whose info
string is ``sh`` (every line is a command) or ``console`` (lines starting with ``$ `` are
commands, the others output). Within a command, every ``toolgate ...`` (or
``.venv/bin/toolgate ...``) that starts it, follows ``$(`` or follows ``;``, ``&&``, ``||``
or ``|`` is checked in-process against ``app.cli.build_parser()``: the subcommand (and
sub-subcommand) exists and its ``--help`` exits 0, every ``--option`` named is one of that
subcommand's options, and the whole argument list parses (shell variables stand in as ``x``).
Relative links (``[text](path#anchor)``) must name an existing file and, for a Markdown
file, an existing heading. Socket-free.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from app.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
SOURCE_DIRS = ("app", "tests", "bench", "policies")

_TOOLGATE = re.compile(
    r"(?:^|\$\(|;|&&|\|\||\|)\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:\S*/)?(?:\.venv/bin/)?(toolgate(?:\s[^;|&)]*)?)"
)
_VARIABLE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")
_DESIGN_REF = re.compile(r"DESIGN §(\d+)")



@dataclass(frozen=True)
class Command:
    """One ``toolgate`` invocation shown in the docs: where, and its argument list."""

    doc: str
    line: int
    argv: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: toolgate {' '.join(self.argv)}"


def _joined_lines(text: str) -> list[tuple[int, str]]:
    """Block lines with ``\\`` continuations joined; (0-based offset of the first line, text)."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for offset, line in enumerate(text.splitlines()):
        if not pending:
            start = offset
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    if pending:
        out.append((start, pending))
    return out


def _commands_in(line: str) -> list[tuple[str, ...]]:
    """Argument lists (after ``toolgate``) of the invocations in one shell line."""
    line = line.split(" #", 1)[0]
    found = []
    for match in _TOOLGATE.finditer(line):
        words = shlex.split(_VARIABLE.sub("x", match.group(1)), comments=True)
        argv = []
        for word in words[1:]:
            if word in {">", ">>", "<", "2>", "2>&1"} or word.startswith((">", "<", "2>")):
                break
            argv.append(word)
        found.append(tuple(argv))
    return found


def shown_commands(path: Path, root: Path = ROOT) -> list[Command]:
    """Every ``toolgate`` invocation in the ``sh`` and ``console`` blocks of one Markdown file."""
    tokens = MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8"))
    commands = []
    for token in tokens:
        if token.type != "fence" or token.info.strip() not in {"sh", "console"} or token.map is None:
            continue
        console = token.info.strip() == "console"
        for offset, line in _joined_lines(token.content):
            if console:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            for argv in _commands_in(line):
                commands.append(Command(path.relative_to(root).as_posix(), token.map[0] + 2 + offset, argv))
    return commands


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _resolve(argv: tuple[str, ...]) -> tuple[list[str], argparse.ArgumentParser]:
    """The (sub)command path named by ``argv`` and its parser; fails on an unknown one."""
    parser, path = build_parser(), list[str]()
    for word in argv:
        children = _subparsers(parser)
        if not children:
            break
        assert word in children, f"no subcommand {word!r} after {' '.join(['toolgate', *path])}"
        parser, path = children[word], [*path, word]
    assert not _subparsers(parser), f"toolgate {' '.join(path)} needs a subcommand"
    return path, parser


def _exit_code(argv: list[str]) -> int:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:
            return int(exc.code or 0)
    return 0


ALL_COMMANDS = [command for doc in DOCS for command in shown_commands(doc)]


def test_the_docs_show_commands() -> None:
    shown = {command.argv[:2] for command in ALL_COMMANDS}
    for expected in [("token", "--sub"), ("replay", "calls.jsonl"), ("audit", "query"), ("audit", "verify"),
                     ("audit", "purge"), ("idempotency", "resolve"), ("serve",)]:
        assert expected in shown, expected


@pytest.mark.parametrize("command", ALL_COMMANDS, ids=str)
def test_shown_command_parses(command: Command) -> None:
    path, parser = _resolve(command.argv)
    assert _exit_code([*path, "--help"]) == 0, f"{command}: --help of toolgate {' '.join(path)} failed"
    known = {option for action in parser._actions for option in action.option_strings}
    for word in command.argv:
        option = word.split("=", 1)[0]
        if option.startswith("--"):
            assert option in known, f"{command}: toolgate {' '.join(path)} has no option {option}"
    assert _exit_code(list(command.argv)) == 0, f"{command}: does not parse"


def test_checker_catches_broken_commands(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("```sh\nT=$(toolgate token --sub a --tenant b --colour red)\ntoolgate audit frobnicate\n```\n"
                   "```console\n$ TOOLGATE_ENV=production toolgate serve --port 1\n$ toolgate idempotency resolve --tenant t --key k --as maybe\nnot toolgate output\n```\n")
    commands = shown_commands(doc, root=tmp_path)
    assert [c.argv[:2] for c in commands] == [
        ("token", "--sub"), ("audit", "frobnicate"), ("serve", "--port"), ("idempotency", "resolve"),
    ]
    for command in commands:
        with pytest.raises(AssertionError):
            test_shown_command_parses(command)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    tokens = MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8"))
    return {_slug(tokens[i + 1].content) for i, t in enumerate(tokens) if t.type == "heading_open"}


def _links(path: Path) -> list[str]:
    links = []
    for token in MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8")):
        for child in token.children or []:
            if child.type == "link_open":
                links.append(str(child.attrs["href"]))
    return links


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(doc: Path) -> None:
    for href in _links(doc):
        if re.match(r"^[a-z][a-z0-9+.-]*:", href):
            continue  # http:, https:, mailto:
        target, _, anchor = href.partition("#")
        file = (doc.parent / target).resolve() if target else doc
        assert file.exists(), f"{doc.name}: link {href} names a missing file"
        if anchor and file.suffix == ".md":
            assert anchor in _anchors(file), f"{doc.name}: link {href} names a missing heading"


def test_slug_follows_github() -> None:
    assert _slug("1. Parts") == "1-parts"
    assert _slug("Tamper evidence: verify") == "tamper-evidence-verify"
    assert _slug("Tools list, OpenAPI, probes") == "tools-list-openapi-probes"


def test_every_design_reference_resolves() -> None:
    """Each "DESIGN §n" in the code and tests names a section ``## n.`` of docs/design.md."""
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    sections = {int(n) for n in re.findall(r"^## (\d+)\. ", design, flags=re.MULTILINE)}
    assert sections == set(range(1, 13))
    cited: dict[int, list[str]] = {}
    for folder in SOURCE_DIRS:
        for file in sorted((ROOT / folder).rglob("*")):
            if file.suffix not in {".py", ".rego"} or "__pycache__" in file.parts:
                continue
            for n in _DESIGN_REF.findall(file.read_text(encoding="utf-8")):
                cited.setdefault(int(n), []).append(file.relative_to(ROOT).as_posix())
    assert cited, "no DESIGN reference found: the scan looks in the wrong place"
    missing = {n: files for n, files in cited.items() if n not in sections}
    assert not missing, f"DESIGN sections cited but absent from docs/design.md: {missing}"


def test_design_says_how_it_is_cited() -> None:
    head = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")[:600]
    assert '"DESIGN §n"' in head


def test_readme_starts_with_the_two_setup_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.startswith("# toolgate\n\n```sh\nbash scripts/serve.sh\n```\n\n```sh\nbash scripts/test.sh\n```\n")
    assert len(text.splitlines()) <= 210
