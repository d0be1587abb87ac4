"""Reads of the runs list: its rows as plain values, with their step counts and wall times
(``runs.list_views``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet

from agentops.statuses import StatusInfo
from runs.models import Run
from runs.selectors import step_counts
from runs.statuses import run_status_info


def run_wall_time_ms(
    *, started_at: datetime | None, finished_at: datetime | None, now: datetime
) -> int | None:
    """How long a run has run, in ms: from ``started_at`` to ``finished_at``, or to ``now``
    while it is not finished; None when it never started (queued, or cancelled before)."""
    if started_at is None:
        return None
    end = finished_at or now
    return max(0, int((end - started_at).total_seconds() * 1000))


@dataclass(frozen=True, slots=True)
class RunListRow:
    """A run as the runs list shows it: its shown status (``status_info``), the user name of
    who requested it (None: nobody, a system run), its steps in all, succeeded and answered
    with a tool error, its wall time (``wall_ms``, ms, see ``run_wall_time_ms``), the time
    spent in tool calls (``duration_ms``, ms), tokens and cost (USD), and what drives it as
    its client reported it (``agent_name``, ``agent_version``, ``prompt_name``,
    ``prompt_version``; empty: not reported)."""

    pk: uuid.UUID
    goal: str
    agent: str
    status_info: StatusInfo
    requester: str | None
    steps_total: int
    steps_done: int
    tool_errors: int
    wall_ms: int | None
    duration_ms: int
    usage_tokens: int
    cost_usd: Decimal
    created_at: datetime
    updated_at: datetime
    agent_name: str
    agent_version: str
    prompt_name: str
    prompt_version: str


LIST_FIELDS = (
    "id",
    "goal",
    "agent",
    "status",
    "gate",
    "requested_by__username",
    "duration_ms",
    "usage_tokens",
    "cost_usd",
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
    "agent_name",
    "agent_version",
    "prompt_name",
    "prompt_version",
)


def run_list_values(runs: QuerySet[Run]) -> QuerySet[Run, tuple[Any, ...]]:
    """``runs`` narrowed to the columns ``run_list_rows`` reads, as tuples: no run's JSON
    documents (a conversation can be large) and no model instance a row."""
    return runs.values_list(*LIST_FIELDS)


def run_list_rows(rows: Iterable[tuple[Any, ...]], *, now: datetime) -> list[RunListRow]:
    """``RunListRow`` of each of ``rows`` (tuples of ``run_list_values``), with their step
    counts (``step_counts``: one query); ``now`` ends the wall time of unfinished runs."""
    rows = list(rows)
    counts = step_counts(run_ids=[row[0] for row in rows])
    found = []
    for pk, goal, agent, status, gate, requester, duration, tokens, cost, *times in rows:
        created_at, updated_at, started_at, finished_at, *identity = times
        found.append(
            RunListRow(
                pk,
                goal,
                agent,
                run_status_info(status, gate),
                requester,
                *counts.get(pk, (0, 0, 0)),
                run_wall_time_ms(started_at=started_at, finished_at=finished_at, now=now),
                duration,
                tokens,
                cost,
                created_at,
                updated_at,
                *identity,
            )
        )
    return found
