"""Writing decision records out: JSON Lines, CSV and the CLI's fixed-width table.

Every writer consumes an iterable of ``AuditRecord`` one record at a time and flushes nothing
but what it wrote, so an export of any size runs in constant memory. CSV cells that a
spreadsheet would run as a formula (starting with ``= + - @`` or a tab/CR) are prefixed with
``'`` (OWASP CSV injection); nested values (roles, reasons, input, ...) are JSON in their cell.

Caller-supplied text never reaches a terminal raw: the table escapes control, format and
line-separator characters in every cell (``app.terminal.printable``: a reason with a newline
stays on its row, an ANSI escape is shown as ``\x1b``), and JSON Lines write them as JSON
escapes (``json_printable``, the same JSON value). CSV keeps the text as it is, quoted per
RFC 4180: it is for spreadsheets, which show it as data.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from dataclasses import fields
from typing import Any, TextIO

from app.audit.records import AuditRecord
from app.terminal import json_printable, printable

#: CSV header and JSON key order: every record field, then the chain fields.
COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(AuditRecord))
FORMATS = ("table", "jsonl", "csv")

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_TABLE = (("time", 27), ("decision_id", 26), ("event", 19), ("tenant", 14), ("subject_id", 18), ("tool", 22),
          ("outcome", 22))


def write_jsonl(records: Iterable[AuditRecord], out: TextIO) -> int:
    """One JSON object per line (``AuditRecord.to_dict()``); returns the number written."""
    count = 0
    for record in records:
        out.write(json_printable(json.dumps(record.to_dict(), ensure_ascii=False, separators=(",", ":"))))
        out.write("\n")
        count += 1
    return count


def _cell(value: Any) -> Any:
    if isinstance(value, (dict, list, tuple)):
        value = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def write_csv(records: Iterable[AuditRecord], out: TextIO) -> int:
    """RFC 4180 CSV with a header row of ``COLUMNS``; returns the number of records."""
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    count = 0
    for record in records:
        data = record.to_dict()
        writer.writerow([_cell(data[name]) for name in COLUMNS])
        count += 1
    return count


def _fit(text: str, width: int) -> str:
    text = printable(text)
    return text.ljust(width) if len(text) <= width else text[: width - 1] + "…"


def write_table(records: Iterable[AuditRecord], out: TextIO) -> int:
    """A fixed-width table for people: time, id, event, tenant, subject, tool, outcome (the
    decision or the error code) and reasons. Returns the number of records."""
    out.write("  ".join(_fit(name.upper(), width) for name, width in _TABLE) + "  REASONS\n")
    count = 0
    for record in records:
        values = {
            "time": record.to_doc()["time"],
            "decision_id": record.decision_id,
            "event": record.event,
            "tenant": record.tenant,
            "subject_id": record.subject_id or "-",
            "tool": record.tool or "-",
            "outcome": record.error_code or record.decision or "-",
        }
        row = "  ".join(_fit(values[name], width) for name, width in _TABLE)
        out.write(f"{row}  {printable('; '.join(record.reasons)) or '-'}\n")
        count += 1
    return count


def write_records(records: Iterable[AuditRecord], out: TextIO, fmt: str) -> int:
    """Write ``records`` to ``out`` as ``fmt`` (one of ``FORMATS``); returns the count.
    Raises ``ValueError`` for an unknown format."""
    writers = {"table": write_table, "jsonl": write_jsonl, "csv": write_csv}
    if fmt not in writers:
        raise ValueError(f"format must be one of {FORMATS}")
    return writers[fmt](records, out)
