"""Two POSTs with one ``Idempotency-Key`` at the same moment, each on its own connection: one
run is created, and the key answers everyone with that run afterwards."""

import pytest

from runs.models import Run
from tests.api.conftest import RUNS_URL, token_client
from testsupport.concurrency import run_together

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"agent": "plan", "goal": "once", "steps": [{"tool": "echo", "args": {"value": 1}}]}


def test_two_concurrent_posts_with_one_key_create_one_run(operator, held_messages):
    client = token_client(operator)
    clients = [client, client]
    responses = run_together(
        [
            lambda c=c: c.post(RUNS_URL, BODY, format="json", HTTP_IDEMPOTENCY_KEY="same")
            for c in clients
        ]
    )
    assert Run.objects.count() == 1
    run_id = str(Run.objects.get().pk)
    codes = sorted(r.status_code for r in responses)
    # The loser either found the key in flight (409: retry later) or replayed the finished
    # first response; either way it created nothing.
    assert codes in ([201, 201], [201, 409]), codes
    assert [r.json()["id"] for r in responses if r.status_code == 201] == [run_id] * codes.count(
        201
    )
    replayed = [r for r in responses if r.status_code == 201 and r.get("Idempotent-Replayed")]
    assert len(replayed) == codes.count(201) - 1
    retry = clients[0].post(RUNS_URL, BODY, format="json", HTTP_IDEMPOTENCY_KEY="same")
    assert (retry.status_code, retry.json()["id"], retry["Idempotent-Replayed"]) == (
        201,
        run_id,
        "true",
    )
    assert Run.objects.count() == 1
