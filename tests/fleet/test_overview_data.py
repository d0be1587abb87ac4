"""The overview's figures (fleet.selectors.overview, GET /overview/data/): runs and steps per
minute, failure rate, approval wait p50/p95 and cost per agent, against runs whose timings the
test sets, and only for the projects the user may see."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse

import tests.tools  # noqa: F401  (registers test_refusing)
from agentops.actors import Actor
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from fleet.selectors import WINDOWS, overview
from projects.models import Project
from projects.services import project_default
from runs.control.compensation import run_compensate
from runs.control.create import run_create
from runs.models import Run, RunStatus, Step
from testsupport.factories import make_user, plan_run, run_awaiting_approval

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC)
CALCULATE = {"tool": "calculate", "args": {"expression": "1+1"}}
FLAKY = {"tool": "flaky", "args": {"failures": 10}}
REFUSED = {"tool": "test_refusing", "args": {"refuse": True}}


def at(hour, minute, second=0):
    return datetime(2026, 3, 1, hour, minute, second, tzinfo=UTC)


def place(run, *, created, finished=None, step_finished=(), cost=None):
    """Move ``run``'s timestamps (and its steps', in index order) to the test's clock."""
    fields = {"created_at": created, "finished_at": finished}
    if cost is not None:
        fields["cost_usd"] = Decimal(cost)
    Run.objects.filter(pk=run.pk).update(**fields)
    for index, moment in enumerate(step_finished):
        Step.objects.filter(run=run, index=index).update(finished_at=moment)


def decided_approval(operator, reviewer, capture, *, requested, decided, project=None):
    run = run_awaiting_approval(operator, capture=capture, project=project)
    approval = ApprovalRequest.objects.get(run=run)
    approval_decide(approval_id=approval.pk, actor=Actor.for_user(reviewer), decision="approve")
    Run.objects.filter(pk=run.pk).update(created_at=at(9, 0))
    ApprovalRequest.objects.filter(pk=approval.pk).update(created_at=requested, decided_at=decided)


@pytest.fixture
def timeline(operator, reviewer, django_capture_on_commit_callbacks):
    """Runs and approvals at known times in the hour before NOW (default project), and one
    costly run of another project."""
    capture = django_capture_on_commit_callbacks
    # Its second step's tool answers with an error: the run goes on and succeeds.
    succeeded = plan_run(operator, [CALCULATE, REFUSED], capture=capture)
    assert succeeded.status == RunStatus.SUCCEEDED
    place(
        succeeded,
        created=at(11, 50, 10),
        finished=at(11, 50, 40),
        step_finished=[at(11, 50, 20), at(11, 50, 40)],
        cost="0.5",
    )
    failed = plan_run(operator, [FLAKY], capture=capture)
    assert failed.status == RunStatus.FAILED
    place(failed, created=at(11, 50, 50), finished=at(11, 51, 5), step_finished=[at(11, 51, 5)])
    client = run_create(actor=Actor.for_user(operator), agent="client", goal="client run")
    place(client, created=at(11, 59), cost="0.25")
    # Approval waits: 120 s decided in the 11:32 bucket, 30 s and 40 s in the 11:40 one.
    decided_approval(operator, reviewer, capture, requested=at(11, 30), decided=at(11, 32))
    decided_approval(operator, reviewer, capture, requested=at(11, 40), decided=at(11, 40, 30))
    decided_approval(operator, reviewer, capture, requested=at(11, 39, 40), decided=at(11, 40, 20))
    # Outside the window: not counted.
    old = plan_run(operator, [CALCULATE], capture=capture)
    place(old, created=at(10, 0), finished=at(10, 0, 5), step_finished=[at(10, 0, 5)], cost="7")
    beta = Project.objects.create(slug="beta", name="Beta")
    beth = make_user("beth", "operator", project=beta)
    other = plan_run(beth, [CALCULATE], capture=capture, project=beta)
    place(
        other, created=at(11, 55), finished=at(11, 55, 1), step_finished=[at(11, 55, 1)], cost="9"
    )
    return beta


def bucket(hour, minute):
    """The index of the 1-minute bucket starting at hour:minute in the last hour's 60."""
    return int((at(hour, minute) - at(11, 1)) / timedelta(minutes=1))


def test_the_last_hour_per_minute_for_the_users_projects(timeline):
    data = overview(window=WINDOWS["1h"], project_ids=[project_default().pk], now=NOW)
    assert data["bucket_seconds"] == 60
    assert len(data["buckets"]) == 60
    assert data["buckets"][0] == "2026-03-01T11:01:00+00:00"
    assert data["buckets"][-1] == "2026-03-01T12:00:00+00:00"

    expected_runs = [0.0] * 60
    expected_runs[bucket(11, 50)] = 2.0
    expected_runs[bucket(11, 59)] = 1.0
    assert data["runs_per_minute"] == expected_runs

    expected_steps = [0.0] * 60
    expected_steps[bucket(11, 50)] = 2.0
    expected_steps[bucket(11, 51)] = 1.0
    assert data["steps_per_minute"] == expected_steps
    expected_tool_errors = [0.0] * 60
    expected_tool_errors[bucket(11, 50)] = 1.0
    assert data["tool_errors_per_minute"] == expected_tool_errors

    expected_failure = [None] * 60
    expected_failure[bucket(11, 50)] = 0.0
    expected_failure[bucket(11, 51)] = 1.0
    assert data["failure_rate"] == expected_failure

    p50, p95 = [None] * 60, [None] * 60
    p50[bucket(11, 32)], p95[bucket(11, 32)] = 120.0, 120.0
    p50[bucket(11, 40)], p95[bucket(11, 40)] = 35.0, 39.5
    assert data["approval_wait_p50"] == p50
    assert data["approval_wait_p95"] == pytest.approx(p95)

    assert data["cost_by_agent"] == [
        {"agent": "plan", "label": "Fixed plan", "cost_usd": 0.5, "runs": 2},
        {"agent": "client", "label": "Client app", "cost_usd": 0.25, "runs": 1},
    ]
    totals = data["totals"]
    assert totals == {
        "runs": 3,
        "steps": 3,
        "step_tool_errors": 1,
        "runs_succeeded": 1,
        "runs_failed": 1,
        "runs_compensated": 0,
        "runs_compensation_failed": 0,
        "failure_rate": 0.5,
        "approvals_decided": 3,
        # percentile_cont over 30, 40, 120 s: the median, and 40 + 0.9 * (120 - 40).
        "approval_wait_p50": 40.0,
        "approval_wait_p95": pytest.approx(112.0),
        "cost_usd": 0.75,
    }


