"""The built-in tools: enough to drive real runs, demos and tests without outside services."""

from __future__ import annotations

import ast
import operator
import time
from typing import Any

from django.core.mail import send_mail

from runs.tools.registry import ToolContext, ToolError, register

_BIN_OPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY_OPS: dict[type, Any] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN_OPS:
        if isinstance(node.op, ast.Pow) and abs(_evaluate(node.right)) > 64:
            raise ToolError("exponent too large (at most 64)")
        return _BIN_OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY_OPS:
        return _UNARY_OPS[type(node.op)](_evaluate(node.operand))
    raise ToolError(f"unsupported expression element: {type(node).__name__}")


@register(
    "calculate",
    description="Evaluate an arithmetic expression (+ - * / // % **, parentheses).",
    schema={
        "type": "object",
        "properties": {"expression": {"type": "string", "minLength": 1, "maxLength": 500}},
        "required": ["expression"],
        "additionalProperties": False,
    },
)
def calculate(args: dict[str, Any], ctx: ToolContext) -> float:
    try:
        tree = ast.parse(args["expression"], mode="eval")
        return round(float(_evaluate(tree)), 10)
    except (SyntaxError, ZeroDivisionError, OverflowError) as exc:
        raise ToolError(f"cannot evaluate {args['expression']!r}: {exc}") from exc


@register(
    "echo",
    description="Return the given value unchanged.",
    schema={
        "type": "object",
        "properties": {"value": {}},
        "required": ["value"],
        "additionalProperties": False,
    },
)
def echo(args: dict[str, Any], ctx: ToolContext) -> Any:
    return args["value"]


@register(
    "sleep",
    description="Wait the given number of seconds (at most 300), then return them.",
    schema={
        "type": "object",
        "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 300}},
        "required": ["seconds"],
        "additionalProperties": False,
    },
    timeout_seconds=330,
)
def sleep(args: dict[str, Any], ctx: ToolContext) -> float:
    time.sleep(args["seconds"])
    return args["seconds"]


@register(
    "flaky",
    description=(
        "Fail with a retryable error on the first `failures` attempts, then return 'ok'. "
        "For exercising retries and backoff."
    ),
    schema={
        "type": "object",
        "properties": {"failures": {"type": "integer", "minimum": 0, "maximum": 20}},
        "required": ["failures"],
        "additionalProperties": False,
    },
    max_attempts=5,
)
def flaky(args: dict[str, Any], ctx: ToolContext) -> str:
    if ctx.attempt <= args["failures"]:
        raise ToolError(f"planned failure {ctx.attempt} of {args['failures']}", retryable=True)
    return "ok"


@register(
    "send_email",
    description="Send an email through Django's configured email backend.",
    schema={
        "type": "object",
        "properties": {
            "to": {"type": "array", "items": {"type": "string", "format": "email"}, "minItems": 1},
            "subject": {"type": "string", "minLength": 1, "maxLength": 200},
            "body": {"type": "string"},
        },
        "required": ["to", "subject", "body"],
        "additionalProperties": False,
    },
    risk="high",
    side_effects=True,
    max_attempts=1,
)
def send_email(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    sent = send_mail(
        subject=args["subject"],
        message=f"{args['body']}\n\n-- idempotency key {ctx.idempotency_key}",
        from_email=None,
        recipient_list=args["to"],
    )
    return {"sent": sent, "to": args["to"]}
