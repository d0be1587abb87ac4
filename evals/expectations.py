"""What a case expects of the agent under test, and how a replay is scored against it.

Two kinds (``Case.expected``):

- ``{"kind": "calls", "calls": [...], "source": "recorded" | "operator"}``: the agent must
  make exactly these tool calls, in this order, and no other. Each is
  ``{"tool": name, "args": {...}}`` (the arguments must be equal, as JSON) or
  ``{"tool": name, "condition": text}`` (the arguments must satisfy a condition of the risk
  rules' language, ``agentops.conditions``: ``reservation_id == "ZFA04Y" and
  len(passengers) == 2``). ``recorded``: the calls the run (or conversation) made from the
  chosen step to the end of that agent turn, its recorded outcome; ``operator``: written by
  an operator.
- ``{"kind": "must_not", "tool": name, "args": {...}, "reason": text}``: a call a reviewer
  rejected (``reason``: their comment). The agent passes unless it makes that call again (the
  same tool with equal arguments).

Either kind may add ``"final_contains": text``: the agent's final answer must contain it
(case-insensitive), the outcome it ends its turn with. A replay that raised (``error``) fails
whatever was expected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentops.conditions import ConditionError, check_condition, evaluate
from agentops.errors import InvalidInput

CALLS = "calls"
MUST_NOT = "must_not"
# How much of a value a failure's reason shows (characters).
SHOWN = 160


def _shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


def _tool(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 128:
        raise InvalidInput(f"{where}: tool must be a name of 1 to 128 characters", field=where)
    return value


def _args(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(f"{where}: args must be a JSON object", field=where)
    return value


def expected_call(value: Any, where: str = "calls") -> dict[str, Any]:
    """One expected call checked: ``{"tool", "args"}`` or ``{"tool", "condition"}``.

    Raises:
        InvalidInput: not an object, no tool name, both or neither of ``args`` and
            ``condition``, arguments that are no object, or a condition the rule language
            refuses (the message says why).
    """
    if not isinstance(value, dict):
        raise InvalidInput(f"{where}: each call must be an object", field=where)
    tool = _tool(value.get("tool"), where)
    if ("args" in value) == ("condition" in value):
        raise InvalidInput(f"{where}: give either args or condition", field=where)
    if "args" in value:
        return {"tool": tool, "args": _args(value["args"], where)}
    condition = value["condition"]
    if not isinstance(condition, str):
        raise InvalidInput(f"{where}: condition must be text", field=where)
    try:
        check_condition(condition)
    except ConditionError as exc:
        raise InvalidInput(f"{where}: {exc}", field=where) from exc
    return {"tool": tool, "condition": condition}


def _final(value: Any) -> dict[str, str]:
    final = value.get("final_contains", "")
    if not isinstance(final, str) or len(final) > 2000:
        raise InvalidInput("expected.final_contains must be text", field="expected")
    return {"final_contains": final} if final else {}


def expected_checked(value: Any) -> dict[str, Any]:
    """``value`` as a case's ``expected`` (see the module docstring), checked and
    normalised.

    Raises:
        InvalidInput: not one of the two kinds, or a part of it is malformed.
    """
    if not isinstance(value, dict):
        raise InvalidInput("expected must be an object", field="expected")
    kind = value.get("kind")
    if kind == CALLS:
        calls = value.get("calls")
        if not isinstance(calls, list):
            raise InvalidInput("expected.calls must be a list", field="expected")
        source = value.get("source", "operator")
        if source not in ("recorded", "operator"):
            raise InvalidInput("expected.source is recorded or operator", field="expected")
        checked = [expected_call(call, f"expected.calls[{i}]") for i, call in enumerate(calls)]
        return {"kind": CALLS, "calls": checked, "source": source, **_final(value)}
    if kind == MUST_NOT:
        reason = value.get("reason", "")
        if not isinstance(reason, str):
            raise InvalidInput("expected.reason must be text", field="expected")
        return {
            "kind": MUST_NOT,
            "tool": _tool(value.get("tool"), "expected.tool"),
            "args": _args(value.get("args"), "expected.args"),
            "reason": reason,
            **_final(value),
        }
    raise InvalidInput(f"expected.kind is {CALLS!r} or {MUST_NOT!r}", field="expected")


@dataclass(frozen=True)
class Score:
    """A case's score: ``passed``, and ``reason`` (why not; empty when it passed)."""

    passed: bool
    reason: str = ""


def _matches(expected: dict[str, Any], made: dict[str, Any]) -> str:
    """Why ``made`` is not the ``expected`` call (empty: it is)."""
    if made.get("tool") != expected["tool"]:
        return f"expected {expected['tool']}, made {made.get('tool')}"
    given = made.get("args")
    args: dict[str, Any] = given if isinstance(given, dict) else {}
    if "condition" in expected:
        found = evaluate(expected["condition"], args)
        if found.matched:
            return ""
        detail = found.error or found.values
        return f"{expected['tool']} arguments fail {expected['condition']!r} ({detail})"
    if args != expected["args"]:
        return (
            f"{expected['tool']} arguments differ: expected {_shown(expected['args'])}, "
            f"made {_shown(args)}"
        )
    return ""


def score(
    expected: dict[str, Any], made: list[dict[str, Any]], error: str = "", final: str = ""
) -> Score:
    """Score the tool calls an agent ``made`` in a replay (``{"tool", "args"}`` each, in
    order) and its ``final`` answer against ``expected`` (checked by ``expected_checked``);
    ``error`` is what the agent raised, if it did."""
    if error:
        return Score(False, f"the agent failed: {error}")
    wanted = expected.get("final_contains", "")
    if wanted and wanted.lower() not in final.lower():
        return Score(False, f"the final answer does not contain {wanted!r}")
    if expected["kind"] == MUST_NOT:
        for i, call in enumerate(made):
            if call.get("tool") == expected["tool"] and call.get("args") == expected["args"]:
                why = f" (rejected: {expected['reason']})" if expected["reason"] else ""
                return Score(False, f"call {i + 1} repeats the rejected {call['tool']}{why}")
        return Score(True)
    calls = expected["calls"]
    for i, (want, got) in enumerate(zip(calls, made, strict=False)):
        differs = _matches(want, got)
        if differs:
            return Score(False, f"call {i + 1}: {differs}")
    if len(made) > len(calls):
        extra = made[len(calls)]
        return Score(False, f"call {len(calls) + 1}: unexpected {extra.get('tool')}")
    if len(made) < len(calls):
        return Score(False, f"call {len(made) + 1}: expected {calls[len(made)]['tool']}, none")
    return Score(True)
