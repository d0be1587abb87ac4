"""The rule-condition language of risk rules and tool grants: a small expression over a tool
call's arguments, such as ``amount > 500``, ``args["payment"]["amount"] > 500`` or
``payment.amount > 500 and currency == "USD"``, evaluated by simpleeval on a restricted
grammar.

Names: every top-level argument by its key (when the key is an identifier), and ``args`` for
the whole object. ``a.b`` reads the key ``b`` of the object ``a`` (JSON-path style) and
``a["b"]`` / ``a[0]`` index objects and arrays. Allowed: comparisons (``== != < <= > >= in
not in``), ``and or not``, arithmetic (``+ - * / // %``; ``**`` with an exponent of at most
``MAX_EXPONENT``; ``%`` on numbers only, never formatting a string), number, string,
true/false/null literals (``True``/``true``, ...) and the functions ``len``, ``abs``, ``lower``,
``upper``, ``int``, ``float``, ``str``.

Hostile conditions are refused when parsed (``check_condition``, at save time in admin): more
than ``MAX_LENGTH`` characters, more than ``MAX_NODES`` syntax nodes or deeper than
``MAX_DEPTH`` (deep nesting), any name or key starting with ``_`` (dunder access), any
construct outside the grammar above (lambdas, comprehensions, attribute calls such as
``"x".ljust(10**9)``, assignments, imports). At evaluation time simpleeval's own limits also
hold (``+`` and ``*`` make strings and lists of at most ``MAX_STRING_LENGTH`` = 100,000
characters or items), ``str``, ``lower`` and ``upper`` refuse to write a text longer than that
(``[big] * 99999`` holds one string many times), ``%`` refuses to format a string
(``"%0999999999d" % 1`` would write a gigabyte), and a power whose exponent or base is too
large fails instead of running for minutes.
"""

from __future__ import annotations

import ast
import json
import operator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from simpleeval import (
    DEFAULT_OPERATORS,
    MAX_STRING_LENGTH,
    InvalidExpression,
    IterableTooLong,
    NameNotDefined,
    NumberTooHigh,
    SimpleEval,
)

MAX_LENGTH = 300
MAX_NODES = 60
MAX_DEPTH = 12
MAX_EXPONENT = 64
MAX_POWER_BASE = 10**12
# How much of a value the reason shows (characters).
MAX_SHOWN = 60


def _text(value: Any) -> str:
    """``str(value)``, refused before it is written when ``value`` holds more than
    ``MAX_STRING_LENGTH`` characters of strings and keys or items: a list made by ``*`` holds
    one string up to 100,000 times, and its text would be that many copies.

    Raises:
        IterableTooLong: the text would pass ``MAX_STRING_LENGTH`` characters.
    """
    size = 0
    pending = [value]
    # A container counts its brackets and a character per entry before its entries are
    # queued, so the walk stops before it queues or visits more than MAX_STRING_LENGTH
    # values, however many times the lists repeat one another.
    while pending and size <= MAX_STRING_LENGTH:
        item = pending.pop()
        if isinstance(item, str):
            size += len(item)
        elif isinstance(item, list):
            size += 2 + len(item)
            if size <= MAX_STRING_LENGTH:
                pending.extend(item)
        elif isinstance(item, dict):
            size += 2 + 2 * len(item)
            if size <= MAX_STRING_LENGTH:
                pending.extend(item.keys())
                pending.extend(item.values())
    too_long = f"str() would write more than {MAX_STRING_LENGTH} characters"
    if size > MAX_STRING_LENGTH:
        raise IterableTooLong(too_long)
    text = str(value)
    # Quotes and escapes make the text longer than the characters counted.
    if len(text) > MAX_STRING_LENGTH:
        raise IterableTooLong(too_long)
    return text


FUNCTIONS: dict[str, Any] = {
    "len": len,
    "abs": abs,
    "int": int,
    "float": float,
    "str": _text,
    "lower": lambda value: _text(value).lower(),
    "upper": lambda value: _text(value).upper(),
}
CONSTANTS = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}

_ALLOWED_NODES = (
    ast.Expression,
    ast.Compare,
    ast.BoolOp,
    ast.UnaryOp,
    ast.BinOp,
    ast.Name,
    ast.Constant,
    ast.Subscript,
    ast.Attribute,
    ast.Call,
    ast.Load,
    ast.And,
    ast.Or,
    ast.Not,
    ast.USub,
    ast.UAdd,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.In,
    ast.NotIn,
)


class ConditionError(ValueError):
    """A condition that may not be saved: its text says what is wrong, for the admin form."""


def _power(base: Any, exponent: Any) -> Any:
    if abs(exponent) > MAX_EXPONENT or abs(base) > MAX_POWER_BASE:
        raise NumberTooHigh(f"{base} ** {exponent} is too large to compute")
    return base**exponent


def _modulo(left: Any, right: Any) -> Any:
    # On a string, % is printf-style formatting, whose widths and precisions
    # ("%0999999999d" % 1) write strings of any size before anything could measure them.
    if isinstance(left, str):
        raise InvalidExpression("% formats strings, which a condition may not do (numbers only)")
    return left % right


_OPERATORS = {
    **DEFAULT_OPERATORS,
    ast.Pow: _power,
    ast.Mod: _modulo,
    ast.Not: operator.not_,
}


def _depth(node: ast.AST) -> int:
    children = list(ast.iter_child_nodes(node))
    return 1 + max((_depth(child) for child in children), default=0)


