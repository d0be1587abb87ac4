"""Template filters for showing runs: JSON blocks and durations."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def pretty_json(value: Any) -> str:
    """``value`` as indented JSON (non-ASCII kept), for a ``<pre>`` block."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


@register.filter
def duration(ms: int | None) -> str:
    """A duration in milliseconds as ``850 ms``, ``2.4 s`` or ``3 min 5 s``; ``—`` for None."""
    if ms is None:
        return "—"
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


@register.filter
def is_text(value: Any) -> bool:
    """Whether ``value`` is a string (message content can also be a list of parts)."""
    return isinstance(value, str)
