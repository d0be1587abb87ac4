"""A step whose tool answered with an error (a client's report with ``is_error``, a result in
the tool's declared error form) completes, and the run goes on, but it is marked a tool error:
on the step, in the API, in its ``succeeded`` audit event, and never counted as a success."""

from __future__ import annotations

from typing import Any

import pytest

import tests.tools  # noqa: F401  (registers test_refusing)
from audit.models import AuditEvent
from runs.models import Run, RunStatus, Step, StepStatus, ToolCall
from runs.tools import ErrorPrefix, declare_error_form, tool_error_of
from tests.api.conftest import RUNS_URL, run_url, token_client
from testsupport.factories import make_run, plan_run
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

REFUSAL = "Error: payment amount does not add up, total price is 305, but paid 255"


@pytest.fixture
def api(operator):
    return token_client(operator)


@pytest.fixture
def run(operator, django_capture_on_commit_callbacks) -> Run:
    return make_run(
        operator, agent="client", goal="airline desk", capture=django_capture_on_commit_callbacks
    )


def step_url(run: Run, step_id: int, action: str = "") -> str:
    return run_url(run.pk, f"steps/{step_id}" + (f"/{action}" if action else ""))


def append(api, run: Run, capture, tool: str) -> dict[str, Any]:
    with capture(execute=True):
        response = api.post(
            run_url(run.pk, "steps"),
            {"tool": tool, "args": {"reservation_id": "ABC123"}, "executor": "client"},
            format="json",
        )
    assert response.status_code == 201, response.json()
    body: dict[str, Any] = response.json()
    assert body["status"] == "ready"
    return body


def report(api, run: Run, step_id: int, body: dict[str, Any], capture):
    with capture(execute=True):
        return api.post(step_url(run, step_id, "result"), body, format="json")


def succeeded_payload(step_id: int) -> dict[str, Any]:
    event = AuditEvent.objects.get(
        object_type="step", object_id=str(step_id), verb="step.succeeded"
    )
    payload: dict[str, Any] = event.payload
    return payload


def test_a_client_report_with_is_error_completes_the_step_as_a_tool_error(
    api, run, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    step = append(api, run, capture, "get_reservation_details")
    response = report(api, run, step["id"], {"result": REFUSAL, "is_error": True}, capture)
    assert response.status_code == 200, response.json()
    body = response.json()
    # The call happened and its answer is on record: the step succeeded, marked.
    assert (body["status"], body["result"], body["tool_error"]) == ("succeeded", REFUSAL, True)
    assert body["error"] is None
    stored = Step.objects.get(pk=step["id"])
    assert (stored.status, stored.tool_error) == (StepStatus.SUCCEEDED, True)
    assert succeeded_payload(step["id"])["tool_error"] is True
    call = ToolCall.objects.get(step_id=step["id"])
    assert (call.status, call.result) == ("succeeded", REFUSAL)
    assert call.report == {"result": REFUSAL, "is_error": True}
    # The run goes on: the agent replans with the error answer.
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
    second = append(api, run, capture, "get_reservation_details")
    response = report(api, run, second["id"], {"result": {"status": "confirmed"}}, capture)
    assert response.json()["tool_error"] is False
    assert "tool_error" not in succeeded_payload(second["id"])

    # The same report again is answered the same; the unmarked one is a different report.
    response = report(api, run, step["id"], {"result": REFUSAL, "is_error": True}, capture)
    assert (response.status_code, response.json()["tool_error"]) == (200, True)
    with assert_unchanged():
        response = report(api, run, step["id"], {"result": REFUSAL}, capture)
    assert response.status_code == 409, response.json()

    listed = api.get(RUNS_URL).json()["results"]
    summaries = next(item["steps"] for item in listed if item["id"] == str(run.pk))
    assert [s["tool_error"] for s in summaries] == [True, False]


def test_a_reported_result_is_a_tool_error_only_when_the_client_says_so(
    api, run, django_capture_on_commit_callbacks
):
    # The client ran the tool and knows its answers: an "Error: ..." string it reports as a
    # plain result stays a plain result, even under an airline tool's name.
    capture = django_capture_on_commit_callbacks
    step = append(api, run, capture, "get_user_details")
    response = report(api, run, step["id"], {"result": REFUSAL, "is_error": False}, capture)
    assert response.status_code == 200, response.json()
    assert (response.json()["status"], response.json()["tool_error"]) == ("succeeded", False)
    assert Step.objects.get(pk=step["id"]).tool_error is False


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"result": REFUSAL, "is_error": "yes"}, "is_error"),
        ({"result": REFUSAL, "is_error": 1}, "is_error"),
        ({"is_error": True}, "result"),
        (
            {"error": {"type": "x", "message": "m", "retryable": False}, "is_error": True},
            "is_error",
        ),
        ({"outcome": "unknown", "is_error": True}, "is_error"),
    ],
)
def test_a_misplaced_or_malformed_is_error_is_refused(
    api, run, body, field, django_capture_on_commit_callbacks
):
    step = append(api, run, django_capture_on_commit_callbacks, "get_reservation_details")
    with assert_unchanged():
        response = api.post(step_url(run, step["id"], "result"), body, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == field, response.json()


def test_a_server_tool_answer_in_its_declared_error_form_is_a_tool_error(
    operator, django_capture_on_commit_callbacks
):
    run = plan_run(
        operator,
        [
            {"tool": "test_refusing", "args": {"refuse": True}},
            {"tool": "test_refusing", "args": {}},
        ],
        capture=django_capture_on_commit_callbacks,
    )
    assert run.status == RunStatus.SUCCEEDED
    refused, done = run.steps.order_by("index")
    assert (refused.status, refused.result, refused.tool_error) == (
        StepStatus.SUCCEEDED,
        {"refused": "the amount does not add up"},
        True,
    )
    assert (done.status, done.result, done.tool_error) == (
        StepStatus.SUCCEEDED,
        {"done": True},
        False,
    )
    assert succeeded_payload(refused.pk)["tool_error"] is True
    assert "tool_error" not in succeeded_payload(done.pk)


def test_error_forms_judge_only_their_own_tools():
    assert tool_error_of("book_reservation", REFUSAL)
    assert not tool_error_of("book_reservation", '{"reservation_id": "HATHAT"}')
    # "Error" inside a result, or not at its start, is an answer like any other.
    assert not tool_error_of("book_reservation", {"message": REFUSAL})
    assert not tool_error_of("get_user_details", "No Error: here")
    # A tool without an error form never answers with a tool error.
    assert not tool_error_of("send_email", REFUSAL)
    assert not tool_error_of("no_such_tool", REFUSAL)
    assert ErrorPrefix("Error:")("Error: x")
    assert not ErrorPrefix("Error:")(None)


def test_a_second_form_for_a_name_is_refused_and_a_form_that_raises_counts_as_none(caplog):
    with pytest.raises(ValueError, match="book_reservation"):
        declare_error_form(["think", "book_reservation"], ErrorPrefix("OK"))
    # Nothing was declared: both keep the airline form.
    assert tool_error_of("think", REFUSAL)
    assert not tool_error_of("think", "OK then")
    assert tool_error_of("test_broken_form", REFUSAL) is False
    assert "the error form of tool 'test_broken_form' raised" in caplog.text
