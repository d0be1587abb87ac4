"""The pages' templates print each value through one call
(``agentops.template_printing.print_escaped``, compiled in by ``PageEnvironment``) and print
exactly what Jinja2's own escaping with the pages' ``finalize`` printed: escaped the way
Django escapes, safe values left as they are."""

import enum
import uuid
from decimal import Decimal
from typing import Any

import jinja2
import pytest
from django.db import models
from django.template import engines
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext_lazy
from jinja2 import Environment
from jinja2.compiler import CodeGenerator
from markupsafe import Markup

from agentops.jinja2 import PageEnvironment
from agentops.template_printing import (
    PRINTING_CODE_GENERATOR_JINJA2,
    _PrintingCodeGenerator,
    page_code_generator,
)


class Colour(models.TextChoices):
    RED = "red", "Red"


class Quoted(str, enum.Enum):  # noqa: UP042  (a str whose str() is not its text)
    PLAIN = "plain"
    QUOTED = 'say "x"'


class HasHtml:
    def __html__(self) -> str:
        return "<b>from __html__</b>"

    def __str__(self) -> str:
        return "<b>from __str__</b>"


class SafeStr:
    def __str__(self) -> str:
        return mark_safe("<i>safe from __str__</i>")


VALUES: list[Any] = [
    "plain",
    "<script>alert('x')</script>",
    'say "hi" & <go>',
    "it's",
    "",
    Markup("<i>markup</i>"),
    SafeString("<i>safe</i>"),
    42,
    3.5,
    None,
    True,
    Decimal("1.50"),
    [1, "<x>"],
    {"a": '"b"'},
    gettext_lazy("Log <out>"),
    Colour.RED,
    Quoted.PLAIN,
    Quoted.QUOTED,
    HasHtml(),
    SafeStr(),
    uuid.UUID(int=7),
]

TEMPLATES = [
    "{{ v }}",
    "<a title=\"{{ v }}\" data-x='{{ v }}'>{{ v }}</a>",
    "{% set x %}[{{ v }}]{% endset %}{{ x }}|{{ x|length }}",
    "{% autoescape false %}{{ v }}{% endautoescape %}",
    "{% macro m(a) %}<{{ a }}>{% endmacro %}{{ m(v) }}",
    '{{ v ~ "<" }}',
    "{% for i in [v, v] %}{{ i }}{{ loop.index }}{% endfor %}",
    "{% filter upper %}{{ v }}{% endfilter %}",
    "{{ missing }}|{{ v.missing }}",
]


@pytest.fixture(scope="module")
def pages() -> Environment:
    env = engines["jinja2"].env  # type: ignore[attr-defined]
    assert isinstance(env, PageEnvironment)
    return env


@pytest.fixture(scope="module")
def reference(pages: Environment) -> Environment:
    """Jinja2's own code generation with the pages' options (``finalize``, undefined)."""
    return Environment(autoescape=True, finalize=pages.finalize, undefined=pages.undefined)


@pytest.mark.parametrize("source", TEMPLATES)
def test_every_value_prints_as_jinja2_printed_it(
    pages: Environment, reference: Environment, source: str
) -> None:
    page, ref = pages.from_string(source), reference.from_string(source)
    for value in VALUES:
        assert page.render(v=value) == ref.render(v=value), (source, value)


def test_text_is_escaped_as_django_escapes_it_and_safe_text_is_not(pages: Environment) -> None:
    page = pages.from_string('<p title="{{ v }}">{{ v }}</p>')
    assert page.render(v="<script>alert('x')</script>") == (
        '<p title="&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;">'
        "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;</p>"
    )
    assert (
        page.render(v='a "b" & c')
        == '<p title="a &quot;b&quot; &amp; c">a &quot;b&quot; &amp; c</p>'
    )
    assert page.render(v=Markup("<i>ok</i>")) == '<p title="<i>ok</i>"><i>ok</i></p>'


def test_printing_code_generator_is_used_on_the_installed_jinja2(pages: Environment) -> None:
    """Fails on a Jinja2 release ``_PrintingCodeGenerator`` was not written for: check that
    ``CodeGenerator._output_child_pre``/``_post`` still mean what it overrides (the tests
    above), then add the release to ``PRINTING_CODE_GENERATOR_JINJA2``."""
    assert jinja2.__version__.startswith(PRINTING_CODE_GENERATOR_JINJA2), jinja2.__version__
    assert page_code_generator() is _PrintingCodeGenerator
    assert pages.code_generator_class is _PrintingCodeGenerator
    assert "environment.print_escaped(" in pages.compile("{{ v }}", raw=True)


def test_another_jinja2_compiles_the_pages_with_its_own_generator(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(jinja2, "__version__", "3.2.0")
    assert page_code_generator() is CodeGenerator
    assert "Jinja2 3.2.0" in caplog.text
