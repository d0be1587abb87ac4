"""The pages' one JSON viewer (``json_tree``, the ``json_tree`` filter of every page) and the
indented JSON text of forms and plain blocks (``pretty_json``).

Every value an agent or a client wrote (arguments, results, errors, conversation messages,
states, audit payloads) is shown through ``json_tree``: a collapsible tree that wraps inside
its card, strings holding JSON shown as the tree of that JSON, large values folded with their
size, a copy button before every value (``static/js/json.js`` copies the value it precedes),
and bounded (``JSON_TREE_MAX_*``) so no stored value can make a page too deep or too large.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from markupsafe import Markup, escape

# pretty_json prints objects and arrays nested deeper than this as a note (orjson writes at
# most 255 levels; the json module's indenting encoder recurses in Python), and by default at
# most PRETTY_JSON_MAX_CHARS characters of text: a page shows what an agent wrote, bounded.
PRETTY_JSON_MAX_CHARS = 100_000
PRETTY_JSON_MAX_DEPTH = 100


def _cut(value: Any, depth: int) -> Any:
    """``value`` with its objects and arrays below ``PRETTY_JSON_MAX_DEPTH`` levels (counted
    from ``depth``) replaced by a note; recurses ``PRETTY_JSON_MAX_DEPTH`` levels at most."""
    if not isinstance(value, dict | list | tuple):
        return value
    if depth >= PRETTY_JSON_MAX_DEPTH:
        return f"… nested deeper than {PRETTY_JSON_MAX_DEPTH} levels: not shown"
    if isinstance(value, dict):
        return {key: _cut(item, depth + 1) for key, item in value.items()}
    return [_cut(item, depth + 1) for item in value]


def pretty_json(value: Any, limit: int | None = PRETTY_JSON_MAX_CHARS) -> str:
    """``value`` as JSON indented by two spaces (non-ASCII kept, other objects as ``str``),
    for a ``<pre>`` block; objects and arrays nested deeper than ``PRETTY_JSON_MAX_DEPTH``
    levels are printed as a note saying so, and text past ``limit`` characters (None: no
    limit, for a form that edits the value) is cut, a line saying how much follows. orjson
    writes it, as ``json.dumps(value, indent=2)`` would (whose indenting encoder is pure
    Python, and a run page prints hundreds); ``json`` when orjson refuses the value (an
    integer past 64 bits, a key that is not a string)."""
    text = _indented_json(value)
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}\n… {len(text) - limit} more characters not shown"


def _indented_json(value: Any) -> str:
    options = (
        orjson.OPT_INDENT_2 | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
    )
    try:
        return orjson.dumps(value, default=str, option=options).decode()
    except TypeError:
        # Perhaps nested too deep for orjson (255 levels) and for Python's stack: cut first.
        value = _cut(value, 0)
    try:
        return orjson.dumps(value, default=str, option=options).decode()
    except TypeError:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)


# Objects and arrays nested deeper than this start folded; so do those with more entries, and
# a whole value longer than JSON_TREE_FOLD_BYTES as JSON (a folded value shows its size).
JSON_TREE_OPEN_DEPTH = 3
JSON_TREE_OPEN_ENTRIES = 20
JSON_TREE_FOLD_BYTES = 8_000
# What an agent wrote is shown up to these bounds, each crossing marked by a note, so no
# stored value can make a page deep enough to overflow Python's stack or too large to send:
# objects and arrays nested deeper than JSON_TREE_MAX_DEPTH levels, entries of one object or
# array past JSON_TREE_MAX_ENTRIES, values past JSON_TREE_MAX_NODES in one tree, characters of
# a string past JSON_TREE_MAX_CHARS. A string holding JSON is shown parsed up to
# JSON_TREE_MAX_PARSED characters.
JSON_TREE_MAX_DEPTH = 32
JSON_TREE_MAX_ENTRIES = 200
JSON_TREE_MAX_NODES = 2000
JSON_TREE_MAX_CHARS = 10_000
JSON_TREE_MAX_PARSED = 100_000
# Before every value: static/js/json.js copies the value that follows the button.
# Its text is drawn by CSS (``.j-copy::before``), so a tree's text is the value's alone.
COPY_BUTTON = '<button type="button" class="j-copy" data-copy aria-label="Copy value"></button>'


def _json_text(value: str) -> Any:
    """The object or array a string holds as JSON text (tool results and MCP arguments often
    do), else None: also for text longer than ``JSON_TREE_MAX_PARSED`` characters, or nested
    deeper than Python's parser can follow (``"[" * 5000``, a RecursionError)."""
    if len(value) > JSON_TREE_MAX_PARSED:
        return None
    text = value.strip()
    if not text or text[0] not in "[{":
        return None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict | list) else None


