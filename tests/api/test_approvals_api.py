"""Reviewers see approval requests and approve or reject them over the API."""

import pytest

from runs.models import RunStatus, StepStatus
from tests.api.conftest import (
    EMAIL_ARGS,
    approval_url,
    email_step,
    plan_body,
    post_run,
    run_url,
    token_client,
)
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting_run(operator_api, django_capture_on_commit_callbacks):
    """A run paused on a high-risk step, as the API shows it."""
    with django_capture_on_commit_callbacks(execute=True):
        run = post_run(operator_api, **plan_body(email_step(), goal="mail the customer")).json()
    data = operator_api.get(run_url(run["id"])).json()
    assert data["status"] == "awaiting_approval"
    return data


def approval_of(run):
    return run["steps"][0]["approval"]["id"]


def test_pending_approvals_show_what_the_agent_wants(reviewer_api, operator, waiting_run):
    response = reviewer_api.get("/api/v1/approvals/", {"status": "pending"})
    assert response.status_code == 200
    (approval,) = response.json()["results"]
    assert approval["id"] == approval_of(waiting_run)
    assert approval["status"] == "pending"
    assert approval["risk"] == "high"
    assert approval["required_approvals"] == 1
    assert approval["decided_at"] is None
    assert approval["expires_at"]
    assert approval["run"] == {
        "id": waiting_run["id"],
        "goal": "mail the customer",
        "requested_by": operator.username,
    }
    step = approval["step"]
    assert (step["index"], step["tool"], step["args"]) == (0, "send_email", EMAIL_ARGS)
    assert step["rationale"] == "tell the customer"
    assert approval["decisions"] == []


def test_status_filter_and_unknown_status(reviewer_api, waiting_run):
    assert reviewer_api.get("/api/v1/approvals/", {"status": "approved"}).json()["results"] == []
    response = reviewer_api.get("/api/v1/approvals/", {"status": "maybe"})
    assert response.status_code == 400
    assert response.json()["field"] == "status"
    assert "maybe" in response.json()["detail"]


def test_approve_runs_the_step(
    reviewer_api, reviewer, waiting_run, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = reviewer_api.post(
            approval_url(approval_of(waiting_run), "approve"), {"comment": "fine"}, format="json"
        )
    assert response.status_code == 200, response.json()
    approval = response.json()
    assert approval["status"] == "approved"
    assert approval["decided_at"] is not None
    (decision,) = approval["decisions"]
    assert (decision["reviewer"], decision["decision"], decision["comment"]) == (
        reviewer.username,
        "approve",
        "fine",
    )
    run = reviewer_api.get(run_url(waiting_run["id"])).json()
    assert run["status"] == RunStatus.SUCCEEDED, run["error"]
    assert run["steps"][0]["result"]["sent"] == 1
    assert run["steps"][0]["approval"] == {"id": approval["id"], "status": "approved"}


def test_reject_fails_the_run_with_the_comment(reviewer_api, waiting_run):
    response = reviewer_api.post(
        approval_url(approval_of(waiting_run), "reject"), {"comment": "wrong customer"}
    )
    assert response.status_code == 200
    assert response.json()["status"] == "rejected"
    run = reviewer_api.get(run_url(waiting_run["id"])).json()
    assert run["status"] == RunStatus.FAILED
    step = run["steps"][0]
    assert step["status"] == StepStatus.REJECTED
    assert step["error"]["message"] == "wrong customer"


def test_reviewer_may_not_decide_on_their_own_run(
    operator_reviewer, django_capture_on_commit_callbacks
):
    client = token_client(operator_reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        run = post_run(client, **plan_body(email_step())).json()
    approval_id = approval_of(client.get(run_url(run["id"])).json())
    with assert_unchanged():
        response = client.post(approval_url(approval_id, "approve"), {"comment": "me"})
    assert response.status_code == 403
    assert "requested" in response.json()["detail"]
    assert client.get(approval_url(approval_id)).json()["status"] == "pending"


def test_deciding_twice_is_a_conflict(reviewer_api, second_reviewer_api, waiting_run):
    url = approval_url(approval_of(waiting_run), "reject")
    assert reviewer_api.post(url, {"comment": "no"}).status_code == 200
    with assert_unchanged():
        again = reviewer_api.post(url, {"comment": "still no"})
    assert again.status_code == 409
    assert "rejected" in again.json()["detail"]
    with assert_unchanged():
        other = second_reviewer_api.post(approval_url(approval_of(waiting_run), "approve"))
    assert other.status_code == 409


def test_unknown_and_malformed_approval_ids_are_404(reviewer_api, seeded):
    assert reviewer_api.get(approval_url(999999)).status_code == 404
    with assert_unchanged():
        assert reviewer_api.post(approval_url(999999, "approve")).status_code == 404
    assert reviewer_api.get(approval_url("abc")).status_code == 404


def test_decision_refuses_unknown_keys(reviewer_api, waiting_run):
    with assert_unchanged():
        response = reviewer_api.post(
            approval_url(approval_of(waiting_run), "approve"), {"verdict": "yes"}, format="json"
        )
    assert response.status_code == 400


def test_approval_list_queries_do_not_grow_with_the_page(
    operator_api, reviewer_api, django_capture_on_commit_callbacks, django_assert_max_num_queries
):
    def open_approvals(count: int) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            for _ in range(count):
                post_run(operator_api, **plan_body(email_step()))

    open_approvals(1)
    with django_assert_max_num_queries(8) as small:
        assert len(reviewer_api.get("/api/v1/approvals/").json()["results"]) == 1
    # Read now: each request clears the connection's query log.
    baseline = len(small)
    open_approvals(5)
    with django_assert_max_num_queries(baseline):
        assert len(reviewer_api.get("/api/v1/approvals/").json()["results"]) == 6
