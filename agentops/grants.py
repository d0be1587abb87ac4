"""Tool grants: which tools a run may call, and with which arguments.

A grant is a JSON object ``{"tools": [pattern, ...], "constraints": {pattern: condition}}``:
``tools`` lists the tool names it allows as shell-style patterns (``fnmatch``: ``get_*``,
``book_reservation``; ``["*"]`` allows every tool), and ``constraints`` (optional) maps a
pattern to a condition on the call's arguments in the rule-condition language
(``agentops.conditions``, e.g. ``"amount <= 500"``), which must hold for every call of a tool
the pattern matches.

A run, a session, an API token and a project may each carry one (None: no limit). The grant
in force for a call is the intersection of all that apply: the call must be allowed by every
one of them (``refusal``). A condition that cannot be evaluated on the arguments (a missing
key, a wrong type) does not hold: the call is refused, since its arguments are not what the
grant's author allowed.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase
from typing import Any

from agentops.conditions import ConditionError, check_condition, evaluate
from agentops.errors import InvalidInput

# The most patterns (``tools`` and ``constraints`` each) one grant may hold.
MAX_PATTERNS = 200
MAX_PATTERN_LENGTH = 128


def _patterns(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidInput(f"{field}.tools must be a list of tool-name patterns", field=field)
    if len(value) > MAX_PATTERNS:
        raise InvalidInput(f"{field}.tools holds at most {MAX_PATTERNS} patterns", field=field)
    for pattern in value:
        if not pattern.strip() or len(pattern) > MAX_PATTERN_LENGTH:
            raise InvalidInput(
                f"{field}.tools: a pattern has 1 to {MAX_PATTERN_LENGTH} characters", field=field
            )
    return list(value)


def parse_grant(value: Any, *, field: str = "grant") -> dict[str, Any] | None:
    """The grant ``value`` (a JSON value sent by a client or typed in admin) as it is stored:
    ``{"tools": [...], "constraints": {...}}``; None for None (no limit).

    Raises:
        InvalidInput: not such an object, a pattern that is empty or longer than
            ``MAX_PATTERN_LENGTH``, more than ``MAX_PATTERNS`` patterns, or a constraint that
            is not a condition the rule language accepts (``check_condition``); the message
            names ``field``.
    """
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"tools", "constraints"}:
        raise InvalidInput(
            f'{field} must be {{"tools": [...], "constraints": {{...}}}} (constraints optional)',
            field=field,
        )
    tools = _patterns(value.get("tools"), field)
    constraints = value.get("constraints", {})
    if not isinstance(constraints, dict) or len(constraints) > MAX_PATTERNS:
        raise InvalidInput(
            f"{field}.constraints must map at most {MAX_PATTERNS} patterns to conditions",
            field=field,
        )
    _patterns(list(constraints), field)
    for pattern, condition in constraints.items():
        if not isinstance(condition, str):
            raise InvalidInput(f"{field}.constraints[{pattern!r}] must be a string", field=field)
        try:
            check_condition(condition)
        except ConditionError as exc:
            raise InvalidInput(f"{field}.constraints[{pattern!r}]: {exc}", field=field) from None
    return {"tools": tools, "constraints": dict(constraints)}


def _one_refusal(grant: dict[str, Any], tool: str, args: dict[str, Any]) -> str:
    if not any(fnmatchcase(tool, pattern) for pattern in grant["tools"]):
        return f"{tool} is not among the granted tools"
    for pattern, condition in grant["constraints"].items():
        if not fnmatchcase(tool, pattern):
            continue
        found = evaluate(condition, args)
        if found.error:
            return f"the constraint {condition} on {pattern} cannot be checked ({found.error})"
        if not found.matched:
            shown = f" ({found.values})" if found.values else ""
            return f"the arguments break the constraint {condition} on {pattern}{shown}"
    return ""


def refusal(
    grants: Iterable[tuple[str, dict[str, Any] | None]], tool: str, args: dict[str, Any]
) -> dict[str, Any] | None:
    """Why a call of ``tool`` with ``args`` (its JSON object) is outside the intersection of
    ``grants`` (``(source, grant)`` pairs: ``source`` names where the grant comes from, e.g.
    ``"run"``, ``"token"``, ``"project"``; a None grant allows everything), as the step error
    ``{"type": "not_granted", "reason", "message", "grant": source}``; None when every grant
    allows it. The first grant that refuses it is named."""
    for source, grant in grants:
        if grant is None:
            continue
        reason = _one_refusal(grant, tool, args)
        if reason:
            return {
                "type": "not_granted",
                "reason": reason,
                "message": f"the {source}'s grant does not allow this call: {reason}",
                "grant": source,
            }
    return None


def allows_tool(grants: Iterable[dict[str, Any] | None], tool: str) -> bool:
    """Whether every one of ``grants`` lists ``tool`` among its tools (constraints, which
    depend on the arguments, are checked per call): what a client may be shown."""
    return all(
        grant is None or any(fnmatchcase(tool, pattern) for pattern in grant["tools"])
        for grant in grants
    )
