"""``Idempotency-Key`` on POST: a retried request gets the first response, never a second run."""

from datetime import timedelta

import pytest
from django.utils import timezone

from projects.models import Project
from projects.services import membership_set
from runs.models import IdempotencyKey, IdempotencyKeyStatus, Run
from tests.api.conftest import RUNS_URL, post_run, run_url, token_client

pytestmark = pytest.mark.django_db

BODY = {"agent": "plan", "goal": "once", "steps": [{"tool": "echo", "args": {"value": 1}}]}


def post(client, body, key):
    return client.post(RUNS_URL, body, format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_same_key_and_body_replays_the_first_response(operator_api):
    first = post(operator_api, BODY, "k-1")
    again = post(operator_api, BODY, "k-1")
    assert first.status_code == again.status_code == 201
    assert again.json()["id"] == first.json()["id"]
    assert again["Idempotent-Replayed"] == "true"
    assert Run.objects.count() == 1


def test_same_key_with_another_body_is_a_422(operator_api):
    post(operator_api, BODY, "k-2")
    response = post(operator_api, {**BODY, "goal": "twice"}, "k-2")
    assert response.status_code == 422
    assert "different request" in response.json()["detail"]
    assert Run.objects.count() == 1


def test_same_key_while_the_first_request_is_in_flight_is_a_409(operator_api):
    first = post(operator_api, BODY, "k-4")
    # As if that first request were still being processed: its key is held, no response yet.
    IdempotencyKey.objects.filter(key="k-4").update(
        status=IdempotencyKeyStatus.IN_FLIGHT, response_status=None, response_body=None
    )
    response = post(operator_api, BODY, "k-4")
    assert first.status_code == 201
    assert response.status_code == 409


def test_an_in_flight_key_whose_request_died_is_taken_over(operator_api):
    post(operator_api, BODY, "k-7")
    IdempotencyKey.objects.filter(key="k-7").update(
        status=IdempotencyKeyStatus.IN_FLIGHT, locked_at=timezone.now() - timedelta(hours=1)
    )
    response = post(operator_api, BODY, "k-7")
    assert response.status_code == 201
    assert Run.objects.count() == 2


def test_an_expired_key_is_forgotten(operator_api):
    post(operator_api, BODY, "k-5")
    IdempotencyKey.objects.filter(key="k-5").update(expires_at=timezone.now())
    again = post(operator_api, BODY, "k-5")
    assert again.status_code == 201
    assert "Idempotent-Replayed" not in again
    assert Run.objects.count() == 2


def test_a_failed_request_does_not_hold_the_key(operator_api):
    bad = post(operator_api, {**BODY, "agent": "nope"}, "k-6")
    assert bad.status_code == 400
    good = post(operator_api, {**BODY, "agent": "nope"}, "k-6")
    assert good.status_code == 400
    assert not IdempotencyKey.objects.filter(key="k-6").exists()


def test_a_malformed_key_is_a_400(operator_api):
    response = post(operator_api, BODY, "x" * 256)
    assert response.status_code == 400
    assert response.json()["field"] == "Idempotency-Key"


def test_action_endpoints_honour_the_key(operator_api):
    run_id = post_run(operator_api, agent="client", goal="c").json()["id"]
    first = operator_api.post(
        run_url(run_id, "cancel"), {}, format="json", HTTP_IDEMPOTENCY_KEY="cancel-1"
    )
    again = operator_api.post(
        run_url(run_id, "cancel"), {}, format="json", HTTP_IDEMPOTENCY_KEY="cancel-1"
    )
    assert first.status_code == again.status_code == 200
    assert again["Idempotent-Replayed"] == "true"


def test_a_request_that_dies_before_its_answer_is_stored_is_done_once(
    operator_api, monkeypatch, django_capture_on_commit_callbacks
):
    from runs import idempotency

    with django_capture_on_commit_callbacks(execute=True):
        run = operator_api.post(RUNS_URL, {"agent": "client", "goal": "g"}, format="json").json()
    body = {"tool": "echo", "args": {"value": 1}}
    headers = {"HTTP_IDEMPOTENCY_KEY": "append-once"}
    real_finish = idempotency._finish

    def dies(*args, **kwargs):
        raise ConnectionResetError("the web process died here")

    monkeypatch.setattr(idempotency, "_finish", dies)
    with pytest.raises(ConnectionResetError):
        operator_api.post(run_url(run["id"], "steps"), body, format="json", **headers)
    monkeypatch.setattr(idempotency, "_finish", real_finish)
    with django_capture_on_commit_callbacks(execute=True):
        retried = operator_api.post(run_url(run["id"], "steps"), body, format="json", **headers)
    assert retried.status_code == 201
    # The work of the request that died rolled back with it: one step, not two.
    assert Run.objects.get(pk=run["id"]).steps.count() == 1


def test_a_key_sent_with_a_token_of_another_project_is_another_key(operator):
    beta = Project.objects.create(slug="beta", name="Beta")
    membership_set(project=beta, user=operator, role="operator")
    body = {"agent": "client", "goal": "one per project"}
    in_default, in_beta = token_client(operator), token_client(operator, beta)
    first = post(in_default, body, "k-8")
    other = post(in_beta, body, "k-8")
    assert first.status_code == other.status_code == 201
    assert "Idempotent-Replayed" not in other
    assert other.json()["id"] != first.json()["id"]
    assert other.json()["project"] == "beta"
    runs = dict(Run.objects.values_list("pk", "project__slug"))
    assert {str(pk): slug for pk, slug in runs.items()} == {
        first.json()["id"]: "default",
        other.json()["id"]: "beta",
    }
    # Each project's key replays its own first response, and only that.
    for client, original in ((in_default, first), (in_beta, other)):
        again = post(client, body, "k-8")
        assert (again.status_code, again.json(), again["Idempotent-Replayed"]) == (
            201,
            original.json(),
            "true",
        )
    # Another token of the same project is the same user in the same project: the same key.
    rotated = post(token_client(operator, beta), body, "k-8")
    assert (rotated.json()["id"], rotated["Idempotent-Replayed"]) == (other.json()["id"], "true")
    assert Run.objects.count() == 2
