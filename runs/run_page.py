"""What a run's page reads for runs of any length (issue 30, item 6): every step's header row,
the whole of the steps it shows open, and a compact timeline of model turns and tool calls.

A run of at most ``STEPS_OPEN`` steps shows every step whole. A longer one shows each step as a
folded header row (index, tool, status, duration, tokens) and opens only the steps a reader
must see: those not finished or failed (``_ATTENTION``) and the last one; the body
of a folded step is loaded when it is opened (``runs.views.run_step``). The page's queries
do not grow with the number of steps: one for the header rows, one for the open steps' whole
rows (with their approvals' decisions), two for their checkpoints' states.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.db.models import prefetch_related_objects

from runs import selectors
from runs.models import Checkpoint, ModelCall, Step
from runs.state_diff import change_count
from runs.statuses import StepStatus

# Runs with at most this many steps show each step whole, as a short run always did.
STEPS_OPEN = 20
# What a folded long run still shows open: steps a reader has to look at.
_ATTENTION = frozenset(
    {
        StepStatus.WAITING,
        StepStatus.READY,
        StepStatus.RUNNING,
        StepStatus.WAITING_RETRY,
        StepStatus.FAILED,
        StepStatus.REJECTED,
        StepStatus.REFUSED,
    }
)
# The header rows need none of these: a long run's arguments and results stay in the database
# until their step is opened.
BODY_FIELDS = (
    "args",
    "args_schema",
    "result",
    "recorded_result",
    "error",
    "gate_params",
    "rationale",
)
# At most this many rows in the timeline (the steps first, then model turns): its rows are a
# few elements each, and a page must stay light.
TIMELINE_ROWS = 2000


@dataclass(frozen=True)
class PageSteps:
    """A run's steps for its page: ``steps`` (every step in index order; the open ones whole,
    the others without their ``BODY_FIELDS``) and the ids of those shown open."""

    steps: list[Step]
    open_ids: frozenset[int]


def is_open(step: Step, last_index: int, count: int) -> bool:
    """Whether a run page shows ``step`` open: every step of a run of at most ``STEPS_OPEN``
    steps, else the last one (``last_index``) and those needing attention (a tool error
    is an answer the agent got: its step stays folded, marked, and found by the filter)."""
    return count <= STEPS_OPEN or step.index == last_index or step.status in _ATTENTION


def page_steps(*, run_id: uuid.UUID) -> PageSteps:
    """The steps of run ``run_id`` for its page (``PageSteps``); the open ones with their
    approval request's decisions prefetched."""
    rows = selectors.run_page_steps(run_id=run_id, defer=BODY_FIELDS)
    if not rows:
        return PageSteps([], frozenset())
    last = rows[-1].index
    open_ids = frozenset(step.pk for step in rows if is_open(step, last, len(rows)))
    whole = {step.pk: step for step in selectors.run_page_steps(run_id=run_id, ids=open_ids)}
    steps = [whole.get(step.pk, step) for step in rows]
    prefetch_related_objects([step for step in steps if step.pk in open_ids], "approval__decisions")
    return PageSteps(steps, open_ids)


def state_change_counts(*, run_id: uuid.UUID, indexes: set[int]) -> dict[int, int]:
    """How many changes each step at ``indexes`` made to the run's state, by step id (steps
    without a checkpoint are absent), counted against the latest earlier checkpoint (or
    ``{}``): the checkpoints' states read are those of these steps and of the ones before
    them, not the run's every state."""
    if not indexes:
        return {}
    marks = list(
        Checkpoint.objects.filter(run_id=run_id).order_by("index").values_list("index", "step_id")
    )
    wanted: dict[int, int | None] = {}
    previous: int | None = None
    for index, _ in marks:
        if index in indexes:
            wanted[index] = previous
        previous = index
    needed = set(wanted) | {index for index in wanted.values() if index is not None}
    states = dict(
        Checkpoint.objects.filter(run_id=run_id, index__in=needed).values_list("index", "state")
    )
    step_of = dict(marks)
    return {
        step_of[index]: change_count({} if before is None else states[before], states[index])
        for index, before in wanted.items()
    }


@dataclass(frozen=True)
class TimelineRow:
    """One bar of a run's timeline: ``kind`` ("tool" or "model"), its label, the step index
    it links to (None for a model turn), where the bar starts and how wide it is as
    percentages of the run's span (``gate``: the part spent waiting at a gate before it),
    its duration (ms), tokens, status (a step's: its value, or ``tool_error``; ``model``),
    tone (the status's colour: ``agentops.statuses``), retries (attempts past the first) and,
    for a compensating step, the index of the step it undoes."""

    kind: str
    label: str
    index: int | None
    start: float
    width: float
    gate: float
    duration_ms: int | None
    tokens: int
    status: str
    tone: str
    retries: int
    undoes: int | None = None


