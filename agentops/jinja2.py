"""The Jinja2 environment of the project's pages (``templates/``), set in ``settings.TEMPLATES``.

Django admin and DRF's browsable API keep their own Django templates; the pages render with
Jinja2 because it renders the same markup several times faster (a run's timeline, the inbox).
The globals and filters below stand in for the Django template tags and filters the pages used,
and print what those printed.
"""

from __future__ import annotations

import functools
import html
import json
from collections.abc import Hashable
from datetime import UTC, datetime
from typing import Any, cast

import orjson
from django.contrib.messages import get_messages
from django.template import defaultfilters
from django.templatetags.static import static
from django.urls import reverse
from django.utils import timesince as django_timesince
from django.utils.safestring import SafeString
from django.utils.timezone import make_aware, template_localtime  # type: ignore[attr-defined]  # not in stubs
from django.utils.translation import get_language
from jinja2 import Environment, Undefined, pass_eval_context
from jinja2.nodes import EvalContext
from markupsafe import Markup, escape

from agentops.template_printing import page_code_generator, print_escaped


def environment(**options: Any) -> Environment:
    """A Jinja2 environment for Django's Jinja2 backend, which passes its ``OPTIONS`` (the
    loader, ``auto_reload``) as ``options``.

    Templates get ``url(name, *args)``, ``static(path)``, ``get_messages(request)`` and
    Django's ``date``, ``timesince``, ``timeuntil``, ``linebreaksbr``, ``pluralize``,
    ``floatformat`` and ``truncatechars`` filters, plus ``pretty_json``, ``json_tree``,
    ``duration`` and ``time_tag``.
    Printed values are escaped as Django escapes them (``&quot;``, ``&#x27;``, where Jinja2
    would write ``&#34;``, ``&#39;``), a template keeps its final newline, and a missing value
    prints as nothing, also under ``DEBUG`` (where the backend would print its name instead):
    the pages print the markup Django's template language printed for them.
    """
    options.pop("autoescape", None)
    # Missing values are data, not template mistakes: keys that recorded JSON may lack (an
    # attempt error's "type", a message's "role").
    options.update(keep_trailing_newline=True, finalize=_escape, undefined=Undefined)
    env = PageEnvironment(autoescape=True, **options)
    env.code_generator_class = page_code_generator()
    env.globals.update(url=url, static=static, get_messages=get_messages)
    env.filters.update(
        date=date,
        timesince=timesince,
        timeuntil=timeuntil,
        linebreaksbr=linebreaksbr,
        pluralize=defaultfilters.pluralize,
        floatformat=floatformat,
        truncatechars=truncatechars,
        pretty_json=pretty_json,
        json_tree=json_tree,
        duration=duration,
        time_tag=time_tag,
    )
    return env


class PageEnvironment(Environment):
    """The pages' Jinja2 environment: templates compiled by ``page_code_generator()``
    (``agentops.template_printing``)."""

    print_escaped = staticmethod(print_escaped)


@pass_eval_context
def _escape(eval_ctx: EvalContext, value: Any) -> Any:
    # Jinja2 escapes printed values with markupsafe, which writes quotes as &#34; and &#39;
    # where Django writes &quot; and &#x27;. Text with quotes is escaped here first, as Django
    # does (to text, then escaped unless safe), which leaves markupsafe nothing to do; other
    # text both escape alike, and markupsafe's escape (in C) is the faster.
    if not eval_ctx.autoescape:
        return value
    if not isinstance(value, str):
        value = str(value)
    if hasattr(value, "__html__") or ('"' not in value and "'" not in value):
        return value
    return SafeString(html.escape(value))


def url(name: str, *args: Any) -> str:
    """The path of the URL pattern ``name`` with positional ``args``, as ``{% url %}`` gives it.

    Raises:
        django.urls.NoReverseMatch: no such pattern, or the arguments do not fit it.
    """
    return reverse(name, args=args)


