"""Reads of cases and eval runs that the API, pages and command share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from agentops.errors import InvalidInput
from evals.models import Case, EvalResult, EvalRun


def cases_at(*, case_set_id: int, version: int) -> QuerySet[Case]:
    """The cases of version ``version`` of case set ``case_set_id``, oldest first."""
    return Case.objects.filter(case_set_id=case_set_id, added_in__lte=version).filter(
        Q(removed_in__isnull=True) | Q(removed_in__gt=version)
    )


def case_payload(case: Case) -> dict[str, Any]:
    """A case as JSON: what an agent under test is replayed against
    (``agentops_client.evals``), and a line of a JSON Lines export."""
    return {
        "id": case.pk,
        "name": case.name,
        "source": case.source,
        "source_run_id": str(case.source_run_id) if case.source_run_id else None,
        "source_step_index": case.source_step_index,
        "conversation": case.conversation,
        "tool_results": case.tool_results,
        "write_tools": case.write_tools,
        "expected": case.expected,
        "metadata": case.metadata,
    }


def expected_calls(case: Case) -> list[dict[str, Any]]:
    """The calls a case expects, or (``must_not``) the one it forbids, for a diff."""
    if case.expected.get("kind") == "must_not":
        return [{"tool": case.expected["tool"], "args": case.expected["args"], "forbidden": True}]
    return list(case.expected.get("calls", []))


@dataclass(frozen=True)
class ComparedCase:
    """One case in two eval runs: its results in each (None: not replayed there) and
    ``change``: ``fixed`` (failed in the first, passed in the second), ``regressed`` (the
    reverse), ``same`` or ``only one`` (replayed in one run only)."""

    case: Case
    first: EvalResult | None
    second: EvalResult | None

    @property
    def change(self) -> str:
        if self.first is None or self.second is None:
            return "only one"
        if self.first.passed == self.second.passed:
            return "same"
        return "fixed" if self.second.passed else "regressed"


def eval_runs_compared(*, first: EvalRun, second: EvalRun) -> list[ComparedCase]:
    """The cases of two eval runs of one case set side by side, regressions first, then
    fixes, then the rest, each by case id.

    Raises:
        InvalidInput: the eval runs replayed different case sets.
    """
    if first.case_set_id != second.case_set_id:
        raise InvalidInput("the two eval runs replayed different case sets")
    results: dict[int, dict[int, EvalResult]] = {first.pk: {}, second.pk: {}}
    for result in EvalResult.objects.filter(eval_run__in=[first, second]).select_related("case"):
        results[result.eval_run_id][result.case_id] = result
    ids = sorted(set(results[first.pk]) | set(results[second.pk]))
    rows = []
    for case_id in ids:
        one, two = results[first.pk].get(case_id), results[second.pk].get(case_id)
        case = (one or two).case  # type: ignore[union-attr]
        rows.append(ComparedCase(case, one, two))
    order = {"regressed": 0, "fixed": 1, "only one": 2, "same": 3}
    return sorted(rows, key=lambda row: (order[row.change], row.case.pk))
