"""GET /api/v1/runs/ lists runs newest first, filtered and in cursor pages, in constant queries."""

import pytest

from agentops.actors import Actor
from runs.control.lifecycle import run_cancel
from tests.api.conftest import calc
from testsupport.factories import make_run

pytestmark = pytest.mark.django_db


def make_runs(user, count, *, agent="plan", steps=2):
    return [
        make_run(
            user,
            agent=agent,
            goal=f"{agent} {i}",
            steps=[calc(f"{i}+{n}") for n in range(steps)] if agent == "plan" else None,
        )
        for i in range(count)
    ]


def test_runs_are_listed_newest_first_with_step_summaries(operator_api, operator):
    runs = make_runs(operator, 3)
    data = operator_api.get("/api/v1/runs/").json()
    assert [r["id"] for r in data["results"]] == [str(r.pk) for r in reversed(runs)]
    first = data["results"][0]
    assert first["requested_by"] == operator.username
    assert [(s["index"], s["tool"], s["status"]) for s in first["steps"]] == [
        (0, "calculate", "pending"),
        (1, "calculate", "pending"),
    ]
    assert "conversation" not in first


def test_status_filter(operator_api, operator):
    runs = make_runs(operator, 3)
    run_cancel(run_id=runs[1].pk, actor=Actor.for_user(operator))
    data = operator_api.get("/api/v1/runs/", {"status": "cancelled"}).json()
    assert [r["id"] for r in data["results"]] == [str(runs[1].pk)]


def test_agent_filter(operator_api, operator):
    make_runs(operator, 2)
    (client_run,) = make_runs(operator, 1, agent="client")
    data = operator_api.get("/api/v1/runs/", {"agent": "client"}).json()
    assert [r["id"] for r in data["results"]] == [str(client_run.pk)]


@pytest.mark.parametrize(("name", "value"), [("status", "sleeping"), ("agent", "llm")])
def test_unknown_filter_value_is_a_400_saying_why(operator_api, name, value):
    response = operator_api.get("/api/v1/runs/", {name: value})
    assert response.status_code == 400
    assert response.json()["field"] == name
    assert value in response.json()["detail"]


def test_cursor_pages_cover_every_run_once(operator_api, operator):
    runs = make_runs(operator, 5, steps=1)
    seen: list[str] = []
    url = "/api/v1/runs/?page_size=2"
    while url:
        data = operator_api.get(url).json()
        assert len(data["results"]) <= 2
        seen += [r["id"] for r in data["results"]]
        url = data["next"]
    assert seen == [str(r.pk) for r in reversed(runs)]


def test_list_queries_do_not_grow_with_the_page(
    operator_api, operator, django_assert_max_num_queries
):
    make_runs(operator, 2, steps=3)
    with django_assert_max_num_queries(8) as small:
        assert len(operator_api.get("/api/v1/runs/").json()["results"]) == 2
    # Read now: each request clears the connection's query log.
    baseline = len(small)
    make_runs(operator, 20, steps=3)
    with django_assert_max_num_queries(baseline):
        assert len(operator_api.get("/api/v1/runs/").json()["results"]) == 22