def test_every_project_for_an_unconfined_view(timeline):
    data = overview(window=WINDOWS["1h"], project_ids=None, now=NOW)
    assert data["totals"]["runs"] == 4
    assert data["cost_by_agent"][0] == {
        "agent": "plan",
        "label": "Fixed plan",
        "cost_usd": 9.5,
        "runs": 3,
    }


def test_wider_windows_bin_by_quarter_hours_and_two_hours(timeline):
    day = overview(window=WINDOWS["24h"], project_ids=[project_default().pk], now=NOW)
    assert (day["bucket_seconds"], len(day["buckets"])) == (900, 96)
    # 11:45-12:00 holds 11:50 (2 runs) and 11:59 (1): 3 runs in 15 minutes.
    assert day["buckets"][-2] == "2026-03-01T11:45:00+00:00"
    assert day["runs_per_minute"][-2] == pytest.approx(3 / 15)
    # The 10:00 run and the three approval runs (created at 09:00) too.
    assert day["totals"]["runs"] == 7
    week = overview(window=WINDOWS["7d"], project_ids=[project_default().pk], now=NOW)
    assert (week["bucket_seconds"], len(week["buckets"])) == (7200, 84)
    assert week["buckets"][-1] == "2026-03-01T12:00:00+00:00"
    assert week["totals"]["cost_usd"] == 7.75


def compensated(operator, capture, steps):
    """A plan run of ``steps`` that failed, then compensated (read back)."""
    run = plan_run(operator, steps, capture=capture)
    assert run.status == RunStatus.FAILED
    with capture(execute=True):
        run_compensate(run_id=run.pk, actor=Actor.for_user(operator))
    return Run.objects.get(pk=run.pk)


def test_compensated_runs_count_as_finished_without_success(
    operator, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    crash = {"tool": "test_crash", "args": {}}
    reserve = {"tool": "test_reserve", "args": {"seat": "1A"}}
    undone = compensated(operator, capture, [reserve, crash])
    assert undone.status == RunStatus.COMPENSATED
    left = compensated(operator, capture, [reserve, {"tool": "test_hold", "args": {}}, crash])
    assert left.status == RunStatus.COMPENSATION_FAILED
    succeeded = plan_run(operator, [CALCULATE], capture=capture)
    place(undone, created=at(11, 50), finished=at(11, 50, 10))
    place(left, created=at(11, 50), finished=at(11, 50, 20))
    place(succeeded, created=at(11, 50), finished=at(11, 50, 30))

    data = overview(window=WINDOWS["1h"], project_ids=[project_default().pk], now=NOW)
    assert data["failure_rate"][bucket(11, 50)] == pytest.approx(2 / 3)
    totals = data["totals"]
    assert (
        totals["runs_succeeded"],
        totals["runs_failed"],
        totals["runs_compensated"],
        totals["runs_compensation_failed"],
    ) == (1, 2, 1, 1)
    assert totals["failure_rate"] == pytest.approx(2 / 3)
    (group,) = data["by_version"]
    assert (
        group["runs"],
        group["succeeded"],
        group["failed"],
        group["compensated"],
        group["compensation_failed"],
    ) == (3, 1, 2, 1, 1)


def test_the_endpoint_counts_only_the_users_projects(
    client, operator, reviewer, django_capture_on_commit_callbacks
):
    beta = Project.objects.create(slug="beta", name="Beta")
    beth = make_user("beth", "operator", project=beta)
    capture = django_capture_on_commit_callbacks
    plan_run(operator, [CALCULATE], capture=capture)
    plan_run(operator, [CALCULATE, CALCULATE], capture=capture)
    plan_run(beth, [CALCULATE], capture=capture, project=beta)
    vera = make_user("vera", "viewer", project=beta)

    client.force_login(operator)
    mine = client.get(reverse("fleet-overview-data"), {"window": "1h"}).json()
    assert (mine["totals"]["runs"], mine["totals"]["steps"]) == (2, 3)
    assert mine["totals"]["runs_succeeded"] == 2
    client.force_login(vera)
    theirs = client.get(reverse("fleet-overview-data")).json()
    assert (theirs["window"], theirs["totals"]["runs"], theirs["totals"]["steps"]) == ("1h", 1, 1)


@pytest.mark.parametrize("window", ["2h", "", "1h'--", "x" * 300])
def test_an_unknown_window_is_a_400_naming_the_allowed_ones(client, operator, window):
    client.force_login(operator)
    response = client.get(reverse("fleet-overview-data"), {"window": window})
    assert response.status_code == 400
    assert response.json() == {"detail": "window must be one of 1h, 24h, 7d", "field": "window"}


def test_the_overview_needs_a_signed_in_user(client):
    response = client.get(reverse("fleet-overview-data"))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
