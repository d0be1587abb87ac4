"""A replayed τ-bench airline conversation whose ``book_reservation`` was refused ("Error:
payment amount does not add up ...", the airline tools' error form): the step completes with
the recorded output and the run goes on, but the step is a tool error, and the run's page and
the runs list show it as one, not as a success."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from agentops.actors import Actor
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_decide
from audit.models import AuditEvent
from runs.models import Run, RunStatus, StepStatus
from tests.api.conftest import run_url, token_client
from tests.conftest import DATA_DIR
from testsupport.factories import make_run

pytestmark = pytest.mark.django_db

# Task 0, trial 1 of the data set: six calls, the first booking refused, the second made.
CONVERSATION = 50
REFUSAL = "Error: payment amount does not add up, total price is 305, but paid 255"
TOOLS = [
    "search_direct_flight",
    "search_onestop_flight",
    "get_user_details",
    "book_reservation",
    "think",
    "book_reservation",
]


def start(operator, capture) -> Run:
    item = json.loads((DATA_DIR / "trajectories.json").read_text())[CONVERSATION]
    assert (item["task_id"], item["trial"]) == (0, 1)
    return make_run(
        operator,
        agent="transcript",
        goal="Task 0, trial 1",
        transcript=item["traj"],
        capture=capture,
    )


def approve_next(run: Run, reviewer, capture) -> None:
    approval = ApprovalRequest.objects.get(step__run=run, status=ApprovalStatus.PENDING)
    with capture(execute=True):
        approval_decide(approval_id=approval.pk, actor=Actor.for_user(reviewer), decision="approve")


@pytest.fixture
def replayed(operator, reviewer, django_capture_on_commit_callbacks) -> Run:
    run = start(operator, django_capture_on_commit_callbacks)
    # Each booking waits for a reviewer: approve them as they come.
    for _ in range(2):
        approve_next(run, reviewer, django_capture_on_commit_callbacks)
    return Run.objects.get(pk=run.pk)


def test_the_refused_booking_is_a_tool_error_and_the_run_goes_on(replayed):
    steps = list(replayed.steps.order_by("index"))
    assert [s.tool for s in steps] == TOOLS
    assert replayed.status == RunStatus.SUCCEEDED
    assert all(s.status == StepStatus.SUCCEEDED for s in steps)
    assert steps[3].result == REFUSAL
    assert [s.tool_error for s in steps] == [False, False, False, True, False, False]
    # The booking that went through answered a reservation.
    assert json.loads(steps[5].result)["reservation_id"] == "HATHAT"
    events = AuditEvent.objects.filter(run_id=replayed.pk, verb="step.succeeded")
    marked = [e.object_id for e in events if e.payload.get("tool_error") is True]
    assert marked == [str(steps[3].pk)]


def test_the_run_page_and_runs_list_show_the_tool_error(client, operator, replayed):
    client.force_login(operator)
    html = client.get(reverse("run-detail", args=[replayed.pk])).content.decode()
    cards = html.split('<li class="card step"')[1:]
    assert len(cards) == 6
    refused = cards[3]
    assert 'data-step-index="3"' in refused
    assert 'data-step-status="tool_error"' in refused
    assert 'data-step-badge="tool_error">Tool error</span>' in refused
    assert 'data-tone="attention"' in refused
    assert 'data-step-badge="succeeded"' not in refused
    # The other steps are plain successes.
    assert sum('data-step-badge="tool_error">Tool error</span>' in card for card in cards) == 1
    assert sum('data-step-badge="succeeded">Succeeded</span>' in card for card in cards) == 5
    assert "data-steps-done>5/6, " in html
    assert "data-tool-errors>1 tool error</span>" in html

    listed = client.get(reverse("run-list")).content.decode()
    assert "data-steps>5/6 " in listed
    assert "data-tool-errors>1 tool error</span>" in listed


def test_the_api_marks_the_tool_error(operator, replayed):
    body = token_client(operator).get(run_url(replayed.pk)).json()
    assert [s["tool_error"] for s in body["steps"]] == [False, False, False, True, False, False]
    assert [s["status"] for s in body["steps"]] == ["succeeded"] * 6


def test_the_reviewer_of_the_second_booking_sees_the_first_was_refused(
    client, operator, reviewer, django_capture_on_commit_callbacks
):
    run = start(operator, django_capture_on_commit_callbacks)
    approve_next(run, reviewer, django_capture_on_commit_callbacks)
    assert run.steps.get(index=3).tool_error
    client.force_login(reviewer)
    waiting = run.steps.get(status="waiting")
    approval = waiting.approval
    # The card's context (earlier steps) loads when the reviewer opens it.
    html = client.get(reverse("approval-context", args=[approval.pk])).content.decode()
    badges = re.findall(
        r'<span class="mono">#(\d+) (\w+)</span>\s*<span [^>]*data-step-badge="(\w+)">', html
    )
    assert badges == [
        ("0", "search_direct_flight", "succeeded"),
        ("1", "search_onestop_flight", "succeeded"),
        ("2", "get_user_details", "succeeded"),
        ("3", "book_reservation", "tool_error"),
        ("4", "think", "succeeded"),
    ]
