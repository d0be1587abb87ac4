"""Validators: checks of what a tool returned, run when an attempt's outcome is recorded
(``runs.executor.record``), before the step succeeds.

A tool declares them when it registers (``register(..., validators=[...])``); each is one of

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

from agentops.conditions import holds
from runs.tools.schemas import schema_invalid, schema_problem

FAIL, GATE = "fail", "gate"


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