@dataclass(frozen=True)
class Timeline:
    """A run's timeline: ``rows`` in time order, its span (ms) and the axis ticks (the
    offsets from the run's start, ms, at 0, 25, 50, 75 and 100 % of the span)."""

    rows: list[TimelineRow]
    span_ms: int
    ticks: list[int]
    rows_total: int


def timeline_total(*, run_id: uuid.UUID, steps: int) -> int:
    """How many bars the timeline of a run of ``steps`` steps has: its tool calls and its
    model turns (one count)."""
    return steps + ModelCall.objects.filter(run_id=run_id).count()


def _tokens(usage: Any) -> int:
    """A step's tokens from its usage (what a client reported: any JSON), 0 when unusable."""
    if not isinstance(usage, dict):
        return 0
    total = 0
    for key in ("input_tokens", "output_tokens"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            total += value
    return total


@dataclass(frozen=True)
class Compensations:
    """Which of a run's steps undo which (``runs.control.compensation``): ``undoes`` maps a
    compensating step's index to the index of the step it undoes, ``undone_by`` a
    compensated step's index to its compensating step."""

    undoes: dict[int, int]
    undone_by: dict[int, Step]


def compensations(steps: list[Step]) -> Compensations:
    """The compensations among ``steps`` (a run's, each with ``compensates_id``); no query."""
    index_of = {step.pk: step.index for step in steps}
    undoes, undone_by = {}, {}
    for step in steps:
        if step.compensates_id in index_of:
            original = index_of[step.compensates_id]
            undoes[step.index] = original
            undone_by[original] = step
    return Compensations(undoes, undone_by)


def timeline(*, steps: list[Step], run_id: uuid.UUID, now: datetime) -> Timeline:
    """The timeline of a run's ``steps`` and its model turns (``ModelCall``: one ended at
    ``created_at`` after ``latency_ms``) on one time axis, as LangSmith's trace view and
    Temporal's event timeline draw them: a bar a tool call from its start to its end (``now``
    while it runs), the time it waited at a gate before it (from its creation), a bar a model
    turn. One query (the model turns); at most ``TIMELINE_ROWS`` rows."""
    spans: list[tuple[datetime, datetime, datetime, TimelineRow]] = []
    undoes = compensations(steps).undoes
    for step in steps:
        start = step.started_at or step.created_at
        end = step.finished_at or (now if step.status == StepStatus.RUNNING else start)
        row = TimelineRow(
            "tool",
            step.tool,
            step.index,
            0,
            0,
            0,
            step.duration_ms,
            _tokens(step.usage),
            "tool_error" if step.tool_error else str(step.status),
            "attention" if step.tool_error else step.status_info.tone,
            max(0, step.attempts - 1),
            undoes.get(step.index),
        )
        spans.append((step.created_at, start, end, row))
    calls = ModelCall.objects.filter(run_id=run_id).order_by("id")
    fields = ("model", "input_tokens", "output_tokens", "latency_ms", "created_at")
    for model, input_tokens, output_tokens, latency_ms, ended in calls.values_list(*fields)[
        :TIMELINE_ROWS
    ]:
        began = ended - timedelta(milliseconds=latency_ms)
        row = TimelineRow(
            "model",
            model,
            None,
            0,
            0,
            0,
            latency_ms,
            input_tokens + output_tokens,
            "model",
            "active",
            0,
        )
        spans.append((began, began, ended, row))
    if not spans:
        return Timeline([], 0, [0] * 5, 0)
    spans.sort(key=lambda span: span[1])
    origin = min(span[0] for span in spans)
    span_ms = max(1, _elapsed(origin, max(span[2] for span in spans)))
    rows = []
    for created, start, end, row in spans[:TIMELINE_ROWS]:
        offset = 100 * _elapsed(origin, start) / span_ms
        gate = 100 * _elapsed(created, start) / span_ms
        width = max(0.3, 100 * _elapsed(start, end) / span_ms)
        rows.append(
            replace(row, start=round(offset, 3), width=round(width, 3), gate=round(gate, 3))
        )
    ticks = [span_ms * quarter // 4 for quarter in range(5)]
    return Timeline(rows, span_ms, ticks, len(spans))


def _elapsed(start: datetime, end: datetime) -> int:
    return max(0, int((end - start).total_seconds() * 1000))
