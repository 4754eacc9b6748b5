"""Optional OpenTelemetry span export (the ``otel`` extra: ``pip install -e ".[otel]"``), off
unless ``TOOLGATE_OTEL_TRACES_ENDPOINT`` is set.

``build_tracer(settings) -> RequestTracer | None``. A ``RequestTracer`` turns each finished
HTTP request into one server span named ``<METHOD> <route>``: a child of the caller's
``traceparent`` when it was valid (W3C Trace Context; its sampled flag decides, so a caller's
unsampled trace gets no span), else the root of a new, sampled trace; for
``POST /v1/decide`` one child span per phase (auth, validate, idempotency, grant, policy,
approval, reserve, log) at the phase's own start and end. Attributes: HTTP method, route and
status, request id, and, when known, decision id, tenant, tool, version, decision and error
code; never tokens, subjects, inputs or reasons. Spans are sent in batches by the SDK's
``BatchSpanProcessor`` with the OTLP/HTTP (protobuf) exporter to the endpoint, e.g.
``http://otel-collector:4318/v1/traces``; an unreachable collector costs dropped spans (the
SDK logs it), never a failed request. Build it in each worker (after fork).

Sources: W3C Trace Context (https://www.w3.org/TR/trace-context/), OpenTelemetry semantic
conventions for HTTP spans (https://opentelemetry.io/docs/specs/semconv/http/http-spans/).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.settings import Settings, SettingsError

#: (phase name, start, end): epoch nanoseconds, as ``app.decide.phases.Phases`` records them.
PhaseSpan = tuple[str, int, int]


@dataclass(frozen=True)
class FinishedRequest:
    """What the web layer knows once a request is answered (times in epoch ns)."""

    method: str
    route: str
    status: int
    start_ns: int
    end_ns: int
    traceparent: str | None
    request_id: str
    fields: dict[str, Any]
    phases: Sequence[PhaseSpan] = ()


_FIELD_ATTRIBUTES = {
    "decision_id": "toolgate.decision_id",
    "tenant": "toolgate.tenant",
    "tool": "toolgate.tool",
    "version": "toolgate.tool_version",
    "decision": "toolgate.decision",
    "error_code": "toolgate.error_code",
}


class RequestTracer:
    """Exports one span tree per finished request; see the module docstring. Thread-safe."""

    def __init__(self, endpoint: str, service_name: str) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        # A short export timeout: an unreachable collector must not hold up a worker's exit.
        self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=2)))
        self._tracer = self.provider.get_tracer("toolgate")
        self._propagator = TraceContextTextMapPropagator()

    def record(self, finished: FinishedRequest) -> None:
        """Create and end the spans of ``finished`` (the SDK exports them in the background)."""
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        parent = self._propagator.extract({"traceparent": finished.traceparent}) if finished.traceparent else None
        attributes: dict[str, Any] = {
            "http.request.method": finished.method,
            "http.route": finished.route,
            "http.response.status_code": finished.status,
            "toolgate.request_id": finished.request_id,
        }
        for field, attribute in _FIELD_ATTRIBUTES.items():
            value = finished.fields.get(field)
            if isinstance(value, str):
                attributes[attribute] = value
        span = self._tracer.start_span(
            f"{finished.method} {finished.route}", context=parent, kind=SpanKind.SERVER,
            attributes=attributes, start_time=finished.start_ns,
        )
        if finished.status >= 500:
            span.set_status(Status(StatusCode.ERROR))
        inside = trace.set_span_in_context(span)
        for phase, start_ns, end_ns in finished.phases:
            self._tracer.start_span(phase, context=inside, start_time=start_ns).end(end_time=end_ns)
        span.end(end_time=finished.end_ns)

    def shutdown(self) -> None:
        """Flush what is queued and stop the exporter."""
        self.provider.shutdown()


def build_tracer(settings: Settings) -> RequestTracer | None:
    """The tracer when ``settings.otel_traces_endpoint`` is set, else None.

    Raises ``SettingsError`` when the ``otel`` extra is not installed.
    """
    if not settings.otel_traces_endpoint:
        return None
    try:
        return RequestTracer(settings.otel_traces_endpoint, settings.otel_service_name)
    except ImportError:
        raise SettingsError(
            'TOOLGATE_OTEL_TRACES_ENDPOINT is set but OpenTelemetry is not installed: pip install -e ".[otel]"'
        ) from None
