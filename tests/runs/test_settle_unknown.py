"""Settling a step whose outcome is unknown (issue 12, item 3): an operator who checked the
other side says the call happened (its result recorded, the run goes on) or did not (the
ledger lets a new attempt call it, the run resumes from it). Refused for a step whose outcome
is known, for a run that has not failed, for the wrong role, with nothing changed."""

from __future__ import annotations

import pytest

from audit.models import AuditEvent
from runs.models import Run, RunStatus, ToolCall
from tests.api.conftest import token_client
from tests.runs.test_client_tools import append, report, step_url
from testsupport.factories import make_run
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(operator):
    return token_client(operator)


@pytest.fixture
def run(operator, django_capture_on_commit_callbacks) -> Run:
    return make_run(
        operator, agent="client", goal="quotes", capture=django_capture_on_commit_callbacks
    )


@pytest.fixture
def unknown(api, run, django_capture_on_commit_callbacks):
    """The client step ``get_quote`` of ``run``, whose client cannot tell if it acted."""
    capture = django_capture_on_commit_callbacks
    step = append(api, run, capture, "get_quote", {"amount": 10})
    report(api, run, step["id"], {"outcome": "unknown"}, capture)
    assert Run.objects.get(pk=run.pk).status == RunStatus.FAILED
    return step


def settle(api, run, step, body, capture):
    with capture(execute=True):
        return api.post(step_url(run, step["id"], "settle"), body, format="json")


def test_happened_records_the_result_and_the_run_goes_on(
    api, run, unknown, django_capture_on_commit_callbacks
):
    response = settle(
        api,
        run,
        unknown,
        {"happened": True, "result": {"quote": 42}, "reason": "seen in the provider's log"},
        django_capture_on_commit_callbacks,
    )
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "running"
    step = api.get(step_url(run, unknown["id"])).json()
    assert (step["status"], step["result"]) == ("succeeded", {"quote": 42})
    call = ToolCall.objects.get(idempotency_key=unknown["idempotency_key"])
    assert (call.status, call.result) == ("succeeded", {"quote": 42})
    assert call.report["settled"]["happened"] is True
    event = AuditEvent.objects.filter(run_id=run.pk, verb="step.succeeded").get()
    assert event.payload["settled"]["reason"] == "seen in the provider's log"
    assert event.actor_name == "olivia"


def test_did_not_happen_lets_the_call_run_again_under_its_key(
    api, run, unknown, django_capture_on_commit_callbacks
):
    response = settle(
        api,
        run,
        unknown,
        {"happened": False, "reason": "not in the provider's log"},
        django_capture_on_commit_callbacks,
    )
    assert response.status_code == 200, response.json()
    step = api.get(step_url(run, unknown["id"])).json()
    assert step["status"] == "ready"
    assert step["idempotency_key"] == unknown["idempotency_key"]
    assert ToolCall.objects.get(idempotency_key=unknown["idempotency_key"]).status == "failed"
    # The client runs it again and reports: the step and the run move on.
    again = report(api, run, unknown["id"], {"result": "done"}, django_capture_on_commit_callbacks)
    assert again.json()["status"] == "succeeded"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"happened": False, "result": 1}, 400),
        ({"happened": True, "result": "a\u0000b"}, 400),
        ({"happened": "maybe"}, 400),
        ({}, 400),
    ],
)
def test_bad_settlements_are_refused_with_nothing_changed(
    api, run, unknown, body, code, django_capture_on_commit_callbacks
):
    with assert_unchanged():
        response = settle(api, run, unknown, body, django_capture_on_commit_callbacks)
    assert response.status_code == code


def test_a_known_outcome_or_the_wrong_role_cannot_be_settled(
    api, run, reviewer, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    step = append(api, run, capture, "get_quote", {"amount": 10})
    error = {"type": "x", "message": "no", "retryable": False}
    report(api, run, step["id"], {"error": error}, capture)
    reviewer_api = token_client(reviewer)  # (a new token is audited: before the blocks)
    with assert_unchanged():
        known = settle(api, run, step, {"happened": True, "result": 1}, capture)
    assert known.status_code == 409
    with assert_unchanged():
        denied = settle(reviewer_api, run, step, {"happened": False}, capture)
    assert denied.status_code == 403
    assert Run.objects.get(pk=run.pk).status == RunStatus.FAILED


def test_the_run_page_settles_it_and_refuses_who_may_not(
    operator, reviewer, run, unknown, django_capture_on_commit_callbacks
):
    from django.test import Client
    from django.urls import reverse

    client = Client()
    client.force_login(operator)
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'data-action="settle-happened"' in page
    outsider = Client()
    outsider.force_login(reviewer)  # may see the run, may not resume or settle it
    body = {"step_id": unknown["id"], "happened": "yes", "result": '{"quote": 7}', "reason": "x"}
    with assert_unchanged():
        assert outsider.post(reverse("run-settle", args=[run.pk]), body).status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("run-settle", args=[run.pk]), body, follow=True)
    assert "Settled: the call recorded as done" in response.content.decode()
    step = run.steps.get(pk=unknown["id"])
    assert (step.status, step.result) == ("succeeded", {"quote": 7})
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'data-action="settle-happened"' not in page


def test_admin_settles_it_after_a_confirmation_that_needs_a_reason(
    admin_client, run, unknown, django_capture_on_commit_callbacks
):
    url = "/admin/runs/step/"
    chosen = {"action": "settle_selected", "_selected_action": [unknown["id"]]}
    with assert_unchanged():
        page = admin_client.post(url, chosen)
        assert page.status_code == 200
        assert "Settle the unknown outcome of the selected steps?" in page.content.decode()
        missing = admin_client.post(url, {**chosen, "apply": "yes", "happened": "yes"})
        assert missing.status_code == 200  # the form again: no reason given
        assert "This field is required" in missing.content.decode()
    body = {
        **chosen,
        "apply": "yes",
        "happened": "yes",
        "result": '{"quote": 9}',
        "reason": "confirmed with the provider",
    }
    with django_capture_on_commit_callbacks(execute=True):
        done = admin_client.post(url, body, follow=True)
    assert "Settled 1 step(s)." in done.content.decode()
    step = run.steps.get(pk=unknown["id"])
    assert (step.status, step.result) == ("succeeded", {"quote": 9})
    event = AuditEvent.objects.filter(run_id=run.pk, verb="step.succeeded").get()
    assert event.payload["settled"]["reason"] == "confirmed with the provider"
