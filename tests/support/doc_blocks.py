"""The docs whose outputs are checked: every command of README.md and docs/*.md that shows an
output runs against a fresh served gateway, in the order written per document, and prints what
the document shows, up to what differs from run to run (ids, times, revisions, ports,
durations, tokens: ``VARYING``).

How a document shows a command and its output (``steps``):

- a ``sh`` or ``bash`` block followed by an output block (a fence without language, ``json``
  or ``text``): the output block is the command block's stdout (stderr is not compared);
- a ``console`` block: a line starting with ``$ `` is a command (a trailing backslash continues
  it), the lines up to the next command are its output, stdout and stderr together (less the
  two ``DEVELOPMENT_WARNINGS`` every toolgate command of a development set-up prints).

A line ``...`` in a shown output stands for any number of lines the document leaves out.

A command block without an output block runs too (it sets up what follows). Every block runs
in one bash session per document, in a scratch copy of the repository's files (``git
ls-files``, with ``.venv``, ``.tools`` and the AI SDK client's ``node_modules`` linked), so that
``tests/data/...`` resolves and a walkthrough's edits never reach the checkout; ``GW`` and
``http://127.0.0.1:8080`` point at the served proxy, ``127.0.0.1:8081`` at the gateway,
``.venv/bin`` is first on ``PATH``, and the gateway's ``TOOLGATE_REDIS_URL`` and
``TOOLGATE_AUDIT_DSN`` are set.

A command that would start servers on serve.sh's fixed ports, or install or run the whole suite
(``NEVER_RUN``), is never run: a block of them that shows no output (the README's set-up
commands) counts as skipped; one that shows an output is a failure without a skip marker. A
block that cannot run here, or whose output cannot match a run, says why in an HTML comment
right before it (blank lines between are allowed):

- ``<!-- docs-check: skip (why) -->``: the block does not run;
- ``<!-- docs-check: skip section (why) -->``, anywhere before the block: no block runs up to
  the next heading of the level of the last heading before the marker, or a higher one (a
  walkthrough on its own servers and ports; right under the document's title it skips the
  whole document);
- ``<!-- docs-check: not compared (why) -->``: the block runs (later blocks need what it does),
  its output is not compared (the marker may also stand between the command and its output).

``python -m tests.support.doc_blocks [DOC ...]`` checks the given documents (all by default)
and prints each skipped block with its reason; exit status 1 when an output differs or a block
fails. ``--paste`` writes the real outputs over the differing ones (not over a shortened one),
for the author to read in ``git diff``. ``tests/api/test_docs_outputs.py`` runs it in CI.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.gateway import PROJECT_ROOT, GatewayProcess
from tests.support.proxy import ProxyProcess
from tests.support.servers import RedisServer

DOCUMENTS = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
COMMAND_LANGUAGES = {"sh", "bash"}
OUTPUT_LANGUAGES = {"", "json", "text"}
#: The documented addresses of serve.sh's proxy and gateway, rewritten to the served ones.
DOCUMENTED_PROXY = "http://127.0.0.1:8080"
DOCUMENTED_GATEWAY = "127.0.0.1:8081"
#: The metrics token docs/operators.md starts its gateway with.
DOCUMENTED_METRICS_TOKEN = "metrics-token-0123456789"
#: What differs from run to run, and what stands for it (applied in this order).
VARYING = [
    (re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(r"\b[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT"), "<time>"),
    (re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b"), "<id>"),
    (re.compile(r"sha256:([0-9a-f]{64}|[0-9a-f]{16})\b"), "<revision>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<hash>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<id>"),
    (re.compile(r"\bap_[A-Za-z0-9_-]{32}"), "<approval>"),
    (re.compile(r'"reservation_token":"[^"]+"'), '"reservation_token":"<token>"'),
    (re.compile(r"\btgg1\.[A-Za-z0-9_.-]+"), "<token>"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*"), "<token>"),
    (re.compile(r'"durations_ms":\{[^}]*\}'), '"durations_ms":<durations>'),
    (re.compile(r"\(\d+(\.\d+)?(ns|µs|ms|s)\)"), "(<duration>)"),
    (re.compile(r" *\b\d+\.\d+ s\b"), " <duration>"),  # with the padding of a right-aligned column
    (re.compile(r"\b1[6-9]\d{8}\b"), "<run>"),  # a run stamp, $(date +%s)
    (re.compile(r"(127\.0\.0\.1|localhost):\d+"), r"\1:<port>"),
    (re.compile(r"^Content-Length: \d+$", re.M), "Content-Length: <length>"),
]
#: What every toolgate command of a development set-up prints on stderr; documents leave these
#: lines out (rollout.md says so), and the checker drops them from a console block's output.
DEVELOPMENT_WARNINGS = {
    "development mode: accepting HS256 tokens signed with the built-in development secret; never use this in production",
    "TOOLGATE_APPROVAL_KEYS is unset: approval grants are signed with the built-in development key",
}
NEVER_RUN = re.compile(r"scripts/(serve|stop|test|install|install-opa)\.sh|toolgate serve\b|redis-server|opa run\b")
_NEVER_RUN_SETUP = "starts servers, installs or runs the suite, and shows no output"
_LINKED = [".venv", ".tools", "clients/ai-sdk/node_modules"]
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
_MARKER = re.compile(r"<!-- docs-check: (skip|not compared) \((.+?)\) -->\s*\Z", re.S)
_SECTION_MARKER = re.compile(r"<!-- docs-check: skip section \((.+?)\) -->", re.S)
_HEADING = re.compile(r"^(#+) ", re.M)


@dataclass(frozen=True)
class Step:
    """One command of a document: ``command`` (bash), the ``shown`` output (``None``: the
    document shows none), ``merged`` (stderr is part of the output: a console block),
    ``line`` (1-based, of the block in the document), the marker's ``skip`` or
    ``not_compared`` reason, and ``span``, the offsets of the shown output in the document."""

    command: str
    shown: str | None
    merged: bool
    line: int
    skip: str | None = None
    not_compared: str | None = None
    span: tuple[int, int] = (0, 0)


@dataclass
class Report:
    """What checking one document found: ``compared`` steps that matched, ``failures``
    (messages), ``skipped`` ``(line, reason)``, ``not_compared`` ``(line, reason)`` and
    ``outputs``: ``(span, output)`` of every step whose output differs."""

    document: str
    compared: int = 0
    failures: list[str] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)
    not_compared: list[tuple[int, str]] = field(default_factory=list)
    outputs: list[tuple[tuple[int, int], str]] = field(default_factory=list)
    seconds: float = 0.0


def _without_development_warnings(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if line.rstrip("\n") not in DEVELOPMENT_WARNINGS)


def normalized(text: str) -> str:
    """``text`` with every ``VARYING`` part replaced by its stand-in, trailing blanks and
    surrounding blank lines removed."""
    for pattern, stand_in in VARYING:
        text = pattern.sub(stand_in, text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def matches(shown: str, output: str) -> bool:
    """Whether ``output`` is what ``shown`` shows once both are ``normalized``; a line ``...``
    of ``shown`` stands for any number of lines (an output the document shortens)."""
    expected, actual = normalized(shown), normalized(output)
    if "..." not in expected.splitlines():
        return expected == actual
    pattern = "".join(r"(?:.*\n)*?" if line == "..." else re.escape(line) + r"\n" for line in expected.splitlines())
    return re.fullmatch(pattern, actual + "\n") is not None


def _console_steps(body: str, offset: int, line: int) -> Iterator[tuple[str, str, tuple[int, int]]]:
    """``(command, output, span of the output in the document)`` of a console block whose body
    starts at ``offset``."""
    command: list[str] = []
    output: list[str] = []
    span = (offset, offset)
    continued = False
    for text in body.splitlines(keepends=True):
        if continued or text.startswith("$ "):
            if not continued and command:
                yield "".join(command), "".join(output), span
                command, output = [], []
            command.append(text if continued else text[2:])
            continued = text.rstrip("\n").endswith("\\")
            span = (offset + len(text), offset + len(text))
        elif command:
            output.append(text)
            span = (span[0], offset + len(text))
        else:
            raise ValueError(f"line {line}: a console block must start with a '$ ' command")
        offset += len(text)
    if command:
        yield "".join(command), "".join(output), span


def steps(text: str) -> list[Step]:
    """The commands of a document in order (module docstring); ``ValueError`` for a console
    block that does not start with a command."""
    fences = list(_FENCE.finditer(text))
    found: list[Step] = []
    section_skip: tuple[int, str] | None = None  # (heading level, reason)
    for i, fence in enumerate(fences):
        language, body = fence[1], fence[2]
        start = fence.start()
        previous_end = fences[i - 1].end() if i else 0
        headings = list(_HEADING.finditer(text, previous_end, start))
        if section_skip and any(len(h[1]) <= section_skip[0] for h in headings):
            section_skip = None
        marker = _MARKER.search(text, previous_end, start)
        section_marker = _SECTION_MARKER.search(text, previous_end, start)
        if section_marker:
            section_skip = (len(_last_heading(text, section_marker.start())), section_marker[1])
        line = text.count("\n", 0, start) + 1
        skip = section_skip[1] if section_skip else (marker[2] if marker and marker[1] == "skip" else None)
        not_compared = marker[2] if marker and marker[1] == "not compared" else None
        if language == "console":
            for command, output, output_span in _console_steps(body, fence.start(2), line):
                found.append(Step(command, output, True, line, skip, not_compared, output_span))
        elif language in COMMAND_LANGUAGES:
            after = fences[i + 1] if i + 1 < len(fences) else None
            shown: str | None = None
            span = (0, 0)
            if after is not None and after[1] in OUTPUT_LANGUAGES:
                between = text[fence.end():after.start()].strip()
                output_marker = _MARKER.match(between)
                if output_marker and output_marker[1] == "not compared":
                    not_compared, between = output_marker[2], ""
                if not between:
                    shown, span = after[2], after.span(2)
            found.append(Step(body, shown, False, line, skip, not_compared, span))
    return found


def _last_heading(text: str, before: int) -> str:
    """The ``#`` marks of the last heading before offset ``before``, outside fenced blocks."""
    outside = _FENCE.sub("", text[:before])
    headings = _HEADING.findall(outside)
    return headings[-1] if headings else "#"


