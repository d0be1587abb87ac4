"""The caller's trace context on every request (W3C Trace Context: ``traceparent`` and
``tracestate``), taken from OpenTelemetry's current context when ``opentelemetry-api`` is
installed (the ``otel`` extra), so agentops' spans of a run join the agent's own trace."""

from __future__ import annotations

# The W3C Trace Context headers (https://www.w3.org/TR/trace-context/); baggage is not sent.
TRACE_HEADERS = ("traceparent", "tracestate")


def trace_headers() -> dict[str, str]:
    """The current OpenTelemetry context's ``traceparent`` and ``tracestate`` as the global
    propagator writes them; empty without ``opentelemetry-api`` or a current span."""
    try:
        from opentelemetry import propagate
    except ImportError:
        return {}
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return {name: carrier[name] for name in TRACE_HEADERS if name in carrier}
