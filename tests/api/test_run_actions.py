"""Reading, cancelling, resuming and driving runs over the API, and the 404/409 they can meet."""

import pytest

from agentops.actors import Actor
from runs.control.create import run_create
from runs.models import RunStatus
from runs.tools import get_tool
from tests.api.conftest import approval_url, calc, email_step, plan_body, post_run, run_url
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_run(operator_api):
    return post_run(operator_api, agent="client", goal="drive").json()


def test_run_detail_has_steps_with_attempts(operator_api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = post_run(operator_api, **plan_body({"tool": "flaky", "args": {"failures": 1}}))
    data = operator_api.get(run_url(run.json()["id"])).json()
    assert data["status"] == RunStatus.SUCCEEDED
    (step,) = data["steps"]
    assert step["attempts"] == 2
    assert step["duration_ms"] is not None
    history = step["attempt_history"]
    assert [(a["number"], a["status"]) for a in history] == [(1, "failed"), (2, "succeeded")]
    assert history[0]["error"]["message"].startswith("planned failure")
    assert {"worker", "started_at", "finished_at", "duration_ms"} <= set(history[0])


def test_run_detail_reads_in_constant_queries(
    operator_api, operator, django_assert_max_num_queries
):
    run = run_create(
        actor=Actor.for_user(operator),
        agent="plan",
        goal="many",
        steps=[calc(str(i)) for i in range(30)],
    )
    with django_assert_max_num_queries(8):
        assert len(operator_api.get(run_url(run.pk)).json()["steps"]) == 30


def test_cancel_then_cancel_again_is_a_conflict(operator_api):
    run = post_run(operator_api, **plan_body(calc())).json()
    response = operator_api.post(run_url(run["id"], "cancel"), {"reason": "wrong goal"})
    assert response.status_code == 200
    data = response.json()
    assert data["status"] == RunStatus.CANCELLED
    assert data["error"]["message"] == "wrong goal"
    assert data["steps"][0]["status"] == "cancelled"
    with assert_unchanged():
        again = operator_api.post(run_url(run["id"], "cancel"))
    assert again.status_code == 409
    assert "cancelled" in again.json()["detail"]
    assert again.json()["status"] == RunStatus.CANCELLED


def test_cancel_refuses_unknown_keys(operator_api):
    run = post_run(operator_api, **plan_body(calc())).json()
    with assert_unchanged():
        response = operator_api.post(run_url(run["id"], "cancel"), {"why": "x"}, format="json")
    assert response.status_code == 400


def test_resume_of_a_run_that_has_not_failed_is_a_conflict(operator_api):
    run = post_run(operator_api, **plan_body(calc())).json()
    with assert_unchanged():
        response = operator_api.post(run_url(run["id"], "resume"))
        assert response.status_code == 409
    assert "queued" in response.json()["detail"]


def test_resume_of_a_failed_run_runs_its_failed_step_again(
    operator_api, django_capture_on_commit_callbacks
):
    flaky = get_tool("flaky")
    assert flaky is not None
    failures = flaky.max_attempts
    with django_capture_on_commit_callbacks(execute=True):
        run = post_run(operator_api, **plan_body({"tool": "flaky", "args": {"failures": failures}}))
    run_id = run.json()["id"]
    assert operator_api.get(run_url(run_id)).json()["status"] == RunStatus.FAILED
    with django_capture_on_commit_callbacks(execute=True):
        response = operator_api.post(run_url(run_id, "resume"))
    assert response.status_code == 200
    assert response.json()["status"] == RunStatus.RUNNING
    data = operator_api.get(run_url(run_id)).json()
    assert data["status"] == RunStatus.SUCCEEDED
    assert data["steps"][0]["attempts"] == failures + 1


def test_client_appends_steps_then_completes(
    operator_api, client_run, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = operator_api.post(
            run_url(client_run["id"], "steps"),
            {"tool": "echo", "args": {"value": 7}, "rationale": "say seven"},
            format="json",
        )
    assert response.status_code == 201, response.json()
    step = response.json()
    assert (step["index"], step["tool"], step["rationale"]) == (0, "echo", "say seven")
    with django_capture_on_commit_callbacks(execute=True):
        response = operator_api.post(run_url(client_run["id"], "complete"))
    assert response.status_code == 200
    data = operator_api.get(run_url(client_run["id"])).json()
    assert data["status"] == RunStatus.SUCCEEDED
    assert data["steps"][0]["result"] == 7


def test_appended_step_with_bad_args_is_a_400(operator_api, client_run):
    with assert_unchanged():
        response = operator_api.post(
            run_url(client_run["id"], "steps"), {"tool": "calculate", "args": {}}, format="json"
        )
    assert response.status_code == 400
    assert response.json()["field"] == "step.args"


def test_append_to_a_plan_run_is_a_400(operator_api):
    run = post_run(operator_api, **plan_body(calc())).json()
    with assert_unchanged():
        response = operator_api.post(run_url(run["id"], "steps"), calc(), format="json")
        assert response.status_code == 400
    assert "client runs" in response.json()["detail"]


def test_append_after_complete_is_a_conflict(operator_api, client_run):
    assert operator_api.post(run_url(client_run["id"], "complete")).status_code == 200
    with assert_unchanged():
        response = operator_api.post(run_url(client_run["id"], "steps"), calc(), format="json")
        assert response.status_code == 409
        assert operator_api.post(run_url(client_run["id"], "complete")).status_code == 409


def test_complete_of_a_plan_run_is_a_400(operator_api):
    run = post_run(operator_api, **plan_body(calc())).json()
    with assert_unchanged():
        assert operator_api.post(run_url(run["id"], "complete")).status_code == 400


@pytest.mark.parametrize("action", ["", "cancel", "resume", "complete", "steps", "events"])
def test_unknown_run_is_a_404(operator_api, action):
    url = run_url("00000000-0000-4000-8000-000000000000", action)
    if action in ("", "events"):
        response = operator_api.get(url)
    else:
        response = operator_api.post(url, calc() if action == "steps" else {}, format="json")
    assert response.status_code == 404
    assert response.json()["detail"] == "run not found"


@pytest.mark.parametrize("run_id", ["not-a-uuid", "1234", "00000000-0000-4000-8000"])
def test_malformed_run_id_is_a_404(operator_api, run_id):
    assert operator_api.get(run_url(run_id)).status_code == 404
    assert operator_api.post(run_url(run_id, "cancel")).status_code == 404


def test_after_a_rejection_the_client_reads_the_reason_and_appends_another_call(
    operator_api, reviewer_api, client_run, django_capture_on_commit_callbacks
):
    url = run_url(client_run["id"], "steps")
    with django_capture_on_commit_callbacks(execute=True):
        step = operator_api.post(url, email_step(), format="json").json()
    approval_id = operator_api.get(run_url(client_run["id"])).json()["steps"][0]["approval"]["id"]
    with django_capture_on_commit_callbacks(execute=True):
        reviewer_api.post(approval_url(approval_id, "reject"), {"comment": "not to this address"})
    run = operator_api.get(run_url(client_run["id"])).json()
    assert run["status"] == "running"
    assert run["steps"][0]["id"] == step["id"]
    assert run["steps"][0]["status"] == "rejected"
    assert run["steps"][0]["error"]["reason"] == "not to this address"
    with django_capture_on_commit_callbacks(execute=True):
        response = operator_api.post(url, calc(), format="json")
    assert response.status_code == 201
    assert response.json()["index"] == 1
