"""Reads of the control room: the overview's time series (aggregated in PostgreSQL), the task
history, and the fleet's totals for the Prometheus metrics.

The overview's buckets are ``date_bin`` bins of a fixed width, aligned to
``BUCKET_ORIGIN``; percentiles are PostgreSQL's ``percentile_cont`` (continuous, interpolated).
Other databases get ``OverviewUnavailable``: the overview needs PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import (
    Aggregate,
    Count,
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    Q,
    QuerySet,
    Sum,
    Value,
)

from approvals.models import ApprovalRequest, ApprovalStatus
from fleet.models import TaskRecord
from runs.models import AgentKind, Run, Step
from runs.statuses import RunStatus, StepStatus

BUCKET_ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Window:
    """A selectable span of the overview: ``span`` back from now, in buckets of ``bucket``."""

    name: str
    label: str
    span: timedelta
    bucket: timedelta

    @property
    def buckets(self) -> int:
        return int(self.span / self.bucket)


WINDOWS = {
    window.name: window
    for window in (
        Window("1h", "Last hour", timedelta(hours=1), timedelta(minutes=1)),
        Window("24h", "Last 24 hours", timedelta(hours=24), timedelta(minutes=15)),
        Window("7d", "Last 7 days", timedelta(days=7), timedelta(hours=2)),
    )
}


class OverviewUnavailable(Exception):
    """The database is not PostgreSQL: the overview's aggregates need it."""


class DateBin(Func):
    """PostgreSQL's ``date_bin(stride, source, origin)``: the start of the bin of width
    ``stride`` (a timedelta) holding ``source``, bins aligned to ``BUCKET_ORIGIN``."""

    function = "date_bin"
    output_field = DateTimeField()

    def __init__(self, stride: timedelta, source: str) -> None:
        super().__init__(
            Value(stride, output_field=DurationField()),
            F(source),
            Value(BUCKET_ORIGIN, output_field=DateTimeField()),
        )


class Seconds(Func):
    """The number of seconds of an interval: ``EXTRACT(EPOCH FROM interval)``."""

    template = "EXTRACT(EPOCH FROM %(expressions)s)"
    output_field = FloatField()


class PercentileCont(Aggregate):
    """PostgreSQL's ``percentile_cont(fraction) WITHIN GROUP (ORDER BY expression)``:
    the ``fraction`` (0 to 1) percentile, interpolated between the two nearest values."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: Any, fraction: float, **extra: Any) -> None:
        if not 0 <= fraction <= 1:
            raise ValueError("fraction must be from 0 to 1")
        super().__init__(expression, fraction=float(fraction), **extra)


def bucket_start(moment: datetime, width: timedelta) -> datetime:
    """The start of the bucket of ``width`` holding ``moment``, as ``DateBin`` computes it."""
    return BUCKET_ORIGIN + ((moment - BUCKET_ORIGIN) // width) * width


def _scoped(queryset: QuerySet[Any], field_name: str, project_ids: list[int] | None) -> Any:
    if project_ids is None:
        return queryset
    return queryset.filter(**{f"{field_name}__in": project_ids})


def approval_wait_seconds() -> Seconds:
    """An approval's wait from request to decision, in seconds (an expression)."""
    return Seconds(ExpressionWrapper(F("decided_at") - F("created_at"), DurationField()))


def _decided(project_ids: list[int] | None, start: datetime, versions: Q) -> Any:
    approvals = ApprovalRequest.objects.filter(
        versions,
        status__in=[ApprovalStatus.APPROVED, ApprovalStatus.REJECTED],
        decided_at__gte=start,
    )
    return _scoped(approvals, "run__project_id", project_ids)


# The overview's filters by what drives a run (``Run`` fields of the same names, exact).
VERSION_FILTERS = ("agent_name", "agent_version", "prompt_name", "prompt_version")


# Runs that finished without doing what they were asked: failed, or failed (or cancelled) and
# then compensated, cleanly or not (``runs.control.compensation``).
FAILED_STATUSES = (RunStatus.FAILED, RunStatus.COMPENSATED, RunStatus.COMPENSATION_FAILED)
FINISHED_STATUSES = (RunStatus.SUCCEEDED, *FAILED_STATUSES)