def json_size(value: Any) -> int | None:
    """The length of ``value`` as compact JSON (UTF-8 bytes; orjson writes it), or None when
    orjson cannot write it (nested past 255 levels, an integer past 64 bits)."""
    try:
        return len(orjson.dumps(value, default=str))
    except TypeError:
        return None


def size_text(size: int) -> str:
    """A size in bytes as ``812 B``, ``4.1 kB`` or ``2.3 MB`` (SI units, as browsers' devtools
    print them)."""
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"


def _note(text: str, kind: str = "") -> str:
    return f'<span class="j-note{kind}">{escape(text)}</span>'


class _TreeWriter:
    """Writes one ``json_tree``: the HTML pieces in ``out``, and how many more values it may
    show (``JSON_TREE_MAX_NODES``)."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.nodes_left = JSON_TREE_MAX_NODES

    def node(self, value: Any, depth: int) -> None:
        out = self.out
        self.nodes_left -= 1
        out.append(COPY_BUTTON)
        if isinstance(value, str):
            parsed = _json_text(value)
            if parsed is None:
                shown = value[:JSON_TREE_MAX_CHARS]
                out.append(f'<span class="j-str">"{escape(shown)}"</span>')
                if len(value) > len(shown):
                    more = f"… {len(value) - len(shown)} more characters"
                    out.append(" " + _note(more, " j-cut"))
                return
            out.append(
                '<span class="j-note j-json" title="a string holding JSON, shown parsed">'
                "JSON</span> "
            )
            value = parsed
        if isinstance(value, dict | list | tuple):
            self.container(value, depth)
            return
        text = json.dumps(value, ensure_ascii=False, default=str)
        kind = "j-null" if value is None else "j-bool" if isinstance(value, bool) else "j-num"
        out.append(f'<span class="{kind}">{escape(text)}</span>')

    def container(self, value: dict[Any, Any] | list[Any] | tuple[Any, ...], depth: int) -> None:
        out = self.out
        is_object = isinstance(value, dict)
        brackets = "{}" if is_object else "[]"
        if not value:
            out.append(f'<span class="j-punct">{brackets}</span>')
            return
        unit = "key" if is_object else "item"
        count = f"{len(value)} {unit}{'s' if len(value) != 1 else ''}"
        if depth >= JSON_TREE_MAX_DEPTH:
            out.append(
                f'<span class="j-punct">{brackets[0]}</span><span class="j-count">{count}</span>'
                f'<span class="j-punct">{brackets[1]}</span> '
                + _note(f"nested deeper than {JSON_TREE_MAX_DEPTH} levels: not shown", " j-cut")
            )
            return
        folded = depth >= JSON_TREE_OPEN_DEPTH or len(value) > JSON_TREE_OPEN_ENTRIES
        size = json_size(value) if folded or depth == 0 else None
        if depth == 0 and size is not None and size > JSON_TREE_FOLD_BYTES:
            folded = True
        if folded and size is not None:
            count = f"{count}, {size_text(size)}"
        out.append(
            f'<details class="j-node"{"" if folded else " open"}><summary>'
            f'<span class="j-punct">{brackets[0]}</span><span class="j-count">{count}</span>'
            f'<span class="j-punct">{brackets[1]}</span></summary><ul class="j-entries">'
        )
        entries = value.items() if isinstance(value, dict) else enumerate(value)
        shown = 0
        for key, item in entries:
            if shown == JSON_TREE_MAX_ENTRIES or self.nodes_left <= 0:
                break
            out.append("<li>")
            if is_object:
                out.append(f'<span class="j-key">{escape(key)}</span>: ')
            self.node(item, depth + 1)
            out.append("</li>")
            shown += 1
        if shown < len(value):
            more = f"… {len(value) - shown} more {unit}s not shown"
            out.append(f"<li>{_note(more, ' j-cut')}</li>")
        out.append("</ul></details>")


def json_tree(value: Any) -> Markup:
    """``value`` (JSON data) as readable, collapsible HTML: objects and arrays as ``<details>``
    lists (deep or long ones folded, and the whole value when it is longer than
    ``JSON_TREE_FOLD_BYTES`` as JSON; a folded one shows its size), strings that hold a JSON
    object or array shown parsed, a copy button before every value, every text escaped, and
    what passes the ``JSON_TREE_MAX_*`` bounds (depth, entries, values, characters) left out
    with a note saying so (class ``j-cut``: a copy of such a value says it is partial). The
    ``json-tree`` CSS class wraps long text instead of scrolling."""
    writer = _TreeWriter()
    writer.out.append('<div class="json-tree">')
    writer.node(value, 0)
    writer.out.append("</div>")
    return Markup("".join(writer.out))  # noqa: S704  (every piece of data above is escaped)
