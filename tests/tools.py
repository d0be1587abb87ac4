"""Tools registered only for tests (imported by the test modules that use them)."""

import re
import threading
import time
from pathlib import Path
from typing import Any

from runs.tools import (
    Compensation,
    ToolContext,
    Validator,
    declare_compensation,
    declare_error_form,
    register,
)

CALLS: dict[str, int] = {}
_release = threading.Event()


@register(
    "test_hang",
    description="Blocks until released (tests only).",
    timeout_seconds=1,
    max_attempts=2,
)
def hang(args: dict[str, Any], ctx: ToolContext) -> str:
    _release.wait(5)
    return "released"


@register("test_crash", description="Raises ValueError (tests only).", max_attempts=2)
def crash(args: dict[str, Any], ctx: ToolContext) -> str:
    raise ValueError("boom")


@register("test_count", description="Counts its calls by idempotency key (tests only).")
def count(args: dict[str, Any], ctx: ToolContext) -> int:
    CALLS[ctx.idempotency_key] = CALLS.get(ctx.idempotency_key, 0) + 1
    return CALLS[ctx.idempotency_key]


@register("test_not_json", description="Returns a value that is not JSON (tests only).")
def not_json(args: dict[str, Any], ctx: ToolContext) -> object:
    return object()


@register(
    "test_send",
    description="A non-idempotent side effect (tests only).",
    side_effects=True,
    risk="low",
)
def send(args: dict[str, Any], ctx: ToolContext) -> int:
    CALLS[ctx.idempotency_key] = CALLS.get(ctx.idempotency_key, 0) + 1
    return CALLS[ctx.idempotency_key]


@register(
    "test_send_crash",
    description="A non-idempotent effect that raises (tests only).",
    side_effects=True,
    risk="low",
)
def send_crash(args: dict[str, Any], ctx: ToolContext) -> int:
    raise RuntimeError("connection reset after the request was sent")


@register("test_thread_id", description="Returns the id of the thread it runs in (tests only).")
def thread_id(args: dict[str, Any], ctx: ToolContext) -> int:
    return threading.get_ident()


@register(
    "test_slow",
    description="Sleeps args.seconds (default 3), then returns them (tests only).",
    timeout_seconds=5,
)
def slow(args: dict[str, Any], ctx: ToolContext) -> float:
    seconds = float(args.get("seconds", 3))
    time.sleep(seconds)
    return seconds


@register(
    "test_spin",
    description="Spins the CPU forever (tests only: real workers).",
    timeout_seconds=1,
    max_attempts=1,
)
def spin(args: dict[str, Any], ctx: ToolContext) -> None:
    while True:
        pass


@register(
    "test_send_stuck",
    description=(
        "A non-idempotent effect (a line appended to args.path), then a regular expression "
        "that backtracks forever in C, holding the GIL (tests only: real workers)."
    ),
    side_effects=True,
    risk="low",
    timeout_seconds=5,
)
def send_stuck(args: dict[str, Any], ctx: ToolContext) -> None:
    with Path(args["path"]).open("a") as calls:
        calls.write(f"{ctx.idempotency_key}\n")
    re.match(r"(a+)+$", "a" * 64 + "b")


def _refused(result: Any) -> bool:
    return isinstance(result, dict) and "refused" in result


@register(
    "test_refusing",
    description="Answers {'refused': why} when asked to refuse, else {'done': true}; that "
    "answer is its declared error form (tests only).",
    error_when=_refused,
)
def refusing(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    if args.get("refuse"):
        return {"refused": "the amount does not add up"}
    return {"done": True}


def _broken_form(result: Any) -> bool:
    raise KeyError("a form that fails on every result")


# A recorded tool whose declared error form raises (tests only).
declare_error_form(["test_broken_form"], _broken_form)


# The effects of the compensable test tools, by idempotency key: (tool, arguments) per call.
EFFECTS: dict[str, list[tuple[str, dict[str, Any]]]] = {}


def _effect(name: str, args: dict[str, Any], ctx: ToolContext) -> None:
    EFFECTS.setdefault(ctx.idempotency_key, []).append((name, args))


@register(
    "test_reserve",
    description="Reserves args.seat; undone by test_release (tests only).",
    schema={"type": "object", "properties": {"seat": {"type": "string"}}, "required": ["seat"]},
    side_effects=True,
)
def reserve(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    _effect("test_reserve", args, ctx)
    return {"reservation_id": f"R-{args['seat']}"}


@register(
    "test_release",
    description="Releases a reservation (tests only).",
    schema={
        "type": "object",
        "properties": {"reservation_id": {"type": "string"}},
        "required": ["reservation_id"],
    },
    side_effects=True,
)
def release(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    _effect("test_release", args, ctx)
    return {"released": args["reservation_id"]}


@register(
    "test_charge",
    description="Charges args.amount; undone by test_refund, which needs approval (tests only).",
    side_effects=True,
)
def charge(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    _effect("test_charge", args, ctx)
    return {"charged": args["amount"]}


@register(
    "test_refund",
    description="Refunds a charge (high risk: a reviewer approves it; tests only).",
    side_effects=True,
    risk="high",
)
def refund(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    _effect("test_refund", args, ctx)
    return {"refunded": args["amount"]}


@register("test_hold", description="Holds something test_crash cannot undo (tests only).")
def hold(args: dict[str, Any], ctx: ToolContext) -> str:
    _effect("test_hold", args, ctx)
    return "held"


declare_compensation(
    ["test_reserve"], Compensation("test_release", {"reservation_id": "result.reservation_id"})
)
declare_compensation(["test_charge"], Compensation("test_refund", {"amount": "args.amount"}))
declare_compensation(["test_hold"], Compensation("test_crash"))


def _calls(name: str, args: dict[str, Any], ctx: ToolContext) -> int:
    _effect(name, args, ctx)
    return len(EFFECTS[ctx.idempotency_key])


@register(
    "test_quote",
    description="Quotes a price: negative on its first call under a key, then 10; its "
    "validator retries a negative one (tests only).",
    side_effects=True,
    validators=(Validator("price is positive", condition="price > 0", retry=True),),
)
def quote(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return {"price": -5 if _calls("test_quote", args, ctx) == 1 else 10}


@register(
    "test_lookup",
    description="Answers {'status': args.status}; a status other than ok waits for a "
    "reviewer (tests only).",
    side_effects=True,
    validators=(
        Validator(
            "status is ok",
            schema={"type": "object", "properties": {"status": {"const": "ok"}}},
            on_failure="gate",
        ),
    ),
)
def lookup(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    _calls("test_lookup", args, ctx)
    return {"status": args["status"]}


def even(result: Any) -> str | None:
    """A registered check (tests only): what is wrong with ``result`` unless it is even."""
    return None if result % 2 == 0 else f"{result} is odd"


@register(
    "test_number",
    description="Answers args.n; its result must be even, and is not retried (tests only).",
    side_effects=True,
    validators=(Validator("result is even", check="tests.tools.even"),),
)
def number(args: dict[str, Any], ctx: ToolContext) -> int:
    _calls("test_number", args, ctx)
    return int(args["n"])
