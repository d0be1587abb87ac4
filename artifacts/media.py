"""Which media types are which: raster images a browser shows without running anything, and
text a person can read (shown as plain text, whatever markup it holds)."""

from __future__ import annotations

INLINE_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_READABLE = frozenset(
    {
        "application/json",
        "application/xml",
        "application/x-ndjson",
        "image/svg+xml",
        "application/x-empty",
    }
)


def is_text(media: str) -> bool:
    """Whether content of type ``media`` is text a person can read."""
    return media.startswith("text/") or media in _READABLE or media.endswith(("+json", "+xml"))


def is_shown(media: str) -> bool:
    """Whether content of type ``media`` would be shown in the browser (text, images, PDF)
    rather than offered as a file."""
    return is_text(media) or media in INLINE_IMAGES or media == "application/pdf"


def preview_kind(sniffed: str) -> str:
    """How a run page previews content sniffed as ``sniffed``: ``image`` (shown), ``text``
    (its start, escaped) or ``""`` (no preview)."""
    if sniffed in INLINE_IMAGES:
        return "image"
    return "text" if is_text(sniffed) else ""
