"""The run page: each step's state before and after it as a diff (without a query per step),
links between a fork and its source, audit rows linked to their step and approval; admin's
"view on site" and the audit admin's links."""

import re

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agentops.actors import Actor
from agentops.json_view import COPY_BUTTON
from approvals.models import ApprovalRequest
from audit.models import AuditEvent
from runs.control.fork import run_fork
from runs.models import Run, Step
from tests.pages.conftest import CALCULATE
from testsupport.factories import make_user

pytestmark = pytest.mark.django_db

ADD = {"tool": "calculate", "args": {"expression": "1+1"}}


def _diff_rows(html: str) -> list[tuple[str, str]]:
    """(kind, path) of each row of a step's state diff (its ``run-step-state`` fragment)."""
    return re.findall(r'data-diff-kind="(\w+)" data-diff-path="([^"]*)"', html)


def _step_state(client, run, index: int) -> str:
    response = client.get(reverse("run-step-state", args=[run.pk, index]))
    assert response.status_code == 200
    return response.content.decode()


def test_each_step_shows_what_it_changed_in_the_runs_state(client, operator, make_run):
    run = make_run([CALCULATE, ADD])
    client.force_login(operator)
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()

    # Folded by default, with how many changes the step made; the diff is loaded when opened.
    state_url = reverse("run-step-state", args=[run.pk, 1])
    folded = f'id="checkpoint-1" data-state-diff data-lazy-src="{state_url}">'
    assert f'<details class="checkpoint" {folded}' in html
    step1 = html[html.index('id="checkpoint-1"') :]
    assert "Run state: 3 changes by this step" in step1
    assert "Run state: 2 changes by this step" in html[html.index('id="checkpoint-0"') :]
    assert "data-diff-kind" not in html

    assert _diff_rows(_step_state(client, run, 0)) == [
        ("added", "/completed_steps"),
        ("added", "/last_step"),
    ]
    step1 = _step_state(client, run, 1)
    assert _diff_rows(step1) == [
        ("changed", "/completed_steps"),
        ("changed", "/last_step/index"),
        ("changed", "/last_step/result"),
    ]
    # The values before and after, and the whole state after the step.
    assert '<span class="j-num">42.0</span>' in step1
    assert '<span class="j-num">2.0</span>' in step1
    assert 'id="state-after-1"' in step1
    assert (
        f'<span class="j-key">completed_steps</span>: {COPY_BUTTON}<span class="j-num">2<' in step1
    )


def test_a_steps_state_is_refused_outside_the_run_and_without_a_checkpoint(
    client, operator, make_run
):
    run = make_run([CALCULATE, ADD])
    client.force_login(operator)
    assert client.get(reverse("run-step-state", args=[run.pk, 2])).status_code == 404
    other = make_user("outsider")
    client.force_login(other)
    assert client.get(reverse("run-step-state", args=[run.pk, 0])).status_code in (403, 404)


def _queries(client, run) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(reverse("run-detail", args=[run.pk])).status_code == 200
    return len(queries)


def test_the_run_page_makes_as_many_queries_for_ten_steps_as_for_two(client, operator, make_run):
    short, long = make_run([CALCULATE] * 2), make_run([CALCULATE] * 10)
    client.force_login(operator)
    _queries(client, short)  # warm the session and permission caches alike
    assert _queries(client, long) == _queries(client, short)


@pytest.fixture
def forked(operator, make_run, django_capture_on_commit_callbacks):
    source = make_run([CALCULATE, ADD])
    children = []
    for index in (1, 0):
        with django_capture_on_commit_callbacks(execute=True):
            children.append(
                run_fork(run_id=source.pk, actor=Actor.for_user(operator), from_index=index)
            )
    return source, children


def test_a_fork_links_its_source_and_the_source_its_forks(client, operator, forked):
    source, (first, second) = forked
    client.force_login(operator)
    html = client.get(reverse("run-detail", args=[source.pk])).content.decode()
    forks = html[html.index("data-run-forks") :]
    hrefs = re.findall(r'<a href="([^"]+)" data-fork-link>', forks)
    assert hrefs == [f"/runs/{first.pk}/", f"/runs/{second.pk}/"]
    assert "data-run-parent" not in html

    child = client.get(reverse("run-detail", args=[first.pk])).content.decode()
    parent = child[child.index("data-run-parent") :]
    assert parent.index(f'<a href="/runs/{source.pk}/">') < parent.index("at step #1")
    assert "data-run-forks" not in child


def test_a_fork_whose_source_was_deleted_says_so(client, operator, forked):
    _source, (first, _) = forked
    Run.objects.filter(pk=first.pk).update(forked_from=None)
    client.force_login(operator)
    html = client.get(reverse("run-detail", args=[first.pk])).content.decode()
    assert "<dt>Forked from</dt><dd>a run since deleted at step #1</dd>" in html


