"""A client's trace context (W3C Trace Context, https://www.w3.org/TR/trace-context/): the
``traceparent`` header of the request that creates a run, kept so the run's trace continues
the client's (``Run.trace_parent``, exported by ``fleet.traces``)."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_PROPAGATOR = TraceContextTextMapPropagator()


def parse_traceparent(header: str | None) -> str:
    """``header`` in its canonical form (``00-<trace id: 32 hex>-<parent span id: 16 hex>-
    <flags: 2 hex>``), or "" when it is missing or not a valid ``traceparent`` (all-zero ids,
    bad hex, a bad length): as the W3C recommendation says, an invalid one is ignored (the
    run starts a trace of its own), never refused. Parsed by OpenTelemetry's own
    propagator."""
    if not header:
        return ""
    context = _PROPAGATOR.extract({"traceparent": header})
    parent = trace.get_current_span(context).get_span_context()
    if not parent.is_valid:
        return ""
    return f"00-{parent.trace_id:032x}-{parent.span_id:016x}-{int(parent.trace_flags):02x}"