def _script(runnable: list[Step], proxy_url: str, gateway_bind: str) -> str:
    parts = []
    for i, step in enumerate(runnable):
        command = step.command.replace(DOCUMENTED_PROXY, proxy_url).replace(DOCUMENTED_GATEWAY, gateway_bind)
        redirect = " 2>&1" if step.merged else ""
        parts.append(f"echo '@@step {i}'\n{{ {command}\n}}{redirect}\necho \"@@status $?\"")
    return "\n".join(parts) + "\n"


def _setup_skipped(step: Step) -> Step:
    """``step``, skipped when it is a set-up block of servers, installs or the suite that shows no
    output."""
    if step.skip or step.shown is not None or not NEVER_RUN.search(step.command):
        return step
    return dataclasses.replace(step, skip=_NEVER_RUN_SETUP)


def run_document(path: Path, served: Served) -> Report:
    """Run the steps of ``path`` in one bash session against ``served``; compare each shown
    output."""
    report = Report(path.relative_to(PROJECT_ROOT).as_posix() if path.is_relative_to(PROJECT_ROOT) else path.name)
    started = time.monotonic()
    all_steps = [_setup_skipped(step) for step in steps(path.read_text(encoding="utf-8"))]
    runnable = [s for s in all_steps if s.skip is None]
    report.skipped = sorted({(s.line, s.skip) for s in all_steps if s.skip is not None})
    report.not_compared = sorted({(s.line, s.not_compared) for s in runnable if s.not_compared})
    for step in runnable:
        if NEVER_RUN.search(step.command):
            report.failures.append(f"{report.document}:{step.line}: not run, it would start servers, install or run "
                                   f"the suite: mark it <!-- docs-check: skip (why) -->\n  {step.command[:300]}")
    if runnable and not report.failures:
        with tempfile.TemporaryDirectory(prefix="docs-check-") as scratch:
            _copy_repository(Path(scratch))
            done = subprocess.run(["bash"], input=_script(runnable, served.proxy_url, served.gateway_bind),
                                  cwd=scratch, env=served.env, capture_output=True, text=True, timeout=600,
                                  check=False)
        outputs = re.split(r"^@@step \d+\n", done.stdout, flags=re.M)[1:]
        if len(outputs) != len(runnable):
            report.failures.append(f"the session stopped after {len(outputs)} of {len(runnable)} steps:\n"
                                   f"{done.stderr[-2000:]}")
        for step, output in zip(runnable, outputs, strict=False):
            body, _, status = output.rpartition("@@status ")
            body = _without_development_warnings(body)
            if step.shown is None or step.not_compared:
                continue
            if matches(step.shown, body):
                report.compared += 1
            else:
                report.failures.append(_difference(report.document, step, body, status.strip()))
                if "..." not in step.shown.splitlines():  # a shortened output is pasted by hand
                    report.outputs.append((step.span, body if body.endswith("\n") or not body else body + "\n"))
    report.seconds = time.monotonic() - started
    return report


