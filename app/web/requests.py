"""Request ids, trace context, the one JSON log line per request and, when tracing is on
(app/tracing.py), its spans."""

from __future__ import annotations

import logging
import re
import time
import uuid

from flask import Flask, Response, current_app, g, request

from app import metrics
from app.tracing import FinishedRequest, RequestTracer
from app.vocabulary import REQUEST_ID_PATTERN

log = logging.getLogger("toolgate.request")

_REQUEST_ID = re.compile(REQUEST_ID_PATTERN)
#: Method label values (anything else counts as "other": label values never come from callers).
_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
# W3C Trace Context §3.2: version-traceid-parentid-flags, lower-case hex, ids not all zeros;
# a later version may append "-..." fields (§4.3), version ff is invalid.
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-(?!0{32})([0-9a-f]{32})-(?!0{16})([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")


def request_id() -> str:
    """The current request id (client-supplied if valid, else generated)."""
    return getattr(g, "request_id", None) or "unknown"


def traceparent() -> tuple[str | None, str | None]:
    """This request's valid ``traceparent`` as a version-00 header, and its trace id; else
    (None, None). Read once per request (``_before``)."""
    parsed = g.get("traceparent")
    if parsed is None:
        parsed = g.traceparent = _parse_traceparent(request.headers.get("traceparent", ""))
    return parsed


def _parse_traceparent(value: str) -> tuple[str | None, str | None]:
    """A later version is read for its four version-00 fields, as W3C Trace Context §4.3 asks
    (https://www.w3.org/TR/trace-context/#versioning-of-traceparent)."""
    value = value.strip()
    match = _TRACEPARENT.match(value) if len(value) <= 512 else None
    if match is None or match.group(1) == "ff" or (match.group(1) == "00" and match.group(5)):
        return None, None
    _, trace_id, parent_id, flags, _ = match.groups()
    return f"00-{trace_id}-{parent_id}-{flags}", trace_id


def log_fields(**fields: object) -> None:
    """Add fields to this request's log line (tool, decision, durations in ms...)."""
    g.setdefault("log_fields", {}).update(fields)


def trace_phases(phases: list[tuple[str, int, int]]) -> None:
    """The phases (name, start, end in epoch ns) that become child spans of this request's
    span when tracing is on (app/tracing.py)."""
    g.trace_phases = phases


def _before() -> None:
    g.started = time.perf_counter()
    g.start_ns = time.time_ns()
    headers = request.headers
    supplied = headers.get("X-Request-Id", "")
    g.request_id = supplied if _REQUEST_ID.match(supplied) else uuid.uuid4().hex
    g.traceparent = _parse_traceparent(headers.get("traceparent", ""))


def _after(response: Response) -> Response:
    req = request._get_current_object()  # type: ignore[attr-defined]  # one proxy lookup, not one per use
    state = g._get_current_object()
    current_id = getattr(state, "request_id", None) or "unknown"
    headers = response.headers
    headers["X-Request-Id"] = current_id
    headers.setdefault("Cache-Control", "no-store")
    elapsed = time.perf_counter() - getattr(state, "started", time.perf_counter())
    route = req.url_rule.rule if req.url_rule else "unmatched"
    method = req.method if req.method in _METHODS else "other"
    status = response.status_code
    metrics.child(metrics.HTTP_REQUESTS, method, route, str(status)).inc()
    metrics.child(metrics.HTTP_SECONDS, method, route).observe(elapsed)
    fields = {
        "event": "request",
        "request_id": current_id,
        "method": req.method,
        "path": req.path,
        "status": status,
        "duration_ms": round(elapsed * 1000, 3),
    }
    _, trace_id = traceparent()
    if trace_id:
        fields["trace_id"] = trace_id
    fields.update(getattr(state, "log_fields", {}))
    log.info("request", extra=fields)
    tracer = current_app.extensions.get("toolgate_tracer")
    if tracer is not None:
        _record_spans(tracer, response, fields)
    return response


def _record_spans(tracer: RequestTracer, response: Response, fields: dict) -> None:
    """Hand the finished request to the tracer; a tracing failure is logged, never answered."""
    try:
        tracer.record(
            FinishedRequest(
                method=request.method, route=request.url_rule.rule if request.url_rule else "unmatched",
                status=response.status_code, start_ns=g.get("start_ns", time.time_ns()), end_ns=time.time_ns(),
                traceparent=traceparent()[0], request_id=fields["request_id"], fields=fields,
                phases=g.get("trace_phases", ()),
            )
        )
    except Exception as exc:  # noqa: BLE001 - the response is already decided
        log.warning("trace spans not recorded: %s", type(exc).__name__, extra={"event": "tracing_failed"})


def register(app: Flask) -> None:
    app.before_request(_before)
    app.after_request(_after)
