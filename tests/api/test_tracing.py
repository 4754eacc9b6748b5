"""OpenTelemetry span export (app/tracing.py): the real SDK and OTLP/HTTP exporter sending to a
loopback receiver that decodes the protobuf ``ExportTraceServiceRequest`` bodies, the real app
with the embedded engine, Redis and SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from app.settings import Settings
from tests.support.calls import auth, decide_body
from tests.support.errors import assert_error
from tests.support.http_server import LoopbackHTTPServer

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


class OtlpReceiver:
    """An OTLP/HTTP traces endpoint on loopback: keeps every span it is sent."""

    def __init__(self) -> None:
        received: list[Any] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource_spans in request.resource_spans:
                    service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                    for scope_spans in resource_spans.scope_spans:
                        received.extend((service, span) for span in scope_spans.spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.spans = received
        self._server = LoopbackHTTPServer(Handler, name="otlp-receiver")
        self.url = self._server.url("/v1/traces")

    def __enter__(self) -> OtlpReceiver:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as r:
        yield r


def attributes(span: Any) -> dict[str, Any]:
    out = {}
    for a in span.attributes:
        value = a.value
        out[a.key] = value.int_value if value.HasField("int_value") else value.string_value
    return out


def exported(app: Any) -> None:
    app.extensions["toolgate_tracer"].provider.force_flush()


def test_decide_span_continues_the_callers_trace_with_one_child_per_phase(make_app, receiver):
    app = make_app(otel_traces_endpoint=receiver.url, otel_service_name="toolgate-test")
    headers = {**auth(roles=["support_agent"]), "traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
    response = app.test_client().post("/v1/decide", json=decide_body("readFile", {"path": "/srv/a.txt"}), headers=headers)
    assert response.status_code == 200
    exported(app)

    server = [span for _, span in receiver.spans if span.name == "POST /v1/decide"]
    assert len(server) == 1
    span = server[0]
    assert span.trace_id.hex() == TRACE_ID and span.parent_span_id.hex() == PARENT_ID
    assert span.kind == span.SPAN_KIND_SERVER
    attrs = attributes(span)
    assert attrs["http.response.status_code"] == 200
    assert attrs["toolgate.decision"] == response.json["decision"]
    assert attrs["toolgate.decision_id"] == response.headers["X-Decision-Id"]
    assert attrs["toolgate.tool"] == "readFile" and attrs["toolgate.tenant"]
    assert {service["service.name"] for service, _ in receiver.spans} == {"toolgate-test"}

    children = [s for _, s in receiver.spans if s.parent_span_id == span.span_id]
    names = [c.name for c in children]
    for phase in ("auth", "validate", "policy", "log"):
        assert phase in names
    assert "total" not in names
    for child in children:
        assert child.trace_id == span.trace_id
        assert span.start_time_unix_nano <= child.start_time_unix_nano <= child.end_time_unix_nano <= span.end_time_unix_nano


def test_no_secret_or_input_reaches_a_span(make_app, receiver):
    app = make_app(otel_traces_endpoint=receiver.url)
    headers = auth(roles=["support_agent"])
    token = headers["Authorization"].split()[1]
    app.test_client().post("/v1/decide", json=decide_body("readFile", {"path": "/srv/very-private-name.txt"}), headers=headers)
    exported(app)
    assert receiver.spans
    for _, span in receiver.spans:
        text = span.SerializeToString()
        assert token.encode() not in text and b"very-private-name" not in text


def test_without_traceparent_a_new_trace_starts_and_errors_are_marked(make_app, receiver):
    app = make_app(otel_traces_endpoint=receiver.url)
    client = app.test_client()
    client.get("/healthz", headers={"traceparent": "00-" + "0" * 32 + "-" + PARENT_ID + "-01"})  # invalid: all zeros
    assert_error(client.post("/v1/decide", data=b"{}", headers={"Authorization": "Bearer not-a-token"}), 401,
                 "UNAUTHENTICATED", retryable=False)
    exported(app)
    by_name = {span.name: span for _, span in receiver.spans}
    assert by_name["GET /healthz"].parent_span_id == b"" and by_name["GET /healthz"].trace_id.hex() != "0" * 32
    denied = by_name["POST /v1/decide"]
    assert attributes(denied)["http.response.status_code"] == 401
    assert attributes(denied)["toolgate.error_code"] == "UNAUTHENTICATED"


def test_tracing_is_off_without_an_endpoint_and_the_endpoint_must_be_http(make_app):
    assert make_app().extensions["toolgate_tracer"] is None
    with pytest.raises(ValueError):
        Settings(otel_traces_endpoint="file:///tmp/spans")


@pytest.mark.parametrize(
    ("header", "trace_id"),
    [
        (f"00-{TRACE_ID}-{PARENT_ID}-01", TRACE_ID),
        (f"  00-{TRACE_ID}-{PARENT_ID}-00 ", TRACE_ID),  # surrounding spaces are trimmed
        (f"01-{TRACE_ID}-{PARENT_ID}-01-future-field", TRACE_ID),  # a later version: its 00 fields
        (f"cc-{TRACE_ID}-{PARENT_ID}-01", TRACE_ID),
        (f"00-{TRACE_ID}-{PARENT_ID}-01-extra", None),  # version 00 has exactly four fields
        (f"ff-{TRACE_ID}-{PARENT_ID}-01", None),  # invalid version
        (f"00-{TRACE_ID.upper()}-{PARENT_ID}-01", None),  # upper-case hex
        (f"00-{'0' * 32}-{PARENT_ID}-01", None),
        (f"00-{TRACE_ID}-{'0' * 16}-01", None),
        (f"00-{TRACE_ID}-{PARENT_ID}", None),
        (f"01-{TRACE_ID}-{PARENT_ID}-01-" + "x" * 600, None),  # longer than 512 characters
    ],
)
def test_trace_context_of_the_decision_record(make_app, header, trace_id):
    """W3C Trace Context parsing (§3.2, §4.3): the trace id lands in the decision record only
    for a valid header."""
    app = make_app()
    response = app.test_client().post(
        "/v1/decide", json=decide_body("readFile", {"path": "/srv/a.txt"}),
        headers={**auth(roles=["support_agent"]), "traceparent": header},
    )
    assert response.status_code == 200
    record = app.extensions["toolgate"].decision_reader.get(response.headers["X-Decision-Id"])
    assert record is not None and record.trace_id == trace_id
