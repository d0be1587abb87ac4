"""A run's page at any length (issue 30, item 6): folded steps loaded when opened, a status
filter's choices, one fork form, a timeline of tool calls and model turns, and as many
queries for 300 steps as for 30; a client run's results (JSON text) shown as trees."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agentops.json_view import COPY_BUTTON
from runs.models import ModelCall, Run
from runs.run_page import STEPS_OPEN
from testsupport.factories import make_run, make_user
from testsupport.long_runs import MODEL_EVERY, add_steps, status_of

pytestmark = pytest.mark.django_db

START = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
RECORD = {"reservation": {"id": "ZFA04Y", "legs": ["LAS-IAH", "IAH-LAS"]}, "note": "</pre>"}


def long_run(operator: Any, capture: Any, count: int) -> Run:
    run = make_run(operator, agent="client", goal=f"{count} steps", capture=capture)
    add_steps(run=run, count=count, value=RECORD, start=START)
    return run


def page(client: Any, run: Run) -> str:
    response = client.get(reverse("run-detail", args=[run.pk]))
    assert response.status_code == 200
    return str(response.content.decode())


def test_a_long_runs_steps_are_folded_but_the_failed_and_the_last(
    client, operator, django_capture_on_commit_callbacks
):
    run = long_run(operator, django_capture_on_commit_callbacks, 60)
    client.force_login(operator)
    html = page(client, run)
    open_steps = {int(i) for i in re.findall(r'id="step-body-(\d+)" open>', html)}
    folded = {int(i) for i in re.findall(r'id="step-body-(\d+)" data-lazy-src=', html)}
    # Independent of the page's rule: the statuses written above.
    expected = {i for i in range(60) if status_of(i)[0] != "succeeded"} | {59}
    assert open_steps == expected
    assert folded == set(range(60)) - expected
    # A folded step's body is not in the page (its tool call id is shown only in the body).
    assert "call_0001" not in html
    assert "call_0013" in html
    assert f'data-lazy-src="{reverse("run-step", args=[run.pk, 1])}"' in html
    assert f"{60 - len(expected)} of 60 steps folded" in html


def test_a_short_run_shows_every_step_open_and_its_timeline_drawn(
    client, operator, django_capture_on_commit_callbacks
):
    run = long_run(operator, django_capture_on_commit_callbacks, STEPS_OPEN)
    client.force_login(operator)
    html = page(client, run)
    assert len(re.findall(r'id="step-body-\d+" open>', html)) == STEPS_OPEN
    assert "data-steps-folded" not in html
    assert html.count('data-tl-kind="tool"') == STEPS_OPEN


def test_a_folded_steps_body_is_its_own_fragment_and_shows_the_json_text_result_as_a_tree(
    client, operator, django_capture_on_commit_callbacks
):
    run = long_run(operator, django_capture_on_commit_callbacks, 30)
    client.force_login(operator)
    body = client.get(reverse("run-step", args=[run.pk, 1])).content.decode()
    assert "<html" not in body
    assert "call_0001" in body
    result = body[body.index("data-step-result") :]
    # The result is JSON text: shown as the tree of that JSON, never as escaped text.
    assert '<span class="j-note j-json"' in result
    assert f'<span class="j-key">id</span>: {COPY_BUTTON}<span class="j-str">"ZFA04Y"</span>' in (
        result
    )
    assert "\\&quot;" not in body
    assert "&lt;/pre&gt;" in result
    assert 'data-fork-from="1"' in body
    # Step 13 failed: no fork may start past it.
    later = client.get(reverse("run-step", args=[run.pk, 20])).content.decode()
    assert "data-fork-from" not in later
    assert client.get(reverse("run-step", args=[run.pk, 30])).status_code == 404


def test_a_step_fragment_of_another_projects_run_is_not_found(
    client, operator, django_capture_on_commit_callbacks
):
    run = long_run(operator, django_capture_on_commit_callbacks, 3)
    client.force_login(make_user("outsider"))
    assert client.get(reverse("run-step", args=[run.pk, 0])).status_code in (403, 404)


def test_the_timeline_draws_each_tool_call_and_model_turn_and_the_filter_offers_the_statuses(
    client, operator, django_capture_on_commit_callbacks
):
    run = long_run(operator, django_capture_on_commit_callbacks, 60)
    client.force_login(operator)
    html = page(client, run)
    turns = ModelCall.objects.filter(run=run).count()
    assert turns == len(range(0, 60, MODEL_EVERY))
    assert f"{60 + turns} tool calls and model turns" in html
    # A long run's timeline is loaded when opened.
    timeline_url = reverse("run-timeline", args=[run.pk])
    assert f'data-lazy-src="{timeline_url}"' in html
    assert "data-tl-kind" not in html
    bars = client.get(timeline_url).content.decode()
    assert bars.count('data-tl-kind="tool"') == 60
    assert bars.count('data-tl-kind="model"') == turns
    # Step 0 waited at a gate: a hatched part before its bar.
    first = bars[bars.index('href="#step-0" data-jump="0"') :]
    assert '<span class="tl-gate"' in first[: first.index("</li>")]
    assert 'data-tl-status="tool_error"' in bars
    options = re.findall(r'<option value="([a-z_]*)">', html)
    assert options == ["", "failed", "succeeded", "tool_error"]
    assert html.count('data-action="fork"') == 1
    # Every step before the first failed one may start a fork (#13 failed).
    assert 'id="fork-from" min="0" max="13"' in html


def _queries(client: Any, run: Run) -> int:
    with CaptureQueriesContext(connection) as queries:
        page(client, run)
        client.get(reverse("run-timeline", args=[run.pk]))
    return len(queries)


def test_the_run_page_makes_as_many_queries_for_300_steps_as_for_30(
    client, operator, django_capture_on_commit_callbacks
):
    short = long_run(operator, django_capture_on_commit_callbacks, 30)
    long = long_run(operator, django_capture_on_commit_callbacks, 300)
    client.force_login(operator)
    _queries(client, short)  # warm the session and permission caches alike
    assert _queries(client, long) == _queries(client, short)


def test_the_timeline_of_another_projects_run_is_not_found(
    client, operator, django_capture_on_commit_callbacks
):
    run = long_run(operator, django_capture_on_commit_callbacks, 3)
    client.force_login(make_user("outsider"))
    assert client.get(reverse("run-timeline", args=[run.pk])).status_code in (403, 404)