def _copy_repository(scratch: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=PROJECT_ROOT,
                            capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source, target = PROJECT_ROOT / name, scratch / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    for name in _LINKED:
        if (PROJECT_ROOT / name).exists():
            (scratch / name).symlink_to(PROJECT_ROOT / name)


def _difference(document: str, step: Step, output: str, status: str) -> str:
    diff = difflib.unified_diff(normalized(step.shown or "").splitlines(), normalized(output).splitlines(),
                                "shown", "run", lineterm="", n=1)
    return (f"{document}:{step.line}: exit {status} and another output for\n  {step.command[:300]}\n"
            + "\n".join(diff))


@dataclass
class Served:
    """A served gateway: nginx at ``proxy_url`` in front of gunicorn at ``gateway_bind``, and
    the environment the documents' commands run with."""

    proxy_url: str
    gateway_bind: str
    env: dict[str, str]


@contextmanager
def served_gateway(redis_url: str, workdir: Path) -> Iterator[Served]:
    """A fresh gateway as serve.sh runs it (gunicorn behind the shipped nginx proxy, the embedded
    engine reloading the policies every 2 s, an empty SQLite decision log in ``workdir``, the
    documented metrics token), on free loopback ports."""
    settings = {"TOOLGATE_REDIS_URL": redis_url, "TOOLGATE_AUDIT_DSN": str(workdir / "decisions.sqlite"),
                "TOOLGATE_METRICS_TOKEN": DOCUMENTED_METRICS_TOKEN, "TOOLGATE_POLICY_POLL_INTERVAL_S": "2"}
    gateway = GatewayProcess(settings, workers=1, threads=4).start()
    try:
        proxy = ProxyProcess(f"127.0.0.1:{gateway.port}", workdir / "proxy").start()
        try:
            env = {**os.environ, **settings, "GW": proxy.url,
                   "PATH": f"{PROJECT_ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
            yield Served(proxy.url, f"127.0.0.1:{gateway.port}", env)
        finally:
            proxy.stop()
    finally:
        gateway.stop()


def summary(report: Report) -> str:
    """One line per document, then its skipped and not compared blocks with their reasons."""
    lines = [f"{report.document}: {'FAILED' if report.failures else 'ok'}, {report.compared} outputs compared, "
             f"{len(report.not_compared)} blocks not compared, {len(report.skipped)} blocks skipped "
             f"({report.seconds:.1f} s)"]
    lines += [f"  skipped {report.document}:{line}: {reason}" for line, reason in report.skipped]
    lines += [f"  not compared {report.document}:{line}: {reason}" for line, reason in report.not_compared]
    return "\n".join(lines)


def paste(path: Path, outputs: list[tuple[tuple[int, int], str]]) -> None:
    """Write each real output over the output ``path`` shows (``--paste``)."""
    text = path.read_text(encoding="utf-8")
    for (start, end), output in sorted(outputs, reverse=True):
        text = text[:start] + output + text[end:]
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.doc_blocks", description=__doc__.split("\n\n")[0])
    parser.add_argument("documents", nargs="*", type=Path, help="README.md and docs/*.md by default")
    parser.add_argument("--paste", action="store_true",
                        help="write the real output over every output that differs (then read the diff)")
    args = parser.parse_args(argv)
    documents = [p.resolve() for p in args.documents] or DOCUMENTS
    failed = 0
    with tempfile.TemporaryDirectory(prefix="docs-check-") as workdir:
        redis = RedisServer(Path(workdir) / "redis").start()
        try:
            for document in documents:
                with served_gateway(redis.url, Path(tempfile.mkdtemp(dir=workdir))) as served:
                    report = run_document(document, served)
                print(summary(report), flush=True)
                if args.paste and report.outputs:
                    paste(document, report.outputs)
                for failure in report.failures:
                    print(failure, file=sys.stderr)
                failed += bool(report.failures)
        finally:
            redis.stop()
    print(f"{len(documents) - failed} of {len(documents)} documents ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
