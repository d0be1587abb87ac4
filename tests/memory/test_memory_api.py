"""The memory store over the API: put, get, delete, search (namespace prefix, value filters,
ranked full text, pages) and namespaces, as LangGraph's ``BaseStore``; ETags; expiry; the
audit trail; refusals (bad input, roles, other projects) that change nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from memory.models import MemoryItem, MemoryVersion, memory_chain
from tests.memory.conftest import (
    ITEMS_URL,
    NAMESPACES_URL,
    PREFS,
    SEARCH_URL,
    item_query,
    put_item,
)
from testsupport.state import assert_unchanged

pytestmark = pytest.mark.django_db


def test_put_then_get_returns_the_item_with_its_etag(operator_api):
    created = put_item(operator_api, PREFS, "tone", {"style": "concise"}, tags=["style"])
    assert created.status_code == 201
    body = created.json()
    assert body["namespace"] == PREFS
    assert body["version"] == 1
    assert created["ETag"] == body["etag"] == f'"{body["id"]}:1"'
    read = operator_api.get(item_query(PREFS, "tone"))
    assert read.status_code == 200
    assert read.json()["value"] == {"style": "concise"}
    assert read.json()["tags"] == ["style"]
    assert read["ETag"] == created["ETag"]
    assert read.json()["actor"]["name"] == "olivia"


def test_a_second_put_replaces_and_keeps_both_versions_audited(operator_api):
    first = put_item(operator_api, PREFS, "tone", {"style": "concise"}).json()
    second = put_item(operator_api, PREFS, "tone", {"style": "long"})
    assert second.status_code == 200
    assert second.json()["version"] == 2
    assert second.json()["id"] == first["id"]
    versions = operator_api.get(f"{ITEMS_URL}{first['id']}/history/").json()
    assert [(v["version"], v["value"]) for v in versions] == [
        (2, {"style": "long"}),
        (1, {"style": "concise"}),
    ]
    events = AuditEvent.objects.filter(chain=memory_chain(first["id"])).order_by("id")
    assert [(e.verb, e.payload["before"], e.payload["after"]) for e in events] == [
        ("memory.put", None, {"style": "concise"}),
        ("memory.put", {"style": "concise"}, {"style": "long"}),
    ]


def test_delete_with_a_reason_removes_the_item_and_keeps_its_history(operator_api):
    item = put_item(operator_api, PREFS, "tone", {"style": "concise"}).json()
    deleted = operator_api.delete(item_query(PREFS, "tone", reason="user asked"))
    assert deleted.status_code == 204
    assert operator_api.get(item_query(PREFS, "tone")).status_code == 404
    assert operator_api.get(f"{ITEMS_URL}{item['id']}/").status_code == 404
    gone = MemoryVersion.objects.get(item_id=item["id"], operation="delete")
    assert (gone.reason, gone.value) == ("user asked", {"style": "concise"})
    event = AuditEvent.objects.get(chain=memory_chain(item["id"]), verb="memory.delete")
    assert (event.payload["before"], event.payload["after"]) == ({"style": "concise"}, None)
    # Deleting what is not there is a no-op, as LangGraph's delete.
    assert operator_api.delete(item_query(PREFS, "tone")).status_code == 204


def test_a_stale_if_match_is_a_412_and_writes_nothing(operator_api):
    first = put_item(operator_api, PREFS, "tone", {"style": "concise"})
    put_item(operator_api, PREFS, "tone", {"style": "long"}, if_match=first["ETag"])
    with assert_unchanged(live_streams=False):
        stale = put_item(operator_api, PREFS, "tone", {"style": "x"}, if_match=first["ETag"])
        assert stale.status_code == 412
        assert stale.json()["version"] == 2
        assert stale["ETag"] == f'"{first.json()["id"]}:2"'
        refused = operator_api.delete(item_query(PREFS, "tone"), HTTP_IF_MATCH=first["ETag"])
        assert refused.status_code == 412
        missing = put_item(operator_api, PREFS, "new", {"a": 1}, if_match='"x:1"')
        assert missing.status_code == 412
        assert missing.json()["version"] == 0
        weak = put_item(operator_api, PREFS, "tone", {}, if_match=f"W/{stale['ETag']}")
        assert weak.status_code == 412
        malformed = put_item(operator_api, PREFS, "tone", {}, if_match="no quotes")
        assert malformed.status_code == 400
    assert operator_api.get(item_query(PREFS, "tone")).json()["value"] == {"style": "long"}


def test_an_expired_item_is_unreadable_at_once(operator_api):
    item = put_item(operator_api, PREFS, "tone", {"style": "concise"}, ttl_seconds=60).json()
    MemoryItem.objects.filter(pk=item["id"]).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert operator_api.get(item_query(PREFS, "tone")).status_code == 404
    assert operator_api.get(f"{ITEMS_URL}{item['id']}/").status_code == 404
    found = operator_api.post(SEARCH_URL, {"namespace_prefix": ["project"]}, format="json")
    assert found.json()["items"] == []
    listed = operator_api.post(NAMESPACES_URL, {}, format="json")
    assert listed.json()["namespaces"] == []
    # Writing the key again starts a new item; the expired one's history says it expired.
    again = put_item(operator_api, PREFS, "tone", {"style": "long"}).json()
    assert again["id"] != item["id"]
    assert MemoryVersion.objects.filter(item_id=item["id"], operation="expire").exists()


def test_refresh_ttl_renews_the_expiry(operator_api):
    item = put_item(operator_api, PREFS, "tone", {"a": 1}, ttl_seconds=3600).json()
    soon = timezone.now() + timedelta(seconds=5)
    MemoryItem.objects.filter(pk=item["id"]).update(expires_at=soon)
    read = operator_api.get(item_query(PREFS, "tone", refresh_ttl="true")).json()
    assert MemoryItem.objects.get(pk=item["id"]).expires_at > soon + timedelta(seconds=3000)
    assert read["version"] == 1


def test_search_by_prefix_filter_and_full_text_ranked_and_paged(operator_api):
    put_item(
        operator_api,
        ["project", "user:1", "facts"],
        "a",
        {"topic": "coffee", "n": 1},
        text="The user drinks coffee every morning, black coffee",
    )
    put_item(
        operator_api,
        ["project", "user:1", "facts"],
        "b",
        {"topic": "tea", "n": 5},
        text="The user sometimes drinks tea; no coffee after noon",
    )
    put_item(
        operator_api,
        ["project", "user:2", "facts"],
        "c",
        {"topic": "coffee", "n": 9},
        text="coffee lover",
    )
    put_item(operator_api, ["projectx"], "d", {"topic": "coffee"}, text="coffee")

    def search(**body):
        response = operator_api.post(SEARCH_URL, body, format="json")
        assert response.status_code == 200, response.json()
        return response.json()

    ranked = search(namespace_prefix=["project", "user:1"], query="coffee")
    assert [hit["key"] for hit in ranked["items"]] == ["a", "b"]
    assert ranked["items"][0]["score"] > ranked["items"][1]["score"] > 0
    # A prefix is whole labels: "project" does not take "projectx".
    assert {h["key"] for h in search(namespace_prefix=["project"])["items"]} == {"a", "b", "c"}
    assert [
        h["key"] for h in search(filter={"topic": "coffee"}, namespace_prefix=["project"])["items"]
    ] in (["c", "a"], ["a", "c"])
    assert [h["key"] for h in search(filter={"n": {"$gt": 4}})["items"]] == ["c", "b"]
    assert [h["key"] for h in search(filter={"n": {"$ne": 5}, "topic": "coffee"})["items"]] == [
        "c",
        "a",
    ]
    first = search(namespace_prefix=["project"], limit=2)
    assert first["next_offset"] == 2
    rest = search(namespace_prefix=["project"], limit=2, offset=2)
    assert len(first["items"]) + len(rest["items"]) == 3
    assert rest["next_offset"] is None


def test_list_namespaces_with_prefix_suffix_wildcard_and_depth(operator_api):
    for namespace in (["a", "u1", "prefs"], ["a", "u2", "prefs"], ["a", "u2", "facts"], ["b"]):
        put_item(operator_api, namespace, "k", {"x": 1})

    def listed(**body):
        return operator_api.post(NAMESPACES_URL, body, format="json").json()["namespaces"]

    assert listed() == [["a", "u1", "prefs"], ["a", "u2", "facts"], ["a", "u2", "prefs"], ["b"]]
    assert listed(prefix=["a"], max_depth=2) == [["a", "u1"], ["a", "u2"]]
    # A depth past the deepest namespace (LangGraph callers pass any) cuts nothing.
    assert listed(max_depth=50) == listed()
    assert operator_api.post(NAMESPACES_URL, {"max_depth": 0}, format="json").status_code == 400
    assert listed(suffix=["prefs"]) == [["a", "u1", "prefs"], ["a", "u2", "prefs"]]
    assert listed(prefix=["a", "*", "facts"]) == [["a", "u2", "facts"]]
    assert listed(limit=1, offset=1) == [["a", "u2", "facts"]]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"namespace": [], "key": "k", "value": {}}, "namespace"),
        ({"namespace": ["a.b"], "key": "k", "value": {}}, "namespace"),
        ({"namespace": [""], "key": "k", "value": {}}, "namespace"),
        ({"namespace": ["a"] * 21, "key": "k", "value": {}}, "namespace"),
        ({"namespace": ["a"], "key": "", "value": {}}, "key"),
        ({"namespace": ["a"], "key": "k", "value": [1, 2]}, "value"),
        ({"namespace": ["a"], "key": "k", "value": {"x": "\u0000"}}, "value"),
        ({"namespace": ["a"], "key": "k", "value": {}, "ttl_seconds": 0}, "ttl_seconds"),
        ({"namespace": ["a"], "key": "k", "value": {}, "tags": [""]}, "tags"),
        ({"namespace": ["a"], "key": "k", "value": {}, "surprise": 1}, "surprise"),
        (
            {
                "namespace": ["a"],
                "key": "k",
                "value": {},
                "run": "00000000-0000-4000-8000-000000000000",
            },
            "run",
        ),
        ({"namespace": ["a"], "key": "k", "value": {}, "step_index": 0}, "step_index"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_changes_nothing(operator_api, body, field):
    with assert_unchanged(live_streams=False):
        response = operator_api.put(ITEMS_URL, body, format="json")
    assert response.status_code == 400, response.json()
    # The API's JSON parser refuses a NUL before any field is read (no ``field`` then).
    assert response.json().get("field", field).startswith(field)


def test_a_value_over_the_limit_is_a_413(operator_api):
    with assert_unchanged(live_streams=False):
        response = put_item(operator_api, PREFS, "big", {"x": "y" * 300_000})
    assert response.status_code == 413


@pytest.mark.parametrize(
    "body",
    [
        {"filter": "topic"},
        {"filter": {"n": {"$gt": [1]}}},
        {"namespace_prefix": ["a.b"]},
        {"query": "\u0000"},
        {"limit": 0},
        {"limit": 101},
    ],
)
def test_bad_searches_are_a_400(operator_api, body):
    assert operator_api.post(SEARCH_URL, body, format="json").status_code == 400


def test_hostile_filter_names_and_queries_are_data(operator_api):
    put_item(operator_api, PREFS, "k", {"a__b": 1, "x'; drop": 2}, text="a & b | !c")
    found = operator_api.post(SEARCH_URL, {"filter": {"a__b": 1, "x'; drop": 2}}, format="json")
    assert [hit["key"] for hit in found.json()["items"]] == ["k"]
    for query in ("a & b | !c", "'", "(((", "-", ":*"):
        assert operator_api.post(SEARCH_URL, {"query": query}, format="json").status_code == 200


def test_another_projects_items_are_a_404(operator_api, outsider_api):
    item = put_item(operator_api, PREFS, "tone", {"secret": 1}).json()
    with assert_unchanged(live_streams=False):
        assert outsider_api.get(f"{ITEMS_URL}{item['id']}/").status_code == 404
        assert outsider_api.get(f"{ITEMS_URL}{item['id']}/history/").status_code == 404
        assert outsider_api.get(item_query(PREFS, "tone")).status_code == 404
        found = outsider_api.post(SEARCH_URL, {"query": "secret"}, format="json")
        assert found.json()["items"] == []
        assert outsider_api.post(NAMESPACES_URL, {}, format="json").json()["namespaces"] == []
        # Naming the other project outright is refused too.
        named = put_item(outsider_api, PREFS, "tone", {"x": 1}, project="default")
        assert named.status_code == 400
        assert outsider_api.delete(item_query(PREFS, "tone", project="default")).status_code == 400
    # The outsider's own project has its own namespace: their write does not touch ours.
    put_item(outsider_api, PREFS, "tone", {"theirs": 1})
    assert operator_api.get(item_query(PREFS, "tone")).json()["value"] == {"secret": 1}


def test_viewers_read_but_may_not_write(operator_api, viewer_api):
    put_item(operator_api, PREFS, "tone", {"a": 1})
    assert viewer_api.get(item_query(PREFS, "tone")).status_code == 200
    with assert_unchanged(live_streams=False):
        assert put_item(viewer_api, PREFS, "tone", {"b": 2}).status_code == 403
        assert viewer_api.delete(item_query(PREFS, "tone")).status_code == 403


def test_anonymous_requests_are_refused(client):
    assert client.get(item_query(PREFS, "tone")).status_code in (401, 403)
