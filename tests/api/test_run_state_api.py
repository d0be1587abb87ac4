"""The agent's own state over the REST API: ``GET|PUT|PATCH /api/v1/runs/{id}/state/``, each
write a new kept version made against the ``If-Match`` version, audited, apart from the
executor's bookkeeping; refused writes change nothing."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest

from agentops.actors import Actor
from audit.models import AuditEvent
from projects.models import Project
from projects.roles import Role
from runs.control.lifecycle import run_cancel
from runs.control.state import MAX_STATE_BYTES, MAX_STATE_DEPTH
from runs.models import Run, StateVersion, state_hash
from tests.api.conftest import run_url, token_client
from testsupport.factories import make_run, make_user
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


@pytest.fixture
def client_run(operator, django_capture_on_commit_callbacks):
    return make_run(
        operator, agent="client", goal="keep state", capture=django_capture_on_commit_callbacks
    )


def etag(run: Run, version: int) -> str:
    return f'"{run.pk}:{version}"'


def write(
    api: Any,
    run: Run,
    body: Any,
    *,
    version: int | None,
    method: str = "put",
    media: str = "application/json",
    query: str = "",
) -> Any:
    headers = {} if version is None else {"HTTP_IF_MATCH": etag(run, version)}
    send = getattr(api, method)
    url = run_url(run.pk, "state") + query
    return send(url, json.dumps(body), content_type=media, **headers)


def test_a_new_run_has_version_0_the_empty_state(operator_api, client_run):
    response = operator_api.get(run_url(client_run.pk, "state"))
    assert response.status_code == 200
    assert response.json() == {
        "version": 0,
        "state": {},
        "schema_version": 1,
        "upgraded_from": None,
    }
    assert response["ETag"] == etag(client_run, 0)


def test_put_then_both_patch_kinds_each_make_a_kept_version(operator_api, client_run):
    plan = {"goal": "refund", "plan": ["look up", "refund"], "notes": {"a": 1, "b": 2}}
    put = write(operator_api, client_run, plan, version=0)
    assert put.status_code == 200, put.json()
    assert put.json() == {"version": 1, "state": plan, "schema_version": 1, "upgraded_from": None}
    assert put["ETag"] == etag(client_run, 1)

    merged = write(
        operator_api,
        client_run,
        {"notes": {"a": None, "c": 3}, "goal": "refund twice"},
        version=1,
        method="patch",
        media=MERGE,
    )
    assert merged.status_code == 200, merged.json()
    after_merge = {"goal": "refund twice", "plan": ["look up", "refund"], "notes": {"b": 2, "c": 3}}
    assert merged.json()["state"] == after_merge

    patched = write(
        operator_api,
        client_run,
        [
            {"op": "test", "path": "/plan/0", "value": "look up"},
            {"op": "add", "path": "/plan/-", "value": "tell"},
            {"op": "remove", "path": "/notes/b"},
        ],
        version=2,
        method="patch",
        media=JSON_PATCH,
    )
    assert patched.status_code == 200, patched.json()
    final = {"goal": "refund twice", "plan": ["look up", "refund", "tell"], "notes": {"c": 3}}
    assert patched.json() == {
        "version": 3,
        "state": final,
        "schema_version": 1,
        "upgraded_from": None,
    }

    # Every version is kept and readable.
    for version, state in [(0, {}), (1, plan), (2, after_merge), (3, final)]:
        read = operator_api.get(run_url(client_run.pk, "state") + f"?version={version}")
        assert (read.status_code, read.json()["state"], read["ETag"]) == (
            200,
            state,
            etag(client_run, version),
        )
    assert operator_api.get(run_url(client_run.pk, "state")).json()["version"] == 3
    missing = operator_api.get(run_url(client_run.pk, "state") + "?version=4")
    assert (missing.status_code, missing.json()) == (404, {"detail": "state version not found"})


def test_each_write_is_audited_with_hashes_writer_step_and_rationale(
    operator, operator_api, client_run
):
    step = operator_api.post(
        run_url(client_run.pk, "steps"),
        {"tool": "lookup", "args": {}, "executor": "client"},
        format="json",
    )
    assert step.status_code == 201
    response = write(
        operator_api,
        client_run,
        {"seen": "order 7"},
        version=0,
        query="?step_index=0&rationale=" + quote("the lookup found order 7 — ünïcode"),
    )
    assert response.status_code == 200, response.json()
    event = AuditEvent.objects.get(verb="run.state_written")
    assert (event.run_id, event.actor_name, event.actor_kind) == (
        client_run.pk,
        operator.username,
        "api_client",
    )
    assert event.payload == {
        "version": 1,
        "base_version": 0,
        "operation": "put",
        "hash_before": state_hash({}),
        "hash_after": state_hash({"seen": "order 7"}),
        "bytes": len('{"seen":"order 7"}'),
        "step_index": 0,
        "rationale": "the lookup found order 7 — ünïcode",
    }
    row = StateVersion.objects.get(run=client_run, version=1)
    assert (row.writer_name, row.writer_id, row.step_index, row.operation) == (
        operator.username,
        str(operator.pk),
        0,
        "put",
    )


def test_the_executors_bookkeeping_and_the_agents_state_stay_apart(operator_api, client_run):
    Run.objects.filter(pk=client_run.pk).update(state={"completed_steps": 4})
    response = write(operator_api, client_run, {"completed_steps": "mine"}, version=0)
    assert response.status_code == 200
    assert Run.objects.get(pk=client_run.pk).state == {"completed_steps": 4}
    run = operator_api.get(run_url(client_run.pk)).json()
    assert run["state"] == {"completed_steps": 4}
    assert operator_api.get(run_url(client_run.pk, "state")).json()["state"] == {
        "completed_steps": "mine"
    }


def test_a_stale_if_match_is_412_with_the_current_version_and_changes_nothing(
    operator_api, client_run
):
    assert write(operator_api, client_run, {"n": 1}, version=0).status_code == 200
    assert write(operator_api, client_run, {"n": 2}, version=1).status_code == 200
    for body, method, media in [
        ({"n": 3}, "put", "application/json"),
        ({"n": 3}, "patch", MERGE),
        ([{"op": "replace", "path": "/n", "value": 3}], "patch", JSON_PATCH),
    ]:
        with assert_unchanged():
            response = write(operator_api, client_run, body, version=1, method=method, media=media)
        assert response.status_code == 412
        assert response.json()["version"] == 2
        assert response["ETag"] == etag(client_run, 2)
    assert list(StateVersion.objects.values_list("version", "state")) == [
        (1, {"n": 1}),
        (2, {"n": 2}),
    ]


@pytest.mark.parametrize(
    ("if_match", "code"),
    [
        (None, 428),
        ("*", 428),
        ("W/", 412),  # a weak tag never matches (strong comparison)
        ("other-run", 412),
        ("1", 400),  # not a quoted entity tag
        ('"a", "b"', 400),
    ],
)
def test_if_match_is_required_and_must_name_this_runs_version(
    operator_api, client_run, if_match, code
):
    headers: dict[str, str] = {}
    if if_match == "W/":
        headers["HTTP_IF_MATCH"] = "W/" + etag(client_run, 0)
    elif if_match == "other-run":
        headers["HTTP_IF_MATCH"] = '"00000000-0000-0000-0000-000000000000:0"'
    elif if_match is not None:
        headers["HTTP_IF_MATCH"] = if_match
    with assert_unchanged():
        response = operator_api.put(
            run_url(client_run.pk, "state"),
            '{"x": 1}',
            content_type="application/json",
            **headers,
        )
    assert response.status_code == code, response.json()
    if code == 412:
        assert response.json()["version"] == 0


HOSTILE_PATCHES = [
    # Paths into arrays out of range, and through what is not there.
    (JSON_PATCH, [{"op": "add", "path": "/list/5", "value": 1}], 409, "outside of list"),
    (JSON_PATCH, [{"op": "remove", "path": "/list/9"}], 409, "non-existent"),
    (JSON_PATCH, [{"op": "replace", "path": "/list/-1", "value": 1}], 409, "-1"),
    (JSON_PATCH, [{"op": "add", "path": "/missing/deeper", "value": 1}], 409, "missing"),
    (JSON_PATCH, [{"op": "test", "path": "/list/0", "value": 2}], 409, "not equal"),
    (JSON_PATCH, [{"op": "move", "from": "/obj", "path": "/obj/a/b"}], 409, "children"),
    # "/" keys: a pointer must start with "/", "~" must be escaped.
    (JSON_PATCH, [{"op": "add", "path": "a/b", "value": 1}], 400, "start with /"),
    (JSON_PATCH, [{"op": "add", "path": "/~2", "value": 1}], 400, "escape"),
    (JSON_PATCH, [{"op": "bogus", "path": "/a"}], 400, "Unknown operation"),
    (JSON_PATCH, [{"op": "add", "path": "/a"}], 400, "value"),
    (JSON_PATCH, [{"op": "add", "path": 5, "value": 1}], 400, "path"),
    (JSON_PATCH, {"op": "add"}, 400, "list of 1"),
    (JSON_PATCH, [], 400, "list of 1"),
    # The whole state replaced by what is not an object.
    (JSON_PATCH, [{"op": "replace", "path": "", "value": [1]}], 400, "JSON object"),
    (MERGE, [1, 2], 400, "JSON object"),
    (MERGE, None, 400, "JSON object"),
    (MERGE, "text", 400, "JSON object"),
]


@pytest.mark.parametrize(("media", "patch", "code", "says"), HOSTILE_PATCHES)
def test_hostile_patches_are_refused_and_change_nothing(
    operator_api, client_run, media, patch, code, says
):
    start = {"list": [1, 2], "obj": {"a": {"b": 1}}, "a/b": "slash key"}
    assert write(operator_api, client_run, start, version=0).status_code == 200
    with assert_unchanged():
        response = write(operator_api, client_run, patch, version=1, method="patch", media=media)
    assert response.status_code == code, response.json()
    assert says in response.json()["detail"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ('{"x": "a\\u0000b"}', "NUL"),
        ('{"x": "\\ud800"}', "surrogates"),
        ('{"\\udfff": 1}', "surrogates"),
        ('{"x": ' + "[" * 10_000 + "]" * 10_000 + "}", "nested deeper"),
        ('{"x": 1e999}', "finite"),
    ],
)
@pytest.mark.parametrize("media", ["application/json", MERGE, JSON_PATCH])
def test_hostile_json_is_400_on_every_write(operator_api, client_run, body, says, media):
    if media == JSON_PATCH:
        body = '[{"op": "add", "path": "/x", "value": ' + body + "}]"
    method = "put" if media == "application/json" else "patch"
    with assert_unchanged():
        response = getattr(operator_api, method)(
            run_url(client_run.pk, "state"),
            body,
            content_type=media,
            HTTP_IF_MATCH=etag(client_run, 0),
        )
    assert response.status_code == 400
    assert says in response.json()["detail"]


def test_slash_and_tilde_keys_are_reached_by_escaped_pointers(operator_api, client_run):
    assert write(operator_api, client_run, {"a/b": 1, "c~d": 2}, version=0).status_code == 200
    response = write(
        operator_api,
        client_run,
        [
            {"op": "replace", "path": "/a~1b", "value": 10},
            {"op": "remove", "path": "/c~0d"},
        ],
        version=1,
        method="patch",
        media=JSON_PATCH,
    )
    assert response.status_code == 200, response.json()
    assert response.json()["state"] == {"a/b": 10}


def nested(levels: int) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for _ in range(levels - 1):
        state = {"d": state}
    return state


def test_size_and_depth_limits_answer_413_and_400_naming_the_limit(operator_api, client_run):
    assert write(operator_api, client_run, nested(MAX_STATE_DEPTH), version=0).status_code == 200
    with assert_unchanged():
        deep = write(operator_api, client_run, nested(MAX_STATE_DEPTH + 1), version=1)
        big = write(operator_api, client_run, {"x": "a" * MAX_STATE_BYTES}, version=1)
        # A patch that crosses the limit counts as much as a PUT that does.
        grown = write(
            operator_api,
            client_run,
            {"y": "b" * MAX_STATE_BYTES},
            version=1,
            method="patch",
            media=MERGE,
        )
    assert deep.status_code == 400
    assert f"limit of {MAX_STATE_DEPTH} levels" in deep.json()["detail"]
    for response in (big, grown):
        assert response.status_code == 413
        assert f"limit of {MAX_STATE_BYTES} bytes" in response.json()["detail"]


def test_bad_query_and_media_type_are_4xx_and_change_nothing(operator_api, client_run):
    with assert_unchanged():
        assert (
            write(operator_api, client_run, {}, version=0, query="?step_index=3").status_code == 400
        )
        assert (
            write(operator_api, client_run, {}, version=0, query="?step_index=-1").status_code
            == 400
        )
        assert write(operator_api, client_run, {}, version=0, query="?nope=1").status_code == 400
        long = "?rationale=" + "r" * 2001
        assert write(operator_api, client_run, {}, version=0, query=long).status_code == 400
        assert write(operator_api, client_run, {}, version=0, method="patch").status_code == 415
        assert write(operator_api, client_run, {}, version=0, media=MERGE).status_code == 415
        empty = operator_api.put(
            run_url(client_run.pk, "state"),
            "",
            content_type="application/json",
            HTTP_IF_MATCH=etag(client_run, 0),
        )
        assert empty.status_code == 400
    for query in ("?version=-1", "?version=x"):
        assert operator_api.get(run_url(client_run.pk, "state") + query).status_code == 400


def test_a_finished_runs_state_is_final(operator, operator_api, client_run):
    run_cancel(run_id=client_run.pk, actor=Actor.for_user(operator))
    with assert_unchanged():
        response = write(operator_api, client_run, {"late": True}, version=0)
    assert response.status_code == 409
    assert "cancelled" in response.json()["detail"]
    assert operator_api.get(run_url(client_run.pk, "state")).status_code == 200


def test_viewers_read_but_do_not_write_and_other_projects_see_nothing(seeded, client_run):
    viewer = token_client(make_user("vera", Role.VIEWER))
    assert viewer.get(run_url(client_run.pk, "state")).status_code == 200
    with assert_unchanged():
        assert write(viewer, client_run, {"x": 1}, version=0).status_code == 403
    other = Project.objects.create(slug="other", name="Other")
    outsider_user = make_user("otto", Role.OPERATOR, project=other)
    outsider = token_client(outsider_user, other)
    assert outsider.get(run_url(client_run.pk, "state")).status_code == 404
    with assert_unchanged():
        assert write(outsider, client_run, {"x": 1}, version=0).status_code == 404


def test_a_fork_starts_from_the_named_state_version(
    operator_api, client_run, django_capture_on_commit_callbacks
):
    assert write(operator_api, client_run, {"plan": ["a"]}, version=0).status_code == 200
    assert write(operator_api, client_run, {"plan": ["a", "b"]}, version=1).status_code == 200
    with assert_unchanged():
        bad = operator_api.post(
            run_url(client_run.pk, "fork"), {"from_index": 0, "state_version": 3}, format="json"
        )
    assert (bad.status_code, bad.json()["field"]) == (400, "state_version")
    with django_capture_on_commit_callbacks(execute=True):
        forked = operator_api.post(
            run_url(client_run.pk, "fork"), {"from_index": 0, "state_version": 1}, format="json"
        )
    assert forked.status_code == 201
    state = operator_api.get(run_url(forked.json()["id"], "state")).json()
    assert state == {
        "version": 0,
        "state": {"plan": ["a"]},
        "schema_version": 1,
        "upgraded_from": None,
    }
