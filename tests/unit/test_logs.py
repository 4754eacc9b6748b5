"""The log line format (``app.logs.json_formatter``): one JSON object per line with the
renamed standard fields and the caller's extra fields, whatever their JSON types."""

from __future__ import annotations

import io
import json
import logging

from app.logs import json_formatter


def test_a_request_line_is_one_json_object_with_the_extra_fields() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(json_formatter())
    logger = logging.getLogger("toolgate.test_logs")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        logger.info("request", extra={"event": "request", "status": 200, "duration_ms": 1.25,
                                      "durations_ms": {"auth": 0.1}, "reasons": ["a", "ü"], "trace_id": None})
    finally:
        logger.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    line = json.loads(lines[0])
    assert {k: line[k] for k in ("level", "logger", "message")} == {"level": "INFO", "logger": "toolgate.test_logs",
                                                                     "message": "request"}
    assert line["time"][:2] == "20"
    assert {k: line[k] for k in ("event", "status", "duration_ms", "durations_ms", "reasons", "trace_id")} == {
        "event": "request", "status": 200, "duration_ms": 1.25, "durations_ms": {"auth": 0.1}, "reasons": ["a", "ü"],
        "trace_id": None,
    }
