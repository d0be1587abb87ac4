"""How the pages' templates print a value: through one call (``print_escaped``) that their
code generator (``page_code_generator``) compiles in, on the Jinja2 releases it was written
for; the environment is ``agentops.jinja2.PageEnvironment``."""

from __future__ import annotations

import html
import logging
import re
from typing import Any

import jinja2
from jinja2.compiler import CodeGenerator, Frame

# The characters html.escape replaces (quote=True).
_ESCAPED = re.compile(r"[&<>\"']")


def print_escaped(value: Any) -> str:
    """The text a page prints for ``value`` where autoescaping is on: what ``_escape`` and
    then Jinja2's ``escape`` print (Django's escaping: ``&quot;``, ``&#x27;``), in one call
    that makes no ``Markup``. Not for ``Markup`` results: it returns plain text, only for
    the template's output."""
    if type(value) is not str:
        if not isinstance(value, str):
            value = str(value)
        if hasattr(value, "__html__"):
            return str(value.__html__())
        if '"' not in value and "'" not in value:
            # As markupsafe's escape does for a subclass of str without quotes (_escape
            # leaves it to it).
            value = str(value)
    # Most printed values (ids, statuses, numbers, times) have nothing to escape: one search
    # in C instead of html.escape's five replacements.
    return html.escape(value) if _ESCAPED.search(value) else value


class _PrintingCodeGenerator(CodeGenerator):
    """Compiles each printed value of autoescaped template code to one call of
    ``print_escaped`` instead of Jinja2's ``escape(environment.finalize(context.eval_ctx,
    value))``: three Python calls and a ``Markup`` a value, and a run page prints thousands.
    Code where autoescaping changes at run time, or is off, compiles as Jinja2 compiles it
    (``finalize`` then escapes or not)."""

    def _output_child_pre(self, node: Any, frame: Frame, finalize: Any) -> None:
        if frame.eval_ctx.volatile or not frame.eval_ctx.autoescape:
            super()._output_child_pre(node, frame, finalize)
        else:
            self.write("environment.print_escaped(")

    def _output_child_post(self, node: Any, frame: Frame, finalize: Any) -> None:
        if frame.eval_ctx.volatile or not frame.eval_ctx.autoescape:
            super()._output_child_post(node, frame, finalize)
        else:
            self.write(")")


logger = logging.getLogger(__name__)
# The Jinja2 releases whose private ``CodeGenerator._output_child_pre`` and
# ``_output_child_post`` (jinja2/compiler.py, ``visit_Output``) ``_PrintingCodeGenerator``
# was written for and tested against.
PRINTING_CODE_GENERATOR_JINJA2 = ("3.1.",)


def page_code_generator() -> type[CodeGenerator]:
    """The code generator of the pages' templates: ``_PrintingCodeGenerator`` on the Jinja2
    releases it was written for (``PRINTING_CODE_GENERATOR_JINJA2``), else Jinja2's own
    ``CodeGenerator`` (same printed text; a warning is logged), since the methods it
    overrides are Jinja2's internals.

    Why: it takes 5.5 %, 9.7 % and 7.6 % off the server CPU time of the run page, the inbox
    and the runs list (rows "pages | ...: server CPU time, median" of
    ``benchmarks/README.md``; A/B of the two generators, 120 interleaved renders each,
    2026-11-28). ``tests/agentops/test_page_printing.py::
    test_printing_code_generator_is_used_on_the_installed_jinja2`` fails on a Jinja2 it was
    not written for."""
    version = jinja2.__version__
    if version.startswith(PRINTING_CODE_GENERATOR_JINJA2):
        return _PrintingCodeGenerator
    logger.warning(
        "Jinja2 %s: the pages compile with Jinja2's CodeGenerator, not agentops's faster "
        "_PrintingCodeGenerator (written for Jinja2 %s)",
        version,
        ", ".join(PRINTING_CODE_GENERATOR_JINJA2),
    )
    return CodeGenerator
