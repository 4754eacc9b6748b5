"""The docs whose outputs are checked (``tests.support.doc_blocks``): every command block of
README.md and docs/*.md that shows an output runs against a fresh gateway as serve.sh runs it
(gunicorn behind the shipped nginx proxy, a real Redis, the embedded engine, an SQLite decision
log) and prints what the document shows; the README tour runs twice in a row on one gateway, as
a reader may. Then the checker itself, on documents written here: a wrong output fails, a marker
skips with its reason, a command that would start servers is refused, and normalization does not
hide a changed decision."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import doc_blocks
from tests.support.doc_blocks import DOCUMENTS, PROJECT_ROOT, Served, normalized, run_document, served_gateway, summary


@pytest.fixture
def served(redis_server, tmp_path) -> Iterator[Served]:
    with served_gateway(redis_server.url, tmp_path) as gateway:
        yield gateway


@pytest.mark.slow
@pytest.mark.timeout(900)  # a document runs a few dozen toolgate commands, each a Python start
@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.relative_to(PROJECT_ROOT).as_posix())
def test_the_document_prints_what_it_shows(document: Path, request: pytest.FixtureRequest) -> None:
    runs = any(step.skip is None for step in doc_blocks.steps(document.read_text(encoding="utf-8")))
    report = run_document(document, request.getfixturevalue("served") if runs else no_gateway_served())
    print(summary(report))
    assert not report.failures, "\n\n".join(report.failures)
    assert all(reason.strip() for _, reason in report.skipped + report.not_compared)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_readme_tour_runs_twice_in_a_row(served: Served) -> None:
    for run in ("first", "second"):
        report = run_document(PROJECT_ROOT / "README.md", served)
        assert not report.failures, f"{run} run:\n" + "\n\n".join(report.failures)
        assert report.compared >= 7


def _document(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "doc.md"
    path.write_text(text, encoding="utf-8")
    return path


def no_gateway_served() -> Served:
    """For documents that never call a gateway (or run nothing): nothing is served."""
    return Served("http://127.0.0.1:9", "127.0.0.1:9", dict(os.environ))


@pytest.fixture
def no_gateway() -> Served:
    return no_gateway_served()


def test_a_wrong_output_fails_and_names_its_line(tmp_path: Path, no_gateway: Served) -> None:
    doc = _document(tmp_path, "# t\n\n```sh\necho one\n```\n\n```\none\n```\n\n"
                              "```console\n$ echo two\nthree\n```\n")
    report = run_document(doc, no_gateway)
    assert report.compared == 1
    assert len(report.failures) == 1 and ":11: exit 0" in report.failures[0]
    assert "-three" in report.failures[0] and "+two" in report.failures[0]


def test_a_marker_skips_its_block_with_the_reason_printed(tmp_path: Path, no_gateway: Served) -> None:
    doc = _document(tmp_path, "# t\n\n<!-- docs-check: skip (needs a PostgreSQL server) -->\n\n"
                              "```console\n$ false\nnever shown\n```\n\n"
                              "## A walkthrough\n\n<!-- docs-check: skip section (its own servers) -->\n\n"
                              "```sh\nexit 3\n```\n\n### Within\n\n```console\n$ false\nnot this either\n```\n\n"
                              "## After\n\n<!-- docs-check: not compared (a count that varies) -->\n"
                              "```sh\necho 41\n```\n\n```\n42\n```\n\n```console\n$ echo fine\nfine\n```\n")
    report = run_document(doc, no_gateway)
    assert not report.failures and report.compared == 1
    assert report.skipped == [(5, "needs a PostgreSQL server"), (14, "its own servers"), (20, "its own servers")]
    assert report.not_compared == [(28, "a count that varies")]
    printed = summary(report)
    assert "3 blocks skipped" in printed and "skipped doc.md:5: needs a PostgreSQL server" in printed


def test_a_command_that_would_start_servers_is_refused_unless_marked(tmp_path: Path, no_gateway: Served) -> None:
    doc = _document(tmp_path, "# t\n\n```sh\nbash scripts/serve.sh\n```\n\n```console\n$ echo x\nx\n$ toolgate serve\nstarted\n```\n")
    report = run_document(doc, no_gateway)
    assert report.compared == 0 and report.skipped == [(3, "starts servers, installs or runs the suite, and shows no output")]
    assert len(report.failures) == 1 and "would start servers" in report.failures[0] and ":7:" in report.failures[0]


def test_normalization_keeps_decisions_rules_and_reasons() -> None:
    shown = ('{"decision":"deny","reasons":["role support_agent may not use tool processPayment"],'
             '"decision_id":"01M8ST5R8BEBCVZ9A52EQ5F05T","request_id":"77dcd63451a34102bec5dddae4c13cd6",'
             '"policy_revision":"sha256:6b47312ea5b06c02","matched_rules":[{"id":"toolgate.role_not_granted"}]}')
    run = ('{"decision":"deny","reasons":["role support_agent may not use tool processPayment"],'
           '"decision_id":"01M8ZZZR8BEBCVZ9A52EQ5F0AA","request_id":"0123456789abcdef0123456789abcdef",'
           '"policy_revision":"sha256:0000000000000000","matched_rules":[{"id":"toolgate.role_not_granted"}]}')
    assert normalized(shown) == normalized(run)
    for changed in (run.replace('"deny"', '"allow"'), run.replace("support_agent may", "admin may"),
                    run.replace("role_not_granted", "approval_granted"), run.replace("Payment", "Refund")):
        assert normalized(shown) != normalized(changed)
    assert normalized("2026-12-01T11:55:40.802419Z  emma  127.0.0.1:8080") == "<time>  emma  127.0.0.1:<port>"
    assert normalized("HTTP/1.1 200 OK") != normalized("HTTP/1.1 409 CONFLICT")


def test_every_document_parses() -> None:
    found = {path.relative_to(PROJECT_ROOT).as_posix(): doc_blocks.steps(path.read_text(encoding="utf-8")) for path in DOCUMENTS}
    assert sum(step.shown is not None for steps in found.values() for step in steps) > 100
    assert sum(1 for step in found["README.md"] if step.shown is not None and not step.skip) >= 8