def _outcome_counts() -> dict[str, Count]:
    """The annotations counting runs by how they finished: ``succeeded``, ``failed`` (any of
    ``FAILED_STATUSES``), and of those ``compensated`` and ``compensation_failed``."""
    return {
        "succeeded": Count("id", filter=Q(status=RunStatus.SUCCEEDED)),
        "failed": Count("id", filter=Q(status__in=FAILED_STATUSES)),
        "compensated": Count("id", filter=Q(status=RunStatus.COMPENSATED)),
        "compensation_failed": Count("id", filter=Q(status=RunStatus.COMPENSATION_FAILED)),
    }


def _versions_q(versions: dict[str, str], prefix: str = "") -> Q:
    """The condition that a run (reached through ``prefix``, e.g. ``run__``) has the values
    of ``versions`` (keys of ``VERSION_FILTERS``)."""
    return Q(**{f"{prefix}{name}": value for name, value in versions.items()})


def _by_version(runs: QuerySet[Run]) -> list[dict[str, Any]]:
    """``runs`` grouped by agent name and version and prompt name and version, most runs
    first: each group's ``runs``, ``succeeded``, ``failed`` (compensated runs included),
    ``compensated``, ``compensation_failed``, ``failure_rate`` (of succeeded plus failed; None
    without), ``tokens`` and ``cost_usd`` (USD)."""
    rows = (
        runs.values(*VERSION_FILTERS)
        .annotate(
            n=Count("id"),
            **_outcome_counts(),
            tokens=Sum("usage_tokens"),
            cost=Sum("cost_usd"),
        )
        .order_by("-n", *VERSION_FILTERS)
    )
    return [
        {
            **{name: row[name] for name in VERSION_FILTERS},
            "runs": row["n"],
            "succeeded": row["succeeded"],
            "failed": row["failed"],
            "compensated": row["compensated"],
            "compensation_failed": row["compensation_failed"],
            "failure_rate": (
                row["failed"] / (row["failed"] + row["succeeded"])
                if row["failed"] + row["succeeded"]
                else None
            ),
            "tokens": int(row["tokens"] or 0),
            "cost_usd": float(row["cost"] or 0),
        }
        for row in rows
    ]


