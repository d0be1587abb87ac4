"""State schemas over the REST API: project admins register versions
(``/api/v1/state-schemas/``), runs declare one, writes that violate it are refused with the
path and rule, and an old state is read upgraded on the fly without anything written."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentops.actors import Actor
from audit.models import AuditEvent
from projects.models import Project
from projects.roles import Role
from runs.control.state import run_state_write
from runs.models import Run, RunStatus, StateSchema, StateVersion
from runs.state_migrations import state_migration
from tests.api.conftest import RUNS_URL, run_url, token_client
from testsupport.factories import EMAIL_ARGS, make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

SCHEMAS_URL = "/api/v1/state-schemas/"
V1 = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "seats": {"type": "integer", "minimum": 0}},
    "required": ["name"],
    "additionalProperties": False,
}
V2 = {
    "type": "object",
    "properties": {
        "passenger": {"type": "string"},
        "seats": {"type": "integer", "minimum": 0},
        "cabin": {"enum": ["economy", "business"]},
    },
    "required": ["passenger", "cabin"],
    "additionalProperties": False,
}
V2_STEPS = [
    {"op": "rename", "from": "/name", "to": "/passenger"},
    {"op": "default", "path": "/cabin", "value": "economy"},
]


@state_migration("booking", 3)
def upper_cabin(state: dict[str, Any]) -> dict[str, Any]:
    """booking v2 -> v3: the cabin in capitals."""
    state["cabin"] = state["cabin"].upper()
    return state


@pytest.fixture
def admin_api(seeded):
    return token_client(make_user("ada", Role.ADMIN))


def register(api: Any, **body: Any) -> Any:
    return api.post(SCHEMAS_URL, {"name": "booking", **body}, format="json")


def client_run(api: Any, **declared: Any) -> dict[str, Any]:
    body = {"agent": "client", "goal": "book", "state_schema": {"name": "booking", **declared}}
    response = api.post(RUNS_URL, body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def put(api: Any, run_id: str, state: Any, version: int) -> Any:
    url = run_url(run_id, "state")
    return api.put(
        url,
        json.dumps(state),
        content_type="application/json",
        HTTP_IF_MATCH=f'"{run_id}:{version}"',
    )


def test_an_admin_registers_versions_in_order_each_after_the_first_with_a_migration(admin_api):
    first = register(admin_api, schema=V1, description="a booking")
    assert first.status_code == 201, first.json()
    assert {k: first.json()[k] for k in ("project", "name", "version", "schema")} == {
        "project": "default",
        "name": "booking",
        "version": 1,
        "schema": V1,
    }
    assert first.json()["created_by_name"] == "ada"
    with assert_unchanged():
        missing = register(admin_api, schema=V2)
        skipped = register(admin_api, schema=V2, version=3, migration_steps=V2_STEPS)
        unknown = register(admin_api, schema=V2, migration_function="os.system")
    assert (missing.status_code, missing.json()["field"]) == (400, "migration_steps")
    assert (skipped.status_code, skipped.json()["field"]) == (400, "version")
    assert (unknown.status_code, unknown.json()["field"]) == (400, "migration_function")
    second = register(admin_api, schema=V2, migration_steps=V2_STEPS)
    assert (second.status_code, second.json()["version"]) == (201, 2)
    third = register(admin_api, schema=V2, migration_function=f"{__name__}.upper_cabin")
    assert (third.status_code, third.json()["version"]) == (201, 3), third.json()
    events = AuditEvent.objects.filter(verb="state_schema.created").order_by("id")
    assert [e.payload["version"] for e in events] == [1, 2, 3]
    assert events[1].payload["migration_steps"] == V2_STEPS
    listed = admin_api.get(SCHEMAS_URL, {"name": "booking"}).json()["results"]
    assert [row["version"] for row in listed] == [3, 2, 1]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"schema": {"type": "nope"}}, "schema", "is not valid"),
        ({"schema": {"$ref": "https://example.com/s.json"}}, "schema", "https://example.com"),
        ({"schema": {"type": "string", "pattern": "(a)\\1"}}, "schema", "RE2"),
        ({"schema": []}, "schema", "JSON Schema object"),
        ({"schema": V1, "migration_steps": []}, "migration_steps", "version 1"),
    ],
)
def test_a_schema_that_may_not_be_used_is_a_400_and_nothing_is_stored(
    admin_api, body, field, words
):
    with assert_unchanged():
        response = register(admin_api, **body)
    assert (response.status_code, response.json()["field"]) == (400, field), response.json()
    assert words in response.json()["detail"]


@pytest.mark.parametrize(
    "steps",
    [
        [{"op": "copy", "from": "/a", "path": "/b"}],
        [{"op": "rename", "from": "/a", "to": "/b/c"}],
        [{"op": "remove", "path": "no-slash"}],
        [{"op": "move", "from": "/a", "to": "/a/b"}],
        [{"op": "default", "path": "/a"}],
    ],
)
def test_declarative_steps_that_cannot_work_are_a_400(admin_api, steps):
    assert register(admin_api, schema=V1).status_code == 201
    with assert_unchanged():
        response = register(admin_api, schema=V2, migration_steps=steps)
    assert (response.status_code, response.json()["field"]) == (400, "migration_steps")


def test_viewers_and_operators_do_not_register_and_other_projects_see_nothing(
    admin_api, operator_api
):
    viewer = token_client(make_user("vera", Role.VIEWER))
    with assert_unchanged():
        assert register(viewer, schema=V1).status_code == 403
        assert register(operator_api, schema=V1).status_code == 403
    created = register(admin_api, schema=V1).json()
    assert viewer.get(f"{SCHEMAS_URL}{created['id']}/").status_code == 200
    other = Project.objects.create(slug="other", name="Other")
    outsider = token_client(make_user("otto", Role.ADMIN, project=other), other)
    assert outsider.get(f"{SCHEMAS_URL}{created['id']}/").status_code == 404
    assert outsider.get(SCHEMAS_URL).json()["results"] == []
    # The outsider's own schema of the same name is theirs alone.
    assert register(outsider, schema=V2).json()["version"] == 1
    with assert_unchanged():
        response = outsider.post(
            RUNS_URL,
            {"agent": "client", "goal": "g", "state_schema": {"name": "booking", "version": 2}},
            format="json",
        )
    assert (response.status_code, response.json()["field"]) == (400, "state_schema")


def test_a_write_that_violates_the_schema_is_a_400_with_path_and_rule(admin_api, operator_api):
    register(admin_api, schema=V1)
    run = client_run(operator_api)
    assert Run.objects.get(pk=run["id"]).state_schema.version == 1
    with assert_unchanged():
        wrong_type = put(operator_api, run["id"], {"name": "Ann", "seats": "two"}, 0)
        missing = put(operator_api, run["id"], {"seats": 2}, 0)
    assert (wrong_type.status_code, wrong_type.json()["field"]) == (400, "state")
    assert "booking v1: seats: 'two' is not of type 'integer'" in wrong_type.json()["detail"]
    assert missing.status_code == 400
    assert "(root): 'name' is a required property" in missing.json()["detail"]
    ok = put(operator_api, run["id"], {"name": "Ann", "seats": 2}, 0)
    assert ok.json() == {
        "version": 1,
        "state": {"name": "Ann", "seats": 2},
        "schema_version": 1,
        "upgraded_from": None,
    }


def old_run(admin_api: Any, operator_api: Any) -> dict[str, Any]:
    """A client run whose state was written under booking v1, now that v2 exists."""
    register(admin_api, schema=V1)
    run = client_run(operator_api)
    assert put(operator_api, run["id"], {"name": "Ann", "seats": 2}, 0).status_code == 200
    assert register(admin_api, schema=V2, migration_steps=V2_STEPS).status_code == 201
    return run


def test_an_old_state_is_read_upgraded_and_nothing_is_written(admin_api, operator_api):
    run = old_run(admin_api, operator_api)
    with assert_unchanged():
        current = operator_api.get(run_url(run["id"], "state"))
        stored = operator_api.get(run_url(run["id"], "state"), {"version": 1})
    assert current.status_code == 200
    assert current.json() == {
        "version": 1,
        "state": {"passenger": "Ann", "seats": 2, "cabin": "economy"},
        "schema_version": 2,
        "upgraded_from": 1,
    }
    assert current["Agentops-State-Upgraded"] == "1 -> 2"
    assert current["ETag"] == f'"{run["id"]}:1"'
    assert stored.json() == {
        "version": 1,
        "state": {"name": "Ann", "seats": 2},
        "schema_version": 1,
        "upgraded_from": None,
    }
    assert "Agentops-State-Upgraded" not in stored


def test_a_write_on_an_old_state_applies_to_it_upgraded_and_stores_the_new_version(
    admin_api, operator_api
):
    run = old_run(admin_api, operator_api)
    url = run_url(run["id"], "state")
    response = operator_api.patch(
        url,
        json.dumps({"seats": 3}),
        content_type="application/merge-patch+json",
        HTTP_IF_MATCH=f'"{run["id"]}:1"',
    )
    assert response.status_code == 200, response.json()
    assert response.json()["state"] == {"passenger": "Ann", "seats": 3, "cabin": "economy"}
    assert StateVersion.objects.get(run_id=run["id"], version=2).schema_version == 2
    event = AuditEvent.objects.filter(run_id=run["id"], verb="run.state_written").last()
    assert (event.payload["schema_version"], event.payload["upgraded_from"]) == (2, 1)
    # A write in the old layout no longer matches.
    with assert_unchanged():
        old = put(operator_api, run["id"], {"name": "Bob"}, 2)
    assert old.status_code == 400
    assert "booking v2" in old.json()["detail"]


def test_a_state_that_cannot_be_upgraded_is_a_409_not_a_500(admin_api, operator_api):
    register(admin_api, schema=V1)
    run = client_run(operator_api)
    assert put(operator_api, run["id"], {"name": "Ann"}, 0).status_code == 200
    # v2 demands a passenger but its only step adds a cabin.
    steps = [{"op": "default", "path": "/cabin", "value": "economy"}]
    assert register(admin_api, schema=V2, migration_steps=steps).status_code == 201
    with assert_unchanged():
        read = operator_api.get(run_url(run["id"], "state"))
        write = put(operator_api, run["id"], {"passenger": "Ann", "cabin": "economy"}, 1)
    assert read.status_code == 409
    assert "'passenger' is a required property" in read.json()["detail"]
    assert write.status_code == 409
    assert operator_api.get(run_url(run["id"], "state"), {"version": 1}).status_code == 200


def test_a_fork_of_an_old_run_starts_upgraded_on_the_newest_version(
    admin_api, operator_api, django_capture_on_commit_callbacks
):
    run = old_run(admin_api, operator_api)
    with django_capture_on_commit_callbacks(execute=True):
        forked = operator_api.post(run_url(run["id"], "fork"), {"from_index": 0}, format="json")
    assert forked.status_code == 201, forked.json()
    fork = Run.objects.get(pk=forked.json()["id"])
    assert (fork.state_schema.name, fork.state_schema.version) == ("booking", 2)
    state = operator_api.get(run_url(fork.pk, "state"))
    assert state.json() == {
        "version": 0,
        "state": {"passenger": "Ann", "seats": 2, "cabin": "economy"},
        "schema_version": 2,
        "upgraded_from": None,
    }
    assert StateVersion.objects.get(run=fork, version=0).operation == "fork"


def test_a_failed_old_run_resumes_and_writes_under_the_newest_version(
    admin_api, operator, operator_api, django_capture_on_commit_callbacks
):
    register(admin_api, schema=V1)
    steps = [
        {"tool": "flaky", "args": {"failures": 5}},
        {"tool": "send_email", "args": EMAIL_ARGS},
    ]
    body = {"agent": "plan", "goal": "book", "steps": steps, "state_schema": {"name": "booking"}}
    with django_capture_on_commit_callbacks() as start:
        run_id = operator_api.post(RUNS_URL, body, format="json").json()["id"]
    run_state_write(
        run_id=run_id,
        actor=Actor.for_user(operator),
        base_version=0,
        operation="put",
        document={"name": "Ann"},
    )
    with django_capture_on_commit_callbacks(execute=True):
        for callback in start:
            callback()
    assert Run.objects.get(pk=run_id).status == RunStatus.FAILED
    register(admin_api, schema=V2, migration_steps=V2_STEPS)

    with django_capture_on_commit_callbacks(execute=True):
        resumed = operator_api.post(run_url(run_id, "resume"), {}, format="json")
    assert resumed.status_code == 200, resumed.json()
    assert Run.objects.get(pk=run_id).status == RunStatus.WAITING
    assert operator_api.get(run_url(run_id, "state")).json()["upgraded_from"] == 1
    written = put(operator_api, run_id, {"passenger": "Ann", "cabin": "business"}, 1)
    assert written.status_code == 200, written.json()
    assert written.json()["schema_version"] == 2
    assert StateSchema.objects.filter(name="booking").count() == 2


def test_a_retried_registration_with_its_idempotency_key_registers_one_version(admin_api):
    first = admin_api.post(
        SCHEMAS_URL, {"name": "booking", "schema": V1}, format="json", HTTP_IDEMPOTENCY_KEY="k1"
    )
    again = admin_api.post(
        SCHEMAS_URL, {"name": "booking", "schema": V1}, format="json", HTTP_IDEMPOTENCY_KEY="k1"
    )
    assert (first.status_code, again.status_code) == (201, 201)
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert StateSchema.objects.filter(name="booking").count() == 1


def test_a_version_past_what_a_state_version_can_record_is_a_400(admin_api):
    StateSchema.objects.create(
        project_id=Project.objects.get(slug="default").pk,
        name="booking",
        version=32767,
        schema=V1,
        created_by_kind="system",
    )
    with assert_unchanged():
        response = register(admin_api, schema=V1, migration_steps=[])
    assert (response.status_code, response.json()["field"]) == (400, "version")
    assert "at most 32767 versions" in response.json()["detail"]