def test_audit_rows_on_the_run_page_link_their_step_and_approval(client, operator, awaiting_run):
    client.force_login(operator)
    html = client.get(reverse("run-detail", args=[awaiting_run.pk])).content.decode()
    approval = ApprovalRequest.objects.get(run=awaiting_run)
    links = re.findall(r'<a href="(#[\w-]+)" data-event-link>([\w.]+)</a>', html)
    assert ("#step-0", "step.succeeded") in links
    assert ("#step-1", "step.awaiting_approval") in links
    assert (f"#approval-{approval.pk}", "approval.created") in links
    # Run events stay plain text: the run is this page.
    assert not any(verb.startswith("run.") for _, verb in links)
    assert f'id="approval-{approval.pk}"' in html
    assert 'id="step-1"' in html


def test_admin_view_on_site_opens_the_run_the_step_and_the_approval(client, seeded, awaiting_run):
    client.force_login(make_user("ada", superuser=True))
    step = Step.objects.get(run=awaiting_run, index=1)
    approval = ApprovalRequest.objects.get(step=step)
    expected = {
        awaiting_run: f"/runs/{awaiting_run.pk}/",
        step: f"/runs/{awaiting_run.pk}/#step-1",
        approval: f"/approvals/{approval.pk}/",
    }
    for obj, url in expected.items():
        assert obj.get_absolute_url() == url
        meta = obj._meta
        change = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])
        shortcut = reverse(
            "admin:view_on_site", args=[ContentType.objects.get_for_model(obj).pk, obj.pk]
        )
        assert f'href="{shortcut}"' in client.get(change).content.decode()
        response = client.get(shortcut)
        assert (response.status_code, response["Location"]) == (302, f"http://testserver{url}")


def test_audit_admin_rows_link_their_run_step_and_approval(client, seeded, awaiting_run):
    client.force_login(make_user("ada", superuser=True))
    approval = ApprovalRequest.objects.get(run=awaiting_run)
    step = approval.step
    html = client.get(reverse("admin:audit_auditevent_changelist")).content.decode()
    run_page = f"/runs/{awaiting_run.pk}/"
    assert f'<a href="{run_page}" data-run-link>{awaiting_run.pk}</a>' in html
    step_admin = reverse("admin:runs_step_change", args=[step.pk])
    assert f'<a href="{step_admin}" data-object-link>step:{step.pk}</a>' in html
    approval_admin = reverse("admin:approvals_approvalrequest_change", args=[approval.pk])
    assert f'<a href="{approval_admin}" data-object-link>approval:{approval.pk}</a>' in html
    event = AuditEvent.objects.filter(object_type="step", object_id=str(step.pk)).first()
    detail = client.get(reverse("admin:audit_auditevent_change", args=[event.pk])).content
    assert f'href="{step_admin}"'.encode() in detail
    assert f'href="{run_page}"'.encode() in detail


def test_the_run_page_shows_its_latest_events_and_loads_the_earlier_ones_when_asked(
    client, operator, awaiting_run, monkeypatch
):
    monkeypatch.setattr("runs.views.EVENTS_SHOWN", 3)
    client.force_login(operator)
    ids = list(
        AuditEvent.objects.filter(run_id=awaiting_run.pk)
        .order_by("id")
        .values_list("pk", flat=True)
    )
    assert len(ids) > 3
    html = client.get(reverse("run-detail", args=[awaiting_run.pk])).content.decode()
    assert [int(x) for x in re.findall(r'<tr data-event-id="(\d+)">', html)] == ids[-3:]
    assert f"Showing the latest 3 of {len(ids)} events." in html
    earlier_url = f"{reverse('run-events', args=[awaiting_run.pk])}?before={ids[-3]}"
    assert f'data-lazy-src="{earlier_url}"' in html
    assert f"{len(ids) - 3} earlier events" in html

    earlier = client.get(earlier_url).content.decode()
    assert [int(x) for x in re.findall(r'<tr data-event-id="(\d+)">', earlier)] == ids[:-3]
    # Rows still link their step on the run's page.
    assert '<a href="#step-0" data-event-link>' in earlier


def test_the_earlier_events_need_a_cursor_and_access_to_the_run(client, operator, awaiting_run):
    client.force_login(operator)
    url = reverse("run-events", args=[awaiting_run.pk])
    for bad in ("", "?before=", "?before=abc", "?before=-1", "?before=0"):
        response = client.get(url + bad)
        assert response.status_code == 400, bad
        assert b"before" in response.content
    client.force_login(make_user("stranger"))
    assert client.get(url + "?before=999999").status_code in (403, 404)
