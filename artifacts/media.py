"""Which sniffed media types are which: raster images a browser shows without running
anything, and text a person can read (shown as plain text, whatever markup it holds)."""

from __future__ import annotations

INLINE_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_READABLE = frozenset(
    {"application/json", "application/xml", "image/svg+xml", "application/x-empty"}
)


def is_text(sniffed: str) -> bool:
    """Whether content sniffed as ``sniffed`` is text a person can read."""
    return sniffed.startswith("text/") or sniffed in _READABLE


def preview_kind(sniffed: str) -> str:
    """How a run page previews content sniffed as ``sniffed``: ``image`` (shown), ``text``
    (its start, escaped) or ``""`` (no preview)."""
    if sniffed in INLINE_IMAGES:
        return "image"
    return "text" if is_text(sniffed) else ""
