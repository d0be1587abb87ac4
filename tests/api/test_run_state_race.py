"""Two agents racing on one run's state over the REST API, 200 threads: every write is applied
or refused with 412, none is lost, and the state is the replay of the applied writes in
version order."""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

import json_merge_patch
import jsonpatch
import pytest
from django.db import connections

from agentops.actors import Actor
from audit.models import AuditEvent
from projects.roles import Role
from runs.control.create import run_create
from runs.models import StateVersion
from tests.api.conftest import run_url, token_client
from testsupport.concurrency import run_together
from testsupport.factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 200
# Requests in flight at once: each holds a database connection, and the shared PostgreSQL
# allows 100 in all (every thread still races; this only bounds the connections).
IN_FLIGHT = 16
# Writes a refused thread makes again (re-reading the state first) before giving up.
ATTEMPTS = 3
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def test_two_writers_racing_never_lose_an_update(seeded, django_capture_on_commit_callbacks):
    agents = [make_user(name, Role.OPERATOR) for name in ("agent-a", "agent-b")]
    with django_capture_on_commit_callbacks(execute=True):
        run = run_create(actor=Actor.for_user(agents[0]), agent="client", goal="race")
    apis = [token_client(agent) for agent in agents]
    url = run_url(run.pk, "state")
    first = apis[0].put(
        url, '{"log": [], "by": {}}', content_type="application/json", HTTP_IF_MATCH=f'"{run.pk}:0"'
    )
    assert first.status_code == 200
    slots = threading.BoundedSemaphore(IN_FLIGHT)
    # Every thread has read the state before any writes: their first writes all race on it.
    all_read = threading.Barrier(THREADS)

    def patch_of(i: int) -> tuple[str, Any]:
        if i % 2:
            return MERGE, {"by": {f"w{i}": i}, "last": i}
        return JSON_PATCH, [{"op": "add", "path": "/log/-", "value": i}]

    def request(call: Any) -> Any:
        with slots:
            try:
                return call()
            finally:
                connections.close_all()

    def writer(i: int) -> list[tuple[int, int | None, str, Any]]:
        api = apis[i % 2]
        media, patch = patch_of(i)
        outcomes = []
        for attempt in range(ATTEMPTS):
            read = request(lambda: api.get(url))
            if attempt == 0:
                all_read.wait()
            response = request(
                lambda read=read: api.patch(
                    url, json.dumps(patch), content_type=media, HTTP_IF_MATCH=read["ETag"]
                )
            )
            version = response.json().get("version") if response.status_code == 200 else None
            outcomes.append((response.status_code, version, media, patch))
            if response.status_code == 200:
                break
        return outcomes

    results = run_together([lambda i=i: writer(i) for i in range(THREADS)])
    writes = [outcome for outcomes in results for outcome in outcomes]
    codes = {code for code, *_ in writes}
    assert codes <= {200, 412}, codes
    applied = sorted(
        (version, media, patch) for code, version, media, patch in writes if code == 200
    )
    refused = [w for w in writes if w[0] == 412]
    # All first writes were made against version 1: exactly one of them was applied.
    assert len([r[0] for r in results if r[0][0] == 200]) == 1
    assert refused
    # The applied writes made versions 2, 3, ... with no gap and no version twice.
    assert [version for version, _, _ in applied] == list(range(2, len(applied) + 2))

    rows = list(StateVersion.objects.filter(run=run).order_by("version"))
    assert [row.version for row in rows] == list(range(1, len(applied) + 2))
    replay: Any = {"log": [], "by": {}}
    for (version, media, patch), row in zip(applied, rows[1:], strict=True):
        if media == MERGE:
            replay = json_merge_patch.merge(copy.deepcopy(replay), patch)
        else:
            replay = jsonpatch.apply_patch(replay, patch)
        assert row.state == replay, version
    final = apis[1].get(url).json()
    assert final["version"] == len(applied) + 1
    assert final["state"] == replay
    # Each applied write's own change is in the final state.
    for _, media, patch in applied:
        if media == MERGE:
            (key,) = patch["by"]
            assert final["state"]["by"][key] == patch["by"][key]
        else:
            assert patch[0]["value"] in final["state"]["log"]
    # One audit event per applied write, none for a refused one.
    events = AuditEvent.objects.filter(run_id=run.pk, verb="run.state_written").order_by("id")
    assert [event.payload["version"] for event in events] == [row.version for row in rows]
    assert [event.payload["hash_after"] for event in events] == [row.state_hash for row in rows]
