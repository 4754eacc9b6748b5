"""README.md's 5-minute tour against a fresh gateway as serve.sh runs it (gunicorn behind the
shipped nginx proxy, a real Redis, the embedded engine, an SQLite decision log): its ``sh``
blocks run in order in one shell, each block's output is compared with the block the README
shows after it, normalizing only ids, times, revisions, keys minted per run and ports; and the
whole tour runs a second time on the same gateway, as a reader may.

A README output block whose text cannot match a run (counts that depend on timing) is
preceded by ``<!-- doc-check: not compared: <why> -->``."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.gateway import PROJECT_ROOT, GatewayProcess
from tests.support.proxy import ProxyProcess

README = PROJECT_ROOT / "README.md"
NOT_COMPARED = "<!-- doc-check: not compared:"
_BLOCK = re.compile(r"^(<!-- doc-check: not compared:[^\n]*-->\n\n)?```(\w*)\n(.*?)^```\n", re.S | re.M)
#: What differs from run to run, and what stands for it.
_VARYING = [
    (re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"), "<time>"),
    (re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b"), "<id>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<id>"),
    (re.compile(r"sha256:[0-9a-f]{16}"), "<revision>"),
    (re.compile(r"ap_[A-Za-z0-9_-]{32}"), "<approval>"),
    (re.compile(r'"reservation_token":"[^"]+"'), '"reservation_token":"<token>"'),
    (re.compile(r"pay-\d+-"), "pay-<run>-"),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),
]


def tour_blocks(text: str) -> list[tuple[str, str, bool]]:
    """``(command block, output block shown after it, compared)`` of the tour, in order; a
    command block without an output block after it has ``""``."""
    section = text[text.index("## A 5-minute tour"):text.index("## Documentation")]
    blocks = [(m[2], m[3], m[1] is None) for m in _BLOCK.finditer(section)]
    steps = []
    for i, (kind, body, _) in enumerate(blocks):
        if kind == "sh":
            after = blocks[i + 1] if i + 1 < len(blocks) and blocks[i + 1][0] != "sh" else ("", "", False)
            steps.append((body, after[1], after[2]))
    return steps


def normalized(text: str) -> str:
    for pattern, stand_in in _VARYING:
        text = pattern.sub(stand_in, text)
    return text.strip()


def run_tour(url: str, workdir: Path, env: dict[str, str]) -> list[str]:
    """Every command block of the tour in one bash session (``GW`` pointed at ``url``); the
    output of each block."""
    script = []
    for i, (command, _, _) in enumerate(tour_blocks(README.read_text(encoding="utf-8"))):
        script.append(f"echo '@@block {i}'\n{command.replace('http://127.0.0.1:8080', url)}")
    done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return re.split(r"^@@block \d+\n", done.stdout, flags=re.M)[1:]


@pytest.fixture(scope="module")
def served(redis_server, tmp_path_factory) -> Iterator[tuple[str, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("tour")
    settings = {"TOOLGATE_REDIS_URL": redis_server.url, "TOOLGATE_AUDIT_DSN": str(tmp / "decisions.sqlite")}
    gateway = GatewayProcess(settings, workers=1, threads=4).start()
    proxy = ProxyProcess(f"127.0.0.1:{gateway.port}", tmp / "proxy").start()
    env = {**os.environ, **settings, "PATH": f"{PROJECT_ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    yield proxy.url, env
    proxy.stop()
    gateway.stop()


def test_the_tour_is_found() -> None:
    steps = tour_blocks(README.read_text(encoding="utf-8"))
    assert len(steps) == 9 and all(shown for _, shown, _ in steps[1:])


@pytest.mark.slow
@pytest.mark.timeout(900)  # two tours of a dozen toolgate commands each
def test_the_tour_prints_what_the_readme_shows_twice_in_a_row(served, tmp_path) -> None:
    url, env = served
    for run in ("first", "second"):
        workdir = tmp_path / run
        workdir.mkdir()
        outputs = run_tour(url, workdir, env)
        for (command, shown, compared), output in zip(tour_blocks(README.read_text(encoding="utf-8")), outputs, strict=True):
            if compared:
                assert normalized(output) == normalized(shown), f"{run} run of:\n{command}"
