"""Validators: checks of what a tool returned, run when an attempt's outcome is recorded
(``runs.executor.record``), before the step succeeds.

A tool declares them when it registers (``register(..., validators=[...])``), and a risk rule
may declare more for the calls it matches (``RiskRule.validators``, JSON read by
``validators_from_json``; ``runs.gates.StepPolicy.validators``); each is one of

- a JSON Schema (draft 2020-12, checked by ``runs.tools.schemas``: jsonschema + referencing)
  the result must match;
- a registered Python check: the dotted path of a callable ``check(result) -> str | None``
  returning what is wrong (None: the result passes);
- a condition in the risk rules' language (``agentops.conditions``) that must hold, whose
  names are the result's keys (when it is an object) and ``result`` itself.

On failure a validator either fails the attempt (``on_failure`` = fail) with ``{"type":
"validation_failed", "rule", "path", "message"}``, retried with backoff while attempts remain
when it declares ``retry`` (the tool is called again: a retry is what the declaration asks
for), or holds the step, result kept, at a gate for a reviewer (``on_failure`` = gate). The
ledger records the result either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils.module_loading import import_string

from agentops.conditions import check_condition, holds
from runs.tools.schemas import schema_invalid, schema_problem

FAIL, GATE = "fail", "gate"
# The keys of a validator declared as JSON (``validators_from_json``).
JSON_KEYS = frozenset({"rule", "schema", "check", "condition", "on_failure", "retry"})


@dataclass(frozen=True)
class Validator:
    """One check of a tool's result, named ``rule`` (what a failure and a reviewer show):
    exactly one of ``schema`` (JSON Schema), ``check`` (dotted path) and ``condition``.
    ``on_failure`` is ``fail`` or ``gate``; ``retry`` (with ``fail`` only) calls the tool
    again, after backoff, while the step's attempts remain.

    Raises:
        ValueError: not exactly one kind, an unusable schema, an unknown ``on_failure``, or
            ``retry`` with ``gate``.
    """

    rule: str
    schema: dict[str, Any] | None = None
    check: str = ""
    condition: str = ""
    on_failure: str = FAIL
    retry: bool = False

    def __post_init__(self) -> None:
        if sum(map(bool, (self.schema is not None, self.check, self.condition))) != 1:
            raise ValueError(f"validator {self.rule!r}: give one of schema, check, condition")
        if self.schema is not None and (problem := schema_invalid(self.schema)):
            raise ValueError(f"validator {self.rule!r}: schema {problem}")
        if self.on_failure not in (FAIL, GATE) or (self.retry and self.on_failure == GATE):
            raise ValueError(f"validator {self.rule!r}: on_failure fail (retry or not) or gate")


@dataclass(frozen=True)
class ValidationFailure:
    """A result that failed ``validator``: where (``path``: a JSON path, ``(root)`` for the
    whole result) and what is wrong (``message``)."""

    validator: Validator
    path: str
    message: str

    def as_error(self) -> dict[str, Any]:
        """The failure as a step's structured error fields."""
        return {
            "type": "validation_failed",
            "rule": self.validator.rule,
            "path": self.path,
            "message": f"the result failed {self.validator.rule}: {self.message}",
        }


def _problem(validator: Validator, result: Any) -> tuple[str, str] | None:
    if validator.schema is not None:
        problem = schema_problem(validator.schema, result)
        if problem is None:
            return None
        path, _, message = problem.partition(": ")
        return path, message
    if validator.check:
        try:
            found = import_string(validator.check)(result)
        except Exception as exc:  # a broken check fails the result, never the recording
            return "(root)", f"the check {validator.check} raised {type(exc).__name__}: {exc}"
        return None if found is None else ("(root)", str(found))
    names = {**(result if isinstance(result, dict) else {}), "result": result}
    held, why = holds(validator.condition, names)
    if held:
        return None
    return "(root)", why or f"{validator.condition} does not hold"


def validation_failure(validators: tuple[Validator, ...], result: Any) -> ValidationFailure | None:
    """The first of ``validators`` that ``result`` (verbatim JSON) fails, or None."""
    for validator in validators:
        found = _problem(validator, result)
        if found is not None:
            return ValidationFailure(validator, *found)
    return None


def _check_usable(path: str) -> None:
    """Raises ValueError when ``path`` is not the dotted path of a callable."""
    try:
        found = import_string(path)
    except ImportError as exc:
        raise ValueError(f"check {path!r} cannot be imported: {exc}") from None
    if not callable(found):
        raise ValueError(f"check {path!r} is not callable")


def validators_from_json(value: Any, *, default_rule: str) -> tuple[Validator, ...]:
    """The validators ``value`` declares: a JSON array of objects with exactly one of
    ``schema`` (a JSON Schema object), ``check`` (the dotted path of an importable callable)
    and ``condition`` (``agentops.conditions``), and optionally ``rule`` (its name;
    ``default_rule`` when absent), ``on_failure`` (``fail``, the default, or ``gate``) and
    ``retry`` (a boolean, with ``fail`` only). Unlike a tool's own declaration, the check's
    path and the condition are checked here: the JSON comes from a person's edit.

    Raises:
        ValueError: ``value`` is not such an array; the message names the item and why.
    """
    if not isinstance(value, list):
        raise ValueError("validators must be a list of objects")
    found = []
    for i, item in enumerate(value):
        where = f"validators[{i}]"
        if not isinstance(item, dict) or not set(item) <= JSON_KEYS:
            raise ValueError(f"{where}: an object with keys among {', '.join(sorted(JSON_KEYS))}")
        rule, on_failure = item.get("rule", default_rule), item.get("on_failure", FAIL)
        retry, check = item.get("retry", False), item.get("check", "")
        condition, schema = item.get("condition", ""), item.get("schema")
        if not all(isinstance(text, str) for text in (rule, on_failure, check, condition)):
            raise ValueError(f"{where}: rule, on_failure, check and condition are strings")
        if not rule.strip():
            raise ValueError(f"{where}: rule (its name) may not be blank")
        if not isinstance(retry, bool) or not (schema is None or isinstance(schema, dict)):
            raise ValueError(f"{where}: retry is a boolean and schema an object")
        try:
            if check:
                _check_usable(check)
            if condition:
                check_condition(condition)
            found.append(Validator(rule, schema, check, condition, on_failure, retry))
        except ValueError as exc:  # a ConditionError is one
            raise ValueError(f"{where}: {exc}") from None
    return tuple(found)
