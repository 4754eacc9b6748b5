"""JSON structured logging: one JSON object per line on stderr (python-json-logger).

Never log the Authorization header, tokens, grants, secrets or raw tool input: callers add
only the fields they mean to (``extra={...}``).
"""

from __future__ import annotations

import logging
import sys

from pythonjsonlogger.json import JsonFormatter


def json_formatter() -> logging.Formatter:
    """The formatter of every log line: ``{"time", "level", "logger", "message", ...extra}``."""
    return JsonFormatter(
        "{asctime}{levelname}{name}{message}",
        style="{",
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
    )


def configure_logging(level: str = "INFO") -> None:
    """Route the root logger to stderr as JSON lines (idempotent)."""
    root = logging.getLogger()
    if any(getattr(h, "_toolgate", False) for h in root.handlers):
        root.setLevel(level)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(json_formatter())
    handler._toolgate = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