def overview(
    *,
    window: Window,
    project_ids: list[int] | None,
    now: datetime,
    versions: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The overview's figures over ``window`` up to ``now``, for the runs of ``project_ids``
    (None: every project) that have the values of ``versions`` (keys of ``VERSION_FILTERS``:
    agent name and version, prompt name and version label, exact; None: every run), as
    JSON-ready data:

    - ``buckets``: the start of each bucket (ISO 8601), oldest first, the last one holding
      ``now``; ``bucket_seconds`` their width;
    - ``runs_per_minute``: runs created in each bucket, per minute of bucket width;
    - ``steps_per_minute``: steps that finished (succeeded or failed) in each bucket, per
      minute; ``tool_errors_per_minute``: those of them whose tool answered with an error
      (succeeded steps marked ``tool_error``);
    - ``failure_rate``: of the runs that finished in each bucket (``FINISHED_STATUSES``:
      succeeded, failed, compensated or compensation failed), the fraction that did not
      succeed (0 to 1; None without such runs). Cancelled runs are an operator's choice,
      neither (one compensated afterwards counts as compensated);
    - ``approval_wait_p50`` / ``_p95``: median and 95th percentile, in seconds, of how long
      the approvals decided (approved or rejected) in each bucket waited from request to
      decision (None without decisions);
    - ``cost_by_agent``: ``[{"agent", "label", "cost_usd", "runs"}]`` of the runs created in
      the window, by agent kind, costliest first;
    - ``by_version``: the runs created in the window grouped by agent name and version and
      prompt name and version (``_by_version``);
    - ``totals``: the same over the whole window (``runs``, ``steps``, ``step_tool_errors``,
      ``runs_succeeded``, ``runs_failed`` (compensated ones included), ``runs_compensated``,
      ``runs_compensation_failed``, ``failure_rate``, ``approvals_decided``, ``approval_wait_p50``,
      ``approval_wait_p95``, ``cost_usd``).

    Seven queries, whatever the number of rows.

    Raises:
        OverviewUnavailable: the database is not PostgreSQL.
    """
    if connection.vendor != "postgresql":
        raise OverviewUnavailable("the overview needs PostgreSQL (date_bin, percentile_cont)")
    width = window.bucket
    last = bucket_start(now, width)
    starts = [last - width * i for i in range(window.buckets - 1, -1, -1)]
    first = starts[0]
    index = {start: i for i, start in enumerate(starts)}
    minutes = width.total_seconds() / 60

    def series(rows: Any, key: str, empty: Any = 0) -> list[Any]:
        values: list[Any] = [empty] * len(starts)
        for row in rows:
            if row["bucket"] in index:
                values[index[row["bucket"]]] = row[key]
        return values

    chosen = versions or {}
    runs = _scoped(Run.objects.filter(_versions_q(chosen)), "project_id", project_ids)
    created = (
        runs.filter(created_at__gte=first)
        .annotate(bucket=DateBin(width, "created_at"))
        .values("bucket")
        .annotate(n=Count("id"))
    )
    run_counts = series(created, "n")

    finished_steps = _scoped(
        Step.objects.filter(
            _versions_q(chosen, "run__"),
            finished_at__gte=first,
            status__in=[StepStatus.SUCCEEDED, StepStatus.FAILED],
        ),
        "run__project_id",
        project_ids,
    )
    step_rows = list(
        finished_steps.annotate(bucket=DateBin(width, "finished_at"))
        .values("bucket")
        .annotate(n=Count("id"), tool_errors=Count("id", filter=Q(tool_error=True)))
    )
    step_counts = series(step_rows, "n")
    tool_error_counts = series(step_rows, "tool_errors")

    ended = (
        runs.filter(finished_at__gte=first, status__in=FINISHED_STATUSES)
        .annotate(bucket=DateBin(width, "finished_at"))
        .values("bucket")
        .annotate(ended=Count("id"), **_outcome_counts())
    )
    ended_rows = list(ended)
    ended_counts, failed_counts = series(ended_rows, "ended"), series(ended_rows, "failed")

    decided = _decided(project_ids, first, _versions_q(chosen, "run__"))
    wait_rows = list(
        decided.annotate(bucket=DateBin(width, "decided_at"))
        .values("bucket")
        .annotate(
            p50=PercentileCont(approval_wait_seconds(), 0.5),
            p95=PercentileCont(approval_wait_seconds(), 0.95),
        )
    )
    wait_totals = decided.aggregate(
        n=Count("id"),
        p50=PercentileCont(approval_wait_seconds(), 0.5),
        p95=PercentileCont(approval_wait_seconds(), 0.95),
    )

    labels = dict(AgentKind.choices)
    costs = (
        runs.filter(created_at__gte=first)
        .values("agent")
        .annotate(cost=Sum("cost_usd"), n=Count("id"))
        .order_by("-cost", "agent")
    )
    cost_by_agent = [
        {
            "agent": row["agent"],
            "label": labels.get(row["agent"], row["agent"]),
            "cost_usd": float(row["cost"] or 0),
            "runs": row["n"],
        }
        for row in costs
    ]

    ended_total, failed_total = sum(ended_counts), sum(failed_counts)
    return {
        "window": window.name,
        "bucket_seconds": int(width.total_seconds()),
        "now": now.isoformat(),
        "buckets": [start.isoformat() for start in starts],
        "runs_per_minute": [n / minutes for n in run_counts],
        "steps_per_minute": [n / minutes for n in step_counts],
        "tool_errors_per_minute": [n / minutes for n in tool_error_counts],
        "failure_rate": [
            failed / total if total else None
            for failed, total in zip(failed_counts, ended_counts, strict=True)
        ],
        "approval_wait_p50": series(wait_rows, "p50", None),
        "approval_wait_p95": series(wait_rows, "p95", None),
        "cost_by_agent": cost_by_agent,
        "by_version": _by_version(runs.filter(created_at__gte=first)),
        "totals": {
            "runs": sum(run_counts),
            "steps": sum(step_counts),
            "step_tool_errors": sum(tool_error_counts),
            "runs_succeeded": ended_total - failed_total,
            "runs_failed": failed_total,
            "runs_compensated": sum(series(ended_rows, "compensated")),
            "runs_compensation_failed": sum(series(ended_rows, "compensation_failed")),
            "failure_rate": failed_total / ended_total if ended_total else None,
            "approvals_decided": wait_totals["n"],
            "approval_wait_p50": wait_totals["p50"],
            "approval_wait_p95": wait_totals["p95"],
            "cost_usd": sum(row["cost_usd"] for row in cost_by_agent),
        },
    }


def task_history(*, project_ids: list[int] | None, state: str = "", limit: int = 100) -> Any:
    """The newest ``limit`` task history rows of tasks that concerned runs of ``project_ids``
    (None: every row, work of no run included), of ``state`` when given."""
    rows = TaskRecord.objects.all()
    if project_ids is not None:
        rows = rows.filter(project_id__in=project_ids)
    if state:
        rows = rows.filter(state=state)
    return list(rows.order_by("-finished_at", "-id")[:limit])