def date(value: Any, arg: str | None = None) -> str:
    """Django's ``date`` filter, with an aware datetime first converted to the current time
    zone as Django's template language does for it; ``""`` for None. For a datetime, ``"c"``
    (ISO 8601) is ``datetime.isoformat`` of that time and ``"Y-m-d H:i:s"`` its fields, each
    zero-padded to Django's width, as Django prints them, without its format machinery."""
    if isinstance(value, datetime):
        if arg == "c":
            return template_localtime(value).isoformat()
        if arg == "Y-m-d H:i:s":
            t = template_localtime(value)
            return (
                f"{t.year:04d}-{t.month:02d}-{t.day:02d} {t.hour:02d}:{t.minute:02d}:{t.second:02d}"
            )
    return defaultfilters.date(template_localtime(value), arg)


# What ``time_tag`` prints for each ``show``: Django ``date`` formats ("Y-m-d H:i:s T", "H:i:s T",
# "Y-m-d H:i T") as ``strftime`` formats, the time zone's name (Django's ``T``) added after them.
_TIME_FORMATS = {"datetime": "%Y-%m-%d %H:%M:%S", "time": "%H:%M:%S", "minutes": "%Y-%m-%d %H:%M"}


class _TimeString:
    """One of Django's ``timesince`` unit strings (a lazy ``ngettext``, "%(num)d minutes"),
    translated once per language and number: Django resolves the lazy translation on every
    use, and a runs list prints a hundred of them."""

    __slots__ = ("_lazy", "_texts")

    def __init__(self, lazy: Any) -> None:
        self._lazy = lazy
        self._texts: dict[tuple[str | None, int], str] = {}

    def __mod__(self, params: dict[str, int]) -> str:
        key = (get_language(), params["num"])
        text = self._texts.get(key)
        if text is None:
            text = self._texts[key] = str(self._lazy % params)
        return text


# Typed as Django's strings: ``timesince`` only formats them with ``%``.
_TIME_STRINGS: dict[str, Any] = {
    unit: _TimeString(lazy) for unit, lazy in django_timesince.TIME_STRINGS.items()
}


def timesince(value: Any, arg: Any = None) -> str:
    """Django's ``timesince`` filter ("9 minutes", "1 hour, 3 minutes": the time from
    ``value`` to ``arg``, or to now), with its unit strings translated once per language and
    number (``_TimeString``); ``""`` for an empty or unusable value, as Django's."""
    if not value:
        return ""
    try:
        return django_timesince.timesince(value, arg or None, time_strings=_TIME_STRINGS)
    except (ValueError, TypeError):
        return ""


def timeuntil(value: Any, arg: Any = None) -> str:
    """Django's ``timeuntil`` filter (the time from now, or ``arg``, to ``value``), with the
    unit strings of ``timesince``; ``""`` for an empty or unusable value, as Django's."""
    if not value:
        return ""
    try:
        return django_timesince.timeuntil(value, arg, time_strings=_TIME_STRINGS)
    except (ValueError, TypeError):
        return ""


@functools.lru_cache(maxsize=1024)
def _floatformat(kind: Hashable, text: str, value: Any, arg: Any, language: str | None) -> str:
    return defaultfilters.floatformat(value, arg)


def floatformat(value: Any, arg: Any = -1) -> str:
    """Django's ``floatformat`` filter, its text kept (up to 1024) per value (its type and
    text too, so ``-0.0`` and ``0.0``, ``Decimal("1.0")`` and ``Decimal("1.00")`` are kept
    apart), argument and language: the pages print the same few costs, ``0`` most of all,
    many times, and Django's rounds and localizes each. A value that cannot be a key (a list,
    say) is formatted as it is. Number formats are settings, fixed for the process."""
    try:
        key = cast(Hashable, type(value))
        return _floatformat(key, str(value), value, arg, get_language())
    except TypeError:
        return defaultfilters.floatformat(value, arg)


