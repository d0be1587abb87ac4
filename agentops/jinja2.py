"""The Jinja2 environment of the project's pages (``templates/``), set in ``settings.TEMPLATES``.

Django admin and DRF's browsable API keep their own Django templates; the pages render with
Jinja2 because it renders the same markup several times faster (a run's timeline, the inbox).
The globals and filters below stand in for the Django template tags and filters the pages used,
and print what those printed.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Hashable
from datetime import UTC, datetime
from typing import Any, cast

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

from agentops.json_view import json_tree, pretty_json
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
