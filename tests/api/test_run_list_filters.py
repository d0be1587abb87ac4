"""GET /api/v1/runs/ filters by goal text, tool, agent, requester, project, status and creation
time, combined; a run of a project the user cannot see never appears; bad values are a 400
naming the filter."""

import pytest
from rest_framework.test import APIClient

from tests.api.conftest import RUNS_URL, token_client
from testsupport.fleet import CALCULATE, at, create_run_at, make_fleet

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(operator):
    return make_fleet(operator)


@pytest.fixture
def viewer_api(fleet):
    """The viewer's browser session: every project they belong to (default and gamma)."""
    client = APIClient()
    client.force_login(fleet.viewer)
    return client


def listed(client, **params):
    response = client.get(RUNS_URL, params)
    assert response.status_code == 200, response.json()
    return [run["id"] for run in response.json()["results"]]


def ids(*runs):
    return [str(run.pk) for run in runs]


def test_without_filters_the_viewer_sees_the_runs_of_their_projects_only(viewer_api, fleet):
    assert listed(viewer_api) == ids(fleet.gamma, fleet.client, fleet.sums, fleet.mail)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"goal": "mail"}, ["gamma", "mail"]),
        ({"goal": "Q3 REPORT"}, ["mail"]),
        ({"tool": "send_email"}, ["gamma", "mail"]),
        ({"tool": "calculate"}, ["sums", "mail"]),
        ({"tool": "send"}, []),
        ({"agent": "client"}, ["client"]),
        ({"agent": "plan"}, ["gamma", "sums", "mail"]),
        ({"requester": "omar"}, ["client"]),
        ({"requester": "olivia"}, ["gamma", "sums", "mail"]),
        ({"project": "gamma"}, ["gamma"]),
        ({"project": "beta"}, []),
        ({"status": "cancelled"}, ["client"]),
        ({"status": "queued"}, ["gamma", "sums", "mail"]),
        ({"created_from": "2026-01-11T00:00:00Z"}, ["gamma", "client", "sums"]),
        ({"created_to": "2026-01-11T10:00:00Z"}, ["mail"]),
        (
            {"created_from": "2026-01-11T00:00", "created_to": "2026-01-12T00:00"},
            ["sums"],
        ),
        ({"goal": "mail", "tool": "calculate"}, ["mail"]),
        ({"tool": "send_email", "project": "default"}, ["mail"]),
        ({"requester": "olivia", "created_from": "2026-01-11T00:00:00+00:00"}, ["gamma", "sums"]),
        ({"agent": "plan", "status": "cancelled"}, []),
        ({"requester": "beth"}, []),
        ({"goal": "beta"}, []),
    ],
)
def test_each_filter_and_combination_lists_exactly_its_runs(viewer_api, fleet, params, expected):
    assert listed(viewer_api, **params) == ids(*(getattr(fleet, name) for name in expected))


def test_another_projects_runs_never_appear_whatever_the_filter(viewer_api, fleet):
    for params in ({"requester": "beth"}, {"goal": "beta report"}, {"project": "beta"}):
        assert str(fleet.beta.pk) not in listed(viewer_api, **params)


def test_a_token_confines_the_filters_to_its_project(fleet):
    client = token_client(fleet.viewer)
    assert listed(client, goal="mail") == ids(fleet.mail)
    assert listed(client, project="gamma") == []


@pytest.mark.parametrize(
    ("params", "field", "says"),
    [
        ({"created_from": "yesterday"}, "created_from", "valid date"),
        ({"created_to": "2026-13-01T00:00"}, "created_to", "valid date"),
        ({"status": "sleeping"}, "status", "sleeping"),
        ({"agent": "llm"}, "agent", "llm"),
        ({"goal": "a\x00b"}, "goal", "Null characters are not allowed"),
        ({"goal": "x" * 201}, "goal", "at most 200"),
        ({"tool": "t" * 129}, "tool", "at most 128"),
        ({"tool": ""}, "tool", "may not be empty"),
        (
            {"created_from": "2026-01-12T00:00", "created_to": "2026-01-11T00:00"},
            "created_to",
            "later than created_from",
        ),
    ],
)
def test_bad_filter_values_are_a_400_naming_the_filter(viewer_api, fleet, params, field, says):
    response = viewer_api.get(RUNS_URL, params)
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == field
    assert says in body["detail"]


def test_hostile_text_is_matched_as_text(viewer_api, fleet):
    assert listed(viewer_api, tool="calculate' OR '1'='1") == []
    assert listed(viewer_api, goal="%") == []
    assert listed(viewer_api, goal="_") == []
    # Moments at the ends of the calendar are compared, not a 500.
    assert listed(viewer_api, created_from="9999-12-31T23:59:59-23:00") == []
    assert len(listed(viewer_api, created_from="0001-01-01T00:00:00+14:00")) == 4


def test_filtered_cursor_pages_keep_the_filter(viewer_api, fleet):
    first = viewer_api.get(RUNS_URL, {"requester": "olivia", "page_size": 2}).json()
    assert [run["id"] for run in first["results"]] == ids(fleet.gamma, fleet.sums)
    assert "requester=olivia" in first["next"]
    second = viewer_api.get(first["next"]).json()
    assert [run["id"] for run in second["results"]] == ids(fleet.mail)


def test_filtered_list_queries_do_not_grow_with_the_page(
    viewer_api, fleet, operator, django_assert_max_num_queries
):
    params = {"goal": "run", "tool": "calculate", "requester": "olivia", "agent": "plan"}
    make = [CALCULATE, CALCULATE]
    create_run_at(operator, "run 0", make, at(1))
    with django_assert_max_num_queries(10) as small:
        assert len(viewer_api.get(RUNS_URL, params).json()["results"]) == 1
    baseline = len(small)
    for day in range(2, 22):
        create_run_at(operator, f"run {day}", make, at(day))
    with django_assert_max_num_queries(baseline):
        assert len(viewer_api.get(RUNS_URL, params).json()["results"]) == 21
