"""The Prometheus metrics of the fleet (``/metrics``), read from the database and the broker
when Prometheus scrapes, by a custom collector (prometheus_client's ``Collector``).

Metrics (all gauges unless said):

- ``agentops_runs{status}``: runs by status as shown (``awaiting_approval`` for a run waiting
  for a reviewer), every status present, 0 included;
- ``agentops_steps{status}``: steps by status as shown, with the succeeded steps whose tool
  answered with an error (``Step.tool_error``) as ``tool_error`` rather than ``succeeded``;
- ``agentops_approvals_pending``: approval requests waiting for a decision;
- ``agentops_approval_wait_seconds`` (histogram): for the approvals decided (approved or
  rejected) and still kept, the time from request to decision, in seconds;
- ``agentops_queue_messages{queue}`` and ``agentops_queue_oldest_message_age_seconds{queue}``:
  messages waiting in each Celery queue, and the age of the oldest (NaN when unknown);
- ``agentops_task_failures{task}``: failed task executions in the task history (kept for
  ``AGENTOPS_TASK_HISTORY_DAYS``), by task name;
- ``agentops_broker_up``: 1 when the broker answered, 0 when it could not be reached.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator

import redis
from django.db.models import Count, Q, Sum
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from approvals.models import ApprovalRequest, ApprovalStatus
from fleet.broker import queue_states
from fleet.models import TaskRecord, TaskState
from fleet.selectors import approval_wait_seconds
from runs.models import Run, Step
from runs.statuses import (
    StepStatus,
    run_status_choices,
    run_status_info,
    step_status_choices,
    step_status_info,
)

logger = logging.getLogger(__name__)

# The status label of the succeeded steps whose tool answered with an error.
TOOL_ERROR = "tool_error"
# Upper bounds (seconds) of the approval wait histogram's buckets: from a quick look to a day.
APPROVAL_WAIT_BUCKETS = (10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600)


class FleetCollector(Collector):
    """Collects the metrics above at scrape time: five database queries and one Redis round
    trip."""

    def collect(self) -> Iterator[Metric]:
        runs = GaugeMetricFamily("agentops_runs", "Runs by status.", labels=["status"])
        counts = {value: 0 for value, _ in run_status_choices()}
        for row in Run.objects.values("status", "gate").annotate(n=Count("id")).order_by():
            shown = run_status_info(row["status"], row["gate"]).value
            counts[shown] = counts.get(shown, 0) + row["n"]
        for status, n in counts.items():
            runs.add_metric([status], n)
        yield runs

        steps = GaugeMetricFamily("agentops_steps", "Steps by status.", labels=["status"])
        step_counts = {value: 0 for value, _ in step_status_choices()}
        step_counts[TOOL_ERROR] = 0
        by_status = Step.objects.values("status", "gate", "tool_error").annotate(n=Count("id"))
        for row in by_status.order_by():
            shown = step_status_info(row["status"], row["gate"]).value
            if row["tool_error"] and row["status"] == StepStatus.SUCCEEDED:
                shown = TOOL_ERROR
            step_counts[shown] = step_counts.get(shown, 0) + row["n"]
        for status, n in step_counts.items():
            steps.add_metric([status], n)
        yield steps

        pending = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING).count()
        yield GaugeMetricFamily(
            "agentops_approvals_pending", "Approval requests waiting for a decision.", pending
        )

        decided = ApprovalRequest.objects.filter(
            status__in=[ApprovalStatus.APPROVED, ApprovalStatus.REJECTED]
        ).annotate(wait=approval_wait_seconds())
        figures = decided.aggregate(
            total=Count("id"),
            seconds=Sum("wait"),
            **{
                f"le{bound}": Count("id", filter=Q(wait__lte=bound))
                for bound in APPROVAL_WAIT_BUCKETS
            },
        )
        buckets = [(str(float(b)), figures[f"le{b}"]) for b in APPROVAL_WAIT_BUCKETS]
        buckets.append(("+Inf", figures["total"]))
        yield HistogramMetricFamily(
            "agentops_approval_wait_seconds",
            "Time from approval request to decision, of decided approvals, in seconds.",
            buckets=buckets,
            sum_value=float(figures["seconds"] or 0),
        )

        depth = GaugeMetricFamily(
            "agentops_queue_messages", "Messages waiting in a Celery queue.", labels=["queue"]
        )
        age = GaugeMetricFamily(
            "agentops_queue_oldest_message_age_seconds",
            "Age of the oldest message waiting in a Celery queue, in seconds (NaN: unknown).",
            labels=["queue"],
        )
        try:
            states = queue_states()
        except redis.RedisError:
            logger.warning("metrics: the broker could not be reached", exc_info=True)
            states = None
        for state in states or []:
            depth.add_metric([state.name], state.messages)
            oldest = state.oldest_age_seconds
            age.add_metric([state.name], math.nan if oldest is None else oldest)
        yield depth
        yield age
        yield GaugeMetricFamily(
            "agentops_broker_up", "1 when the Celery broker answered.", 0 if states is None else 1
        )

        failures = GaugeMetricFamily(
            "agentops_task_failures",
            "Failed task executions in the task history, by task name.",
            labels=["task"],
        )
        rows = (
            TaskRecord.objects.filter(state=TaskState.FAILURE)
            .values("name")
            .annotate(n=Count("id"))
            .order_by("name")
        )
        for row in rows:
            failures.add_metric([row["name"]], row["n"])
        yield failures


def fleet_registry() -> CollectorRegistry:
    """A registry holding only ``FleetCollector`` (not the process metrics of the default
    registry: a web process's own figures say little about the fleet)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector())
    return registry
