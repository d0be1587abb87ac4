"""Budgets: a run's limits on tokens, cost, steps and time, and what crossing one does.

A run may carry ``max_tokens`` (tokens), ``max_cost_usd`` (USD), ``step_limit`` (steps,
``max_steps`` in the API) and a ``deadline``. A limit is crossed when the run's totals exceed
it (``usage_tokens > max_tokens``, ``cost_usd > max_cost_usd``), when its next step would be
step number ``step_limit + 1``, or when the deadline has passed. What happens then is the
run's ``on_budget_exceeded``:

- ``fail``: the run fails with ``{"type": "budget_exceeded", "limit", "used", "allowed",
  "message"}`` (as soon as a report of usage crosses it, and before any further step starts);
- ``approve``: the next step waits at the approval gate (``runs.gates.StepPolicy.escalate``)
  with the crossing as its reason; a reviewer's approval grants one more allowance of every
  limit (``budget_grants``: the limits are multiplied by ``grants + 1``, the deadline pushed
  back by its original span), a rejection refuses the step as any rejection does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agentops.errors import InvalidInput
from runs.models import OnBudgetExceeded, Run

BUDGET_KEYS = {"max_tokens", "max_cost_usd", "max_steps", "deadline", "on_exceed"}
MAX_TOKENS = 10**12
MAX_COST_USD = Decimal("1000000")
MAX_STEPS = 100_000


@dataclass(frozen=True)
class Crossing:
    """A crossed limit: which (``max_tokens`` | ``max_cost_usd`` | ``max_steps`` |
    ``deadline``), what the run ``used`` and what it was ``allowed`` (JSON values)."""

    limit: str
    used: Any
    allowed: Any

    def as_json(self) -> dict[str, Any]:
        """The crossing as the error a run fails with (and an approval's reason)."""
        return {
            "type": "budget_exceeded",
            "limit": self.limit,
            "used": self.used,
            "allowed": self.allowed,
            "message": f"the run's {self.limit} budget of {self.allowed} is used up ({self.used})",
        }


def _positive_int(raw: dict[str, Any], key: str, limit: int) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise InvalidInput(f"budget.{key} must be an integer from 1 to {limit}", field="budget")
    return value


def parse_budget(raw: Any) -> dict[str, Any]:
    """Check a budget object ``{"max_tokens": int?, "max_cost_usd": number?, "max_steps":
    int?, "deadline": ISO-8601 with a time zone?, "on_exceed": "fail" | "approve"?}`` and
    return it as ``Run`` fields (``max_tokens``, ``max_cost_usd``, ``step_limit``,
    ``deadline``, ``on_budget_exceeded``; only those given).

    Raises:
        InvalidInput: unknown keys, a limit that is not positive or too large, a deadline
            that does not parse, has no time zone or has passed, an unknown ``on_exceed``.
    """
    if not isinstance(raw, dict):
        raise InvalidInput("budget must be an object", field="budget")
    unknown = set(raw) - BUDGET_KEYS
    if unknown:
        raise InvalidInput(f"budget has unknown keys: {sorted(unknown)}", field="budget")
    fields: dict[str, Any] = {}
    tokens = _positive_int(raw, "max_tokens", MAX_TOKENS)
    if tokens is not None:
        fields["max_tokens"] = tokens
    steps = _positive_int(raw, "max_steps", MAX_STEPS)
    if steps is not None:
        fields["step_limit"] = steps
    cost = raw.get("max_cost_usd")
    if cost is not None:
        if isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost):
            raise InvalidInput("budget.max_cost_usd must be a number", field="budget")
        amount = Decimal(str(cost)).quantize(Decimal("0.000001"))
        if not 0 < amount <= MAX_COST_USD:
            raise InvalidInput(
                f"budget.max_cost_usd must be more than 0 and at most {MAX_COST_USD}",
                field="budget",
            )
        fields["max_cost_usd"] = amount
    deadline = raw.get("deadline")
    if deadline is not None:
        parsed = parse_datetime(deadline) if isinstance(deadline, str) else None
        if parsed is None or parsed.tzinfo is None:
            raise InvalidInput(
                "budget.deadline must be an ISO 8601 date and time with a time zone",
                field="budget",
            )
        if parsed <= timezone.now():
            raise InvalidInput("budget.deadline has already passed", field="budget")
        fields["deadline"] = parsed
    on_exceed = raw.get("on_exceed", OnBudgetExceeded.FAIL)
    if on_exceed not in OnBudgetExceeded.values:
        raise InvalidInput(
            f"budget.on_exceed must be one of {OnBudgetExceeded.values}", field="budget"
        )
    fields["on_budget_exceeded"] = on_exceed
    return fields


def effective_deadline(run: Run) -> datetime | None:
    """The run's deadline, pushed back by its original span for each budget grant."""
    if run.deadline is None:
        return None
    return run.deadline + (run.deadline - run.created_at) * run.budget_grants


def budget_crossing(run: Run, *, next_index: int | None = None) -> Crossing | None:
    """The first limit of ``run``'s budget it has crossed, or None. ``next_index`` is the
    index of the step about to start (steps are counted only then)."""
    allowances = run.budget_grants + 1
    if run.max_tokens is not None and run.usage_tokens > run.max_tokens * allowances:
        return Crossing("max_tokens", run.usage_tokens, run.max_tokens * allowances)
    if run.max_cost_usd is not None:
        allowed = Decimal(run.max_cost_usd) * allowances
        if Decimal(run.cost_usd) > allowed:
            return Crossing("max_cost_usd", float(run.cost_usd), float(allowed))
    if next_index is not None and next_index + 1 > run.step_limit * allowances:
        return Crossing("max_steps", next_index + 1, run.step_limit * allowances)
    deadline = effective_deadline(run)
    if deadline is not None and timezone.now() >= deadline:
        return Crossing("deadline", timezone.now().isoformat(), deadline.isoformat())
    return None


def budget_json(run: Run) -> dict[str, Any]:
    """The run's budget as the API shows it: the limits as set (``max_tokens``,
    ``max_cost_usd``, ``max_steps``, ``deadline``), ``on_exceed`` and ``grants`` (approvals to
    continue so far)."""
    return {
        "max_tokens": run.max_tokens,
        "max_cost_usd": float(run.max_cost_usd) if run.max_cost_usd is not None else None,
        "max_steps": run.step_limit,
        "deadline": run.deadline.isoformat() if run.deadline else None,
        "on_exceed": run.on_budget_exceeded,
        "grants": run.budget_grants,
    }
