"""GET /api/v1/runs/{id}/events/ returns a run's audit events in id order, after a given id."""

import pytest

from audit.models import AuditEvent
from tests.api.conftest import calc, plan_body, post_run, run_url

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished_run(operator_api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = post_run(operator_api, **plan_body(calc("1+1"), calc("2+2"))).json()
    return run


def test_events_come_in_id_order_with_their_fields(operator_api, finished_run):
    response = operator_api.get(run_url(finished_run["id"], "events"))
    assert response.status_code == 200
    data = response.json()
    events = data["events"]
    ids = [e["id"] for e in events]
    assert ids == sorted(ids)
    assert ids == list(
        AuditEvent.objects.filter(run_id=finished_run["id"])
        .order_by("id")
        .values_list("id", flat=True)
    )
    assert events[0]["verb"] == "run.created"
    assert events[-1]["verb"] == "run.succeeded"
    assert data["next_after"] == ids[-1]
    assert {"actor_kind", "from_state", "to_state", "payload", "hash", "prev_hash"} <= set(
        events[0]
    )
    assert all(e["run_id"] == finished_run["id"] for e in events)


def test_after_returns_only_later_events(operator_api, finished_run):
    url = run_url(finished_run["id"], "events")
    ids = [e["id"] for e in operator_api.get(url).json()["events"]]
    data = operator_api.get(url, {"after": ids[2]}).json()
    assert [e["id"] for e in data["events"]] == ids[3:]
    last = operator_api.get(url, {"after": ids[-1]}).json()
    assert last == {"events": [], "next_after": ids[-1]}


def test_limit_pages_through_events(operator_api, finished_run):
    url = run_url(finished_run["id"], "events")
    every = [e["id"] for e in operator_api.get(url).json()["events"]]
    seen: list[int] = []
    after = 0
    while True:
        page = operator_api.get(url, {"after": after, "limit": 3}).json()
        if not page["events"]:
            break
        assert len(page["events"]) <= 3
        seen += [e["id"] for e in page["events"]]
        after = page["next_after"]
    assert seen == every


def test_other_runs_events_are_left_out(operator_api, finished_run):
    other = post_run(operator_api, **plan_body(calc())).json()
    data = operator_api.get(run_url(other["id"], "events")).json()
    assert {e["run_id"] for e in data["events"]} == {other["id"]}


@pytest.mark.parametrize(
    "query", [{"after": "-1"}, {"after": "abc"}, {"limit": "0"}, {"limit": "1001"}]
)
def test_bad_after_or_limit_is_a_400(operator_api, finished_run, query):
    response = operator_api.get(run_url(finished_run["id"], "events"), query)
    assert response.status_code == 400
    assert response.json()["field"] == next(iter(query))
