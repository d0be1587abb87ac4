"""How an artifact is served: which Content-Type and Content-Disposition it gets (from its
sniffed type, never the declared one), the headers that keep it from running script in the
site's origin, and byte ranges (RFC 9110 §14).

An uploaded HTML page or SVG image served as itself would run its script with the site's
cookies and origin (stored XSS). So only types a browser displays without running anything
are shown inline as themselves (raster images, PDF, JSON); every other text (HTML, SVG, XML
included) is shown as ``text/plain``; the rest is a download (``attachment``). Every
response also says ``X-Content-Type-Options: nosniff`` (the browser keeps the type given) and
carries a Content-Security-Policy with ``sandbox`` (a unique opaque origin, no script), so
even a browser that rendered one as a page would not give it the site's origin. PDF alone
goes without ``sandbox``: Chromium refuses to show a PDF in a sandboxed document, and its
viewer runs in its own extension origin, not the site's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.utils.http import content_disposition_header
from werkzeug.http import parse_range_header

from artifacts.media import INLINE_IMAGES, is_text
from artifacts.models import Artifact

PLAIN_TEXT = "text/plain; charset=utf-8"
# No fetches, no script, no plugins, no framing; a unique origin (sandbox).
SANDBOX_CSP = (
    "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'; sandbox"
)
PDF_CSP = "default-src 'none'; img-src 'self' data:; frame-ancestors 'none'"


@dataclass(frozen=True)
class Presentation:
    """The ``content_type`` an artifact is served with and whether it is shown ``inline``."""

    content_type: str
    inline: bool


def presentation(sniffed: str) -> Presentation:
    """How content sniffed as ``sniffed`` is served (see the module docstring)."""
    if sniffed in INLINE_IMAGES or sniffed == "application/pdf":
        return Presentation(sniffed, True)
    if sniffed == "application/json":
        return Presentation("application/json", True)
    if is_text(sniffed):
        return Presentation(PLAIN_TEXT, True)
    return Presentation("application/octet-stream", False)


def headers(artifact: Artifact, *, download: bool) -> dict[str, str]:
    """The headers of every answer about ``artifact``'s content (a 200, 206 or 416); with
    ``download`` it is offered as a file whatever its type."""
    shown = presentation(artifact.sniffed_type)
    return {
        "Content-Type": shown.content_type,
        "Content-Disposition": content_disposition_header(
            download or not shown.inline, artifact.name
        )
        or "inline",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": PDF_CSP
        if shown.content_type == "application/pdf"
        else SANDBOX_CSP,
        "Cross-Origin-Resource-Policy": "same-origin",
        # Permission-checked content: kept by no shared cache, revalidated by the browser.
        "Cache-Control": "private, no-cache",
        "ETag": etag(artifact),
        "Accept-Ranges": "bytes",
    }


def etag(artifact: Artifact) -> str:
    """The strong entity tag of an artifact's content: its quoted SHA-256."""
    return f'"{artifact.sha256}"'


class Unsatisfiable(Exception):
    """The Range names no byte of the file (HTTP 416)."""


def requested_range(
    header: str | None, if_range: str | None, artifact: Artifact
) -> tuple[int, int] | None:
    """The byte range ``(start, stop)`` (stop exclusive) a request's ``Range`` header asks
    of ``artifact``, or None for the whole file: no Range, one that does not parse, several
    ranges (served whole, as RFC 9110 §14.2 allows), or an ``If-Range`` that is not the
    current entity tag.

    Raises:
        Unsatisfiable: a single range that starts past the end of the file.
    """
    if not header or (if_range is not None and if_range != etag(artifact)):
        return None
    parsed = parse_range_header(header)
    if parsed is None or parsed.units != "bytes" or len(parsed.ranges) != 1:
        return None
    found = parsed.range_for_length(artifact.size)
    if found is None:
        raise Unsatisfiable(f"bytes */{artifact.size}")
    return found


def _next_chunk(chunks: Generator[bytes, None, None]) -> bytes | None:
    return next(chunks, None)


async def as_async(chunks: Generator[bytes, None, None]) -> AsyncIterator[bytes]:
    """``chunks`` read in a worker thread each, for an ASGI response: Django would read a
    synchronous iterator whole into memory before sending it (``StreamingHttpResponse``)."""
    read = sync_to_async(_next_chunk, thread_sensitive=False)
    try:
        while True:
            chunk = await read(chunks)
            if chunk is None:
                return
            yield chunk
    finally:
        await sync_to_async(chunks.close, thread_sensitive=False)()
