"""The runs list and a run's timeline: what they show, their fragments, cancel and resume."""

import uuid

import pytest
from django.urls import reverse

from agentops.json_view import COPY_BUTTON
from runs.models import RunStatus
from tests.pages.conftest import CALCULATE
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


def test_runs_list_shows_status_goal_requester_and_steps(client, operator, awaiting_run):
    client.force_login(operator)
    response = client.get(reverse("run-list"))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-run-status="awaiting_approval">Awaiting approval<' in html
    assert "send the weekly report" in html
    assert "olivia" in html
    assert ">1/2<" in html
    assert 'data-ws-path="/ws/runs/"' in html


def test_runs_list_filters_by_status(client, operator, make_run):
    make_run([CALCULATE], goal="quick sum")
    make_run(
        [CALCULATE, {"tool": "send_email", "args": {"to": ["a@b.co"], "subject": "s", "body": ""}}],
        goal="mail it",
    )
    client.force_login(operator)
    html = client.get(reverse("run-list"), {"status": "succeeded"}).content.decode()
    assert "quick sum" in html
    assert "mail it" not in html


def test_runs_list_queries_do_not_grow_with_runs(
    client, operator, make_run, django_assert_max_num_queries
):
    for i in range(6):
        make_run([CALCULATE], goal=f"run {i}")
    client.force_login(operator)
    with django_assert_max_num_queries(9):
        assert client.get(reverse("run-list-fragment")).status_code == 200


def test_run_timeline_shows_steps_attempts_results_and_events(client, operator, awaiting_run):
    client.force_login(operator)
    response = client.get(reverse("run-detail", args=[awaiting_run.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-run-status="awaiting_approval">Awaiting approval<' in html
    assert 'data-step-status="succeeded"' in html
    assert 'data-step-status="awaiting_approval"' in html
    assert f'<span class="j-key">expression</span>: {COPY_BUTTON}' in html
    assert '<span class="j-str">"6*7"</span>' in html
    assert f'data-step-result><div class="json-tree">{COPY_BUTTON}<span class="j-num">42.0<' in html
    assert "need the total" in html
    assert "Attempts (1)" in html
    assert "run.awaiting_approval" in html
    assert f'data-ws-path="/ws/runs/{awaiting_run.pk}/"' in html
    assert 'data-last-event-id="' in html


def test_run_timeline_queries_do_not_grow_with_steps(
    client, operator, make_run, django_assert_max_num_queries
):
    run = make_run([CALCULATE] * 8)
    client.force_login(operator)
    # A bound, whatever the steps (one query lists the run's artifacts:
    # artifacts.selectors.run_artifacts).
    with django_assert_max_num_queries(17):
        assert client.get(reverse("run-detail-fragment", args=[run.pk])).status_code == 200


def test_fragment_is_the_changing_part_only(client, operator, awaiting_run):
    client.force_login(operator)
    html = client.get(reverse("run-detail-fragment", args=[awaiting_run.pk])).content.decode()
    assert "<html" not in html
    assert "data-run-status" in html


def test_unknown_run_is_404(client, operator):
    client.force_login(operator)
    assert client.get(reverse("run-detail", args=[uuid.uuid4()])).status_code == 404


def test_operator_cancels_a_run_from_its_page(client, operator, awaiting_run):
    client.force_login(operator)
    page = client.get(reverse("run-detail", args=[awaiting_run.pk])).content.decode()
    assert 'data-action="cancel"' in page
    response = client.post(
        reverse("run-cancel", args=[awaiting_run.pk]), {"reason": "wrong recipient"}, follow=True
    )
    assert response.status_code == 200
    assert "Run cancelled." in response.content.decode()
    awaiting_run.refresh_from_db()
    assert awaiting_run.status == RunStatus.CANCELLED
    assert awaiting_run.error["message"] == "wrong recipient"


def test_cancelling_a_finished_run_shows_a_message(client, operator, make_run):
    run = make_run([CALCULATE])
    client.force_login(operator)
    response = client.post(reverse("run-cancel", args=[run.pk]), follow=True)
    assert response.status_code == 200
    assert "can no longer be cancelled" in response.content.decode()


def test_resuming_a_run_that_has_not_failed_shows_a_message(client, operator, awaiting_run):
    client.force_login(operator)
    response = client.post(reverse("run-resume", args=[awaiting_run.pk]), follow=True)
    assert response.status_code == 200
    assert "Only a failed run can be resumed." in response.content.decode()


def test_reviewer_cannot_cancel(client, reviewer, awaiting_run):
    client.force_login(reviewer)
    page = client.get(reverse("run-detail", args=[awaiting_run.pk])).content.decode()
    assert 'data-action="cancel"' not in page
    with assert_unchanged():
        assert client.post(reverse("run-cancel", args=[awaiting_run.pk])).status_code == 403


def test_run_page_shows_the_budget_and_the_steps_its_client_runs(
    client, operator, django_capture_on_commit_callbacks
):
    from agentops.actors import Actor
    from runs.control.create import run_create, step_append

    actor = Actor.for_user(operator)
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(
            actor=actor,
            agent="client",
            goal="budgeted desk",
            budget={"max_tokens": 1000, "max_cost_usd": 2, "on_exceed": "approve"},
        )
        step_append(
            actor=actor,
            run_id=run.pk,
            tool="get_quote",
            args={"q": 1},
            executor="client",
            usage={"input_tokens": 40, "output_tokens": 2},
        )
    client.force_login(operator)
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "42 of 1000" in html
    assert "of $2.0000" in html
    assert "ask a reviewer" in html
    assert 'data-step-status="ready"' in html
    assert "run by client" in html