@lru_cache(maxsize=512)
def _parse(text: str) -> ast.Expression:
    """The checked syntax tree of ``text`` (cached: rules are evaluated for every step).

    Raises:
        ConditionError: see ``check_condition``.
    """
    if len(text) > MAX_LENGTH:
        raise ConditionError(f"a condition has at most {MAX_LENGTH} characters")
    if not text.strip():
        raise ConditionError("the condition is empty")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ConditionError(f"not an expression: {getattr(exc, 'msg', exc)}") from None
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES:
        raise ConditionError(f"a condition has at most {MAX_NODES} parts")
    if _depth(tree) > MAX_DEPTH:
        raise ConditionError(f"a condition nests at most {MAX_DEPTH} levels deep")
    for node in nodes:
        if not isinstance(node, _ALLOWED_NODES):
            raise ConditionError(f"{type(node).__name__} is not allowed in a condition")
        if isinstance(node, ast.Name) and node.id.startswith("_"):
            raise ConditionError(f"names starting with _ are not allowed ({node.id})")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise ConditionError(f"keys starting with _ are not allowed ({node.attr})")
        if isinstance(node, ast.Constant) and isinstance(node.value, bytes):
            raise ConditionError("bytes literals are not allowed")
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                called = ast.unparse(node.func)
                raise ConditionError(
                    f"only the functions {', '.join(sorted(FUNCTIONS))} may be called, not {called}"
                )
            if node.keywords or len(node.args) != 1:
                raise ConditionError(f"{node.func.id}() takes exactly one argument")
    return tree


def check_condition(text: str) -> None:
    """Refuse a condition that may not be saved.

    Raises:
        ConditionError: ``text`` is empty, longer than ``MAX_LENGTH``, not one Python-style
            expression, too large (``MAX_NODES``) or too deep (``MAX_DEPTH``), or uses what the
            grammar does not allow (see the module docstring); the message says which.
    """
    _parse(text)


class _Evaluator(SimpleEval):
    """simpleeval with dotted keys read from JSON objects only (never Python attributes)."""

    def _eval_attribute(self, node: ast.Attribute) -> Any:
        value = self._eval(node.value)
        if not isinstance(value, dict):
            raise InvalidExpression(
                f"{ast.unparse(node.value)} is {type(value).__name__}, not an object"
            )
        if node.attr not in value:
            raise InvalidExpression(f"{ast.unparse(node.value)} has no key {node.attr!r}")
        return value[node.attr]


@dataclass(frozen=True)
class Evaluation:
    """The outcome of a condition on one call's arguments: ``matched``; ``error`` (why it could
    not be evaluated: a missing key, a wrong type, a limit; empty when it could); ``values``
    the argument paths it read, shown as ``path = value`` (JSON)."""

    matched: bool
    error: str = ""
    values: str = ""


def _names(args: dict[str, Any]) -> dict[str, Any]:
    names = {key: value for key, value in args.items() if key.isidentifier()}
    names.update(CONSTANTS)
    names["args"] = args
    return names


def _references(tree: ast.AST) -> list[ast.expr]:
    """The outermost argument paths of ``tree`` (``amount``, ``payment.amount``,
    ``args["payment"]["amount"]``), in reading order, each once."""
    found: dict[str, ast.expr] = {}

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Name | ast.Attribute | ast.Subscript):
            if not (isinstance(node, ast.Name) and node.id in CONSTANTS):
                found.setdefault(ast.unparse(node), node)
            return
        if isinstance(node, ast.Call):
            for arg in node.args:
                visit(arg)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return list(found.values())


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def evaluate(text: str, args: dict[str, Any]) -> Evaluation:
    """Evaluate the condition ``text`` on a call's ``args`` (its JSON object).

    Never raises for what the arguments hold: a missing key, a wrong type, a division by zero
    or a limit crossed give ``Evaluation(matched=False, error=...)``; so does a condition that
    ``check_condition`` would refuse (one saved before the rules were tightened). A result
    that is not a boolean counts by its truth value.
    """
    try:
        tree = _parse(text)
    except ConditionError as exc:
        return Evaluation(False, error=f"invalid condition: {exc}")
    names = _names(args)
    evaluator = _Evaluator(operators=_OPERATORS, functions=FUNCTIONS, names=names)
    evaluator.expr = text
    try:
        matched = bool(evaluator._eval(tree.body))
    except NameNotDefined as exc:
        return Evaluation(False, error=f"the arguments have no {exc.name!r}")
    except (InvalidExpression, LookupError, TypeError, ValueError, ArithmeticError) as exc:
        return Evaluation(False, error=f"{type(exc).__name__}: {exc}")
    except RecursionError:
        return Evaluation(False, error="the condition nests too deeply")
    shown = []
    for reference in _references(tree.body):
        try:
            value = evaluator._eval(reference)
        except (InvalidExpression, LookupError, TypeError, ValueError, ArithmeticError):
            continue
        shown.append(f"{ast.unparse(reference)} = {_shown(value)}")
    return Evaluation(matched, values=", ".join(shown))


def holds(text: str, names: dict[str, Any]) -> tuple[bool, str]:
    """Whether the condition ``text`` holds on the object ``names`` (a validator's view of a
    tool's result, ``runs.tools.validators``), and why it could not be evaluated (empty when
    it could): ``evaluate`` as a pair."""
    found = evaluate(text, names)
    return found.matched, found.error