def time_tag(value: datetime | None, show: str = "datetime") -> str:
    """An aware datetime as ``<time datetime="ISO 8601 in UTC" data-local="show">`` around the
    server's text in the current time zone (``show``: "datetime" ``2026-05-01 14:03:07 UTC``,
    "time" ``14:03:07 UTC`` or "minutes" ``2026-05-01 14:03 UTC``); ``""`` for None.
    ``static/js/time.js`` rewrites the text to the viewer's time zone and puts the absolute
    time with its zone in ``title``. Formatted with ``strftime`` (Django's ``date`` filter
    prints the same text several times slower: a run page prints hundreds of times).

    A naive datetime is taken to be in the default time zone (``TIME_ZONE``).

    Raises:
        KeyError: an unknown ``show``.
    """
    if value is None:
        return ""
    if value.tzinfo is None:
        value = make_aware(value)
    local = template_localtime(value)
    text = f"{local.strftime(_TIME_FORMATS[show])} {local.tzname()}"
    iso = value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return SafeString(f'<time datetime="{iso}" data-local="{show}">{html.escape(text)}</time>')


def truncatechars(value: Any, length: int) -> str:
    """Django's ``truncatechars``: ``value`` as text cut to ``length`` characters, the last one
    an ellipsis (``…``). ASCII text no longer than ``length`` is returned as it is without
    Django's ``Truncator`` (which normalizes and measures the text first), so short texts cost
    nothing."""
    if isinstance(value, str) and value.isascii() and len(value) <= length:
        return value
    return defaultfilters.truncatechars(value, length)


@pass_eval_context
def linebreaksbr(eval_ctx: EvalContext, value: Any) -> str:
    """Django's ``linebreaksbr``: newlines as ``<br>``, the text escaped when autoescaping."""
    return defaultfilters.linebreaksbr(value, autoescape=eval_ctx.autoescape)


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


# Objects and arrays nested deeper than this start folded; so do those with more entries.
JSON_TREE_OPEN_DEPTH = 3
JSON_TREE_OPEN_ENTRIES = 20
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


def _note(text: str) -> str:
    return f'<span class="j-note">{escape(text)}</span>'


class _TreeWriter:
    """Writes one ``json_tree``: the HTML pieces in ``out``, and how many more values it may
    show (``JSON_TREE_MAX_NODES``)."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.nodes_left = JSON_TREE_MAX_NODES

    def node(self, value: Any, depth: int) -> None:
        out = self.out
        self.nodes_left -= 1
        if isinstance(value, str):
            parsed = _json_text(value)
            if parsed is None:
                shown = value[:JSON_TREE_MAX_CHARS]
                out.append(f'<span class="j-str">"{escape(shown)}"</span>')
                if len(value) > len(shown):
                    out.append(" " + _note(f"… {len(value) - len(shown)} more characters"))
                return
            out.append(
                '<span class="j-note" title="a string holding JSON, shown parsed">JSON</span> '
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
                + _note(f"nested deeper than {JSON_TREE_MAX_DEPTH} levels: not shown")
            )
            return
        folded = depth >= JSON_TREE_OPEN_DEPTH or len(value) > JSON_TREE_OPEN_ENTRIES
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
            out.append(f"<li>{_note(f'… {len(value) - shown} more {unit}s not shown')}</li>")
        out.append("</ul></details>")


def json_tree(value: Any) -> Markup:
    """``value`` (JSON data) as readable, collapsible HTML: objects and arrays as ``<details>``
    lists (deep or long ones folded), strings that hold a JSON object or array shown parsed,
    every text escaped, and what passes the ``JSON_TREE_MAX_*`` bounds (depth, entries,
    values, characters) left out with a note saying so. The ``json-tree`` CSS class wraps long
    text instead of scrolling."""
    writer = _TreeWriter()
    writer.out.append('<div class="json-tree">')
    writer.node(value, 0)
    writer.out.append("</div>")
    return Markup("".join(writer.out))  # noqa: S704  (every piece of data above is escaped)


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
