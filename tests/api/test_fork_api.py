"""``POST /api/v1/runs/{id}/fork/``."""

import pytest

from tests.api.conftest import post_run, run_url
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

STEPS = [{"tool": "echo", "args": {"value": 1}}, {"tool": "calculate", "args": {"expression": "2"}}]


def test_fork_creates_a_run_that_reuses_earlier_results(
    operator_api, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        source = post_run(operator_api, agent="plan", goal="g", steps=STEPS).json()
    with django_capture_on_commit_callbacks(execute=True):
        response = operator_api.post(
            run_url(source["id"], "fork"), {"from_index": 1}, format="json"
        )
    assert response.status_code == 201
    fork = operator_api.get(run_url(response.json()["id"])).json()
    assert fork["status"] == "succeeded"
    assert [s["attempts"] for s in fork["steps"]] == [0, 1]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"from_index": 7}, "from_index"),
        ({"from_index": -1}, "from_index"),
        ({}, "from_index"),
        ({"from_index": 1, "args": {"expression": 3}}, "args"),
        ({"from_index": 0, "x": 1}, "x"),
    ],
)
def test_bad_fork_requests_are_400_naming_the_field(
    operator_api, django_capture_on_commit_callbacks, body, field
):
    with django_capture_on_commit_callbacks(execute=True):
        source = post_run(operator_api, agent="plan", goal="g", steps=STEPS).json()
    with assert_unchanged():
        response = operator_api.post(run_url(source["id"], "fork"), body, format="json")
    assert response.status_code == 400
    assert field in str(response.json())


def test_reviewers_may_not_fork(reviewer_api, operator_api):
    source = post_run(operator_api, agent="client", goal="g").json()
    with assert_unchanged():
        response = reviewer_api.post(
            run_url(source["id"], "fork"), {"from_index": 0}, format="json"
        )
    assert response.status_code == 403
