"""The built-in tools: enough to drive real runs, demos and tests without outside services."""

from __future__ import annotations

import ast
import math
import operator
import time
from typing import Any

from django.core.mail import send_mail
from simpleeval import InvalidExpression, SimpleEval

from runs.tools.registry import PreviewContext, ToolContext, ToolError, register

# Arithmetic only, on floats: a float operation takes constant time and its overflow is an
# error, so no expression can keep a worker busy (Python integers grow without bound: a
# 40-character power of a large base runs for hours).
_OPERATORS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


class _FloatEvaluator(SimpleEval):
    """simpleeval (names, calls and attributes refused) over floats: every number literal is a
    float."""

    def _eval_constant(self, node: ast.Constant) -> float:
        value = super()._eval_constant(node)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ToolError(f"only numbers may appear, not {value!r}")
        return float(value)


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
    """The value of an arithmetic expression, as a float rounded to 10 decimals.

    Raises:
        ToolError: not arithmetic (names, calls, strings...), a syntax error, division by
            zero, or a result that is not a finite float.
    """
    expression = args["expression"]
    evaluator = _FloatEvaluator(operators=_OPERATORS, functions={}, names={})
    try:
        value = evaluator.eval(expression)
    except (SyntaxError, ZeroDivisionError, OverflowError) as exc:
        raise ToolError(f"cannot evaluate {expression!r}: {exc}") from exc
    except InvalidExpression as exc:
        raise ToolError(f"cannot evaluate {expression!r}: {exc}") from exc
    if not isinstance(value, float) or not math.isfinite(value):
        raise ToolError(f"cannot evaluate {expression!r}: the result is not a finite number")
    return round(value, 10)


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


def _send_email_preview(args: dict[str, Any], ctx: PreviewContext) -> dict[str, Any]:
    # What the reviewer cannot take back once approved: who gets which mail.
    recipients = list(args.get("to") or [])
    return {
        "effect": f"sends one email to {len(recipients)} recipient(s); it cannot be recalled",
        "recipients": {"before": [], "after": recipients},
        "subject": args.get("subject", ""),
        "body_characters": len(str(args.get("body", ""))),
    }


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
    preview=_send_email_preview,
    key_args=("to", "subject"),
)
def send_email(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    sent = send_mail(
        subject=args["subject"],
        message=f"{args['body']}\n\n-- idempotency key {ctx.idempotency_key}",
        from_email=None,
        recipient_list=args["to"],
    )
    return {"sent": sent, "to": args["to"]}
