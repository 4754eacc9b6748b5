"""Exports of decision records: JSONL, CSV (with formula neutralising) and the table; streaming
in constant memory."""

from __future__ import annotations

import csv
import io
import json
import tracemalloc
from collections.abc import Iterator

import pytest

from app.audit.chain import seal
from app.audit.export import COLUMNS, write_csv, write_jsonl, write_records, write_table
from app.audit.records import AuditEvent, AuditRecord


def record(i: int = 0, **fields) -> AuditRecord:
    values = {"event": "decide", "tenant": "acme", "request_id": f"r{i}", "subject_id": "u-1", "tool": "readFile",
              "version": "1", "decision": "allow", "reasons": ("allowed by policy",), "input": {"path": f"/srv/{i}"}}
    return seal(AuditEvent(**{**values, **fields}), i + 1, "0" * 64)[0]


def test_jsonl_is_one_record_per_line():
    records = [record(0), record(1, decision="deny", reasons=("no", "never"))]
    out = io.StringIO()
    assert write_jsonl(records, out) == 2
    lines = out.getvalue().splitlines()
    assert [json.loads(line) for line in lines] == [r.to_dict() for r in records]


def test_csv_has_every_field_and_neutralises_formulas():
    rec = record(0, reasons=("=HYPERLINK(\"http://evil\")",), subject_id="@admin", input={"a": [1, 2]}, replayed=True)
    out = io.StringIO()
    assert write_csv([rec], out) == 1
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert list(rows[0]) == list(COLUMNS)
    assert rows[0]["subject_id"] == "'@admin"
    assert rows[0]["reasons"] == '["=HYPERLINK(\\"http://evil\\")"]'  # a JSON cell starts with [
    assert rows[0]["input"] == '{"a":[1,2]}'
    assert rows[0]["replayed"] == "true" and rows[0]["error_code"] == ""
    assert rows[0]["hash"] == rec.hash and rows[0]["seq"] == "1"


def test_table_shows_the_outcome_and_reasons():
    out = io.StringIO()
    write_table([record(0), record(1, decision=None, error_code="VALIDATION_ERROR", reasons=())], out)
    header, allowed, failed = out.getvalue().splitlines()
    assert header.split()[:7] == ["TIME", "DECISION_ID", "EVENT", "TENANT", "SUBJECT_ID", "TOOL", "OUTCOME"]
    assert " allow " in allowed and allowed.endswith("allowed by policy")
    assert " VALIDATION_ERROR " in failed and failed.endswith(" -")


def test_unknown_format_is_refused():
    with pytest.raises(ValueError):
        write_records([], io.StringIO(), "xml")


class _Sink(io.TextIOBase):
    """Counts what is written and keeps nothing."""

    def __init__(self) -> None:
        self.chars = 0

    def write(self, text: str) -> int:
        self.chars += len(text)
        return len(text)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_writers_stream_in_constant_memory(fmt):
    def many(n: int) -> Iterator[AuditRecord]:
        for i in range(n):
            yield record(i, input={"blob": "x" * 8000, "i": i})

    sink = _Sink()
    tracemalloc.start()
    try:
        count = write_records(many(500), sink, fmt)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 500 and sink.chars > 4_000_000
    assert peak < 1_000_000  # far below the ~4 MB written: nothing accumulates
