"""A real OTLP/HTTP trace receiver for tests: an HTTP server on 127.0.0.1 that takes
``POST /v1/traces`` bodies (binary protobuf ``ExportTraceServiceRequest``, decoded with
``opentelemetry-proto``, as a collector's OTLP/HTTP receiver does) and keeps their spans.
It can be stopped and started again on the same port, as a collector that goes down."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from testsupport.processes import free_port


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as received: ids in hex (``parent_span_id`` "" for a root), its name, kind
    (``SPAN_KIND_...``), attributes and events' attributes as plain values, status code
    (``STATUS_CODE_...``), times in ns, and its resource's attributes."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status: str
    start_ns: int
    end_ns: int
    resource: dict[str, Any]


def _value(any_value: dict[str, Any]) -> Any:
    """A plain value of an OTLP ``AnyValue`` as ``MessageToDict`` renders it."""
    (kind, value), *_ = any_value.items()
    if kind == "arrayValue":
        return [_value(item) for item in value.get("values", [])]
    if kind == "intValue":
        return int(value)
    return value


def _attributes(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {item["key"]: _value(item["value"]) for item in items}


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one ``ExportTraceServiceRequest`` (protobuf bytes)."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = _attributes(MessageToDict(resource_spans.resource).get("attributes", []))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                as_dict = MessageToDict(span)
                spans.append(
                    ReceivedSpan(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        name=span.name,
                        kind=as_dict.get("kind", "SPAN_KIND_UNSPECIFIED"),
                        attributes=_attributes(as_dict.get("attributes", [])),
                        events=[
                            (event["name"], _attributes(event.get("attributes", [])))
                            for event in as_dict.get("events", [])
                        ],
                        status=as_dict.get("status", {}).get("code", "STATUS_CODE_UNSET"),
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        resource=resource,
                    )
                )
    return spans


class OtlpReceiver:
    """An OTLP/HTTP receiver on 127.0.0.1 (``endpoint`` is its base URL, for
    ``OTEL_EXPORTER_OTLP_ENDPOINT``); ``spans`` holds every span received, in order, and
    ``requests`` counts the requests. Not listening until ``start``."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                spans = decode(body)
                with receiver._lock:
                    receiver.spans.extend(spans)
                    receiver.requests += 1
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the test reads what was received, not a log."""

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Stop listening (a collector that is down: connections are refused)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def received(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)
