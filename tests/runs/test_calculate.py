"""The calculate tool evaluates arithmetic on floats through simpleeval: what it cannot do in
constant time (a power of a large base), names, calls and strings are refused, never run."""

from __future__ import annotations

import threading

import pytest

from runs.tools import ToolContext, ToolError
from runs.tools.builtin import calculate

CTX = ToolContext(
    idempotency_key="k",
    run_id="r",
    step_id=1,
    attempt=1,
    timeout_seconds=60,
    heartbeat=lambda: True,
)


@pytest.mark.parametrize(
    ("expression", "value"),
    [("1+2", 3.0), ("(2+3)*4.5", 22.5), ("10//3", 3.0), ("-5%3", 1.0), ("2**0.5", 1.4142135624)],
)
def test_arithmetic_is_evaluated(expression, value):
    assert calculate({"expression": expression}, CTX) == value


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("99999999**3999999", "out of range"),  # hours of integer arithmetic before
        ("9**9**9**9", "out of range"),
        ("9999999999**9999999999**99", "out of range"),
        ("(10**300)**(10**300)*(10**300)**(10**300)", "out of range"),
        ("1e308*10", "not a finite number"),
        ("1/0", "division by zero"),
        ('__import__("os").system("id")', "not defined"),
        ("a+1", "not defined"),
        ('"x"*3', "only numbers"),
        ("(1,2)", "cannot evaluate"),
    ],
)
def test_anything_else_is_refused_at_once(expression, words):
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            calculate({"expression": expression}, CTX)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    # Liveness, not speed: a runaway evaluation would still be running after half a minute.
    thread.join(30)
    assert not thread.is_alive(), f"{expression} is still being evaluated"
    assert len(outcome) == 1
    assert isinstance(outcome[0], ToolError)
    assert words in str(outcome[0])
