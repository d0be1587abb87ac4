"""LangGraph's store contract (``langgraph.store.base.BaseStore``), run against LangGraph's
``InMemoryStore`` (the reference: it proves the suite) and ``AgentOpsStore`` on a live agentops
(daphne), each through the sync methods and the async ones.

LangGraph publishes no store conformance suite (``langgraph-checkpoint-conformance`` covers
checkpointers only), so these cases are written from ``BaseStore``'s documentation: its
methods and ops (``GetOp``, ``PutOp`` with ``value=None`` a delete, ``SearchOp``,
``ListNamespacesOp`` with its match conditions), namespace validation, and the behaviour
``InMemoryStore`` and ``PostgresStore`` share where the documentation is silent (a batch
reads before it writes; the last put of a key wins; namespaces come back sorted). Where those
two order search results differently (insertion order, newest first) the cases compare sets;
where they disagree otherwise (a namespace whose items are gone, ``$ne`` on a missing field)
PostgresStore is the reference and the case is an expected failure of InMemoryStore.
What only ``AgentOpsStore`` has (full-text ``query``, TTLs, projects) is tested in
``test_store_agentops.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from agentops_client import Client
from agentops_client.langgraph import AgentOpsStore
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from tests.langgraph.store_calls import Calls
from testsupport.factories import make_token, make_user

# The example of ``BaseStore.list_namespaces``'s docstring.
DOC_NAMESPACES = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
]


# Only AgentOpsStore's cases use the database (and empty it after them).
@pytest.fixture(
    params=[
        "InMemoryStore",
        pytest.param("AgentOpsStore", marks=pytest.mark.django_db(transaction=True)),
    ]
)
def store(request: pytest.FixtureRequest) -> Iterator[BaseStore]:
    if request.param == "InMemoryStore":
        yield InMemoryStore()
        return
    server = request.getfixturevalue("asgi_server")
    request.getfixturevalue("seeded")
    token = make_token(make_user("memory-agent", "operator"))
    with Client(server.url, token, websocket=False) as client:
        yield AgentOpsStore(client)


@pytest.fixture(params=["sync", "async"])
def s(store: BaseStore, request: pytest.FixtureRequest) -> Calls:
    return Calls(store, request.param)


def keys(found: list[SearchItem]) -> set[str]:
    return {item.key for item in found}


def test_put_then_get_returns_the_item(s):
    value = {"title": "Café", "n": 3, "ok": True, "none": None, "tags": ["a", "b"], "at": {"x": 1}}
    s.put(("users", "42", "prefs"), "tone", value)
    item = s.get(("users", "42", "prefs"), "tone")
    assert isinstance(item, Item)
    assert (item.namespace, item.key, item.value) == (("users", "42", "prefs"), "tone", value)
    assert isinstance(item.created_at, datetime)
    assert isinstance(item.updated_at, datetime)
    assert item.created_at.tzinfo is not None
    assert s.get(("users", "42", "prefs"), "missing") is None
    assert s.get(("users", "43", "prefs"), "tone") is None
    assert s.get(("users", "42"), "tone") is None


def test_a_second_put_replaces_the_value(s):
    s.put(("docs",), "d1", {"v": 1})
    first = s.get(("docs",), "d1")
    s.put(("docs",), "d1", {"w": 2})
    second = s.get(("docs",), "d1")
    assert first is not None
    assert second is not None
    assert second.value == {"w": 2}
    assert second.updated_at > first.updated_at


def test_delete_removes_the_item_and_deleting_nothing_is_no_error(s):
    s.put(("docs",), "d1", {"v": 1})
    s.put(("docs",), "d2", {"v": 2})
    s.delete(("docs",), "d1")
    assert s.get(("docs",), "d1") is None
    assert keys(s.search(("docs",))) == {"d2"}
    s.delete(("docs",), "d1")
    s.delete(("nowhere",), "nothing")
    s.batch([PutOp(("docs",), "d2", None)])
    assert s.get(("docs",), "d2") is None
    assert s.search(("docs",)) == []


def test_a_batch_answers_in_order_and_reads_before_it_writes(s):
    s.put(("test", "foo"), "key1", {"data": "value1"})
    s.put(("test", "bar"), "key2", {"data": "value2"})
    results = s.batch(
        [
            GetOp(("test", "foo"), "key1"),
            PutOp(("test", "foo"), "key1", {"data": "changed"}),
            SearchOp(("test",), filter={"data": "value1"}),
            ListNamespacesOp(limit=10),
            GetOp(("test",), "key3"),
            PutOp(("test",), "key3", {"data": "value3"}),
            GetOp(("test", "foo"), "key1"),
        ]
    )
    assert len(results) == 7
    assert results[0].value == {"data": "value1"}
    assert results[1] is None
    assert results[5] is None
    assert [(i.key, i.value) for i in results[2]] == [("key1", {"data": "value1"})]
    assert results[3] == [("test", "bar"), ("test", "foo")]
    assert results[4] is None
    # Every read of a batch sees the store as it was before the batch's writes.
    assert results[6].value == {"data": "value1"}
    assert s.get(("test", "foo"), "key1").value == {"data": "changed"}
    assert s.get(("test",), "key3").value == {"data": "value3"}


def test_the_last_put_of_a_key_in_a_batch_wins(s):
    s.batch(
        [
            PutOp(("k",), "a", {"n": 1}),
            PutOp(("k",), "b", {"n": 1}),
            PutOp(("k",), "a", {"n": 2}),
            PutOp(("k",), "b", None),
        ]
    )
    assert s.get(("k",), "a").value == {"n": 2}
    assert s.get(("k",), "b") is None


def test_search_stays_under_its_namespace_prefix_label_by_label(s):
    s.put(("docs", "u1"), "a", {"x": 1})
    s.put(("docs", "u2"), "b", {"x": 1})
    s.put(("docs",), "c", {"x": 1})
    s.put(("docsets",), "d", {"x": 1})
    s.put(("other",), "e", {"x": 1})
    assert keys(s.search(("docs",))) == {"a", "b", "c"}
    assert keys(s.search(("docs", "u1"))) == {"a"}
    assert keys(s.search(("doc",))) == set()
    assert keys(s.search((), limit=50)) == {"a", "b", "c", "d", "e"}
    hit = s.search(("docs", "u1"))[0]
    assert isinstance(hit, SearchItem)
    assert (hit.namespace, hit.key, hit.value, hit.score) == (("docs", "u1"), "a", {"x": 1}, None)


def test_search_filters_on_value_fields_with_the_documented_operators(s):
    rows = {
        "a": {"score": 2, "color": "red", "status": "active", "meta": {"lang": "en"}},
        "b": {"score": 9, "color": "blue", "status": "active", "meta": {"lang": "fr"}},
        "c": {"score": 10, "color": "red", "status": "archived", "meta": {"lang": "en"}},
        "d": {"score": 11.5, "color": "green", "status": "active", "meta": {"lang": "en"}},
    }
    s.batch([PutOp(("items",), key, value) for key, value in rows.items()])

    def found(filter: dict[str, Any]) -> set[str]:
        return keys(s.search(("items",), filter=filter))

    assert found({"color": "red"}) == {"a", "c"}
    assert found({"color": "red", "status": "active"}) == {"a"}
    assert found({"color": {"$eq": "blue"}}) == {"b"}
    assert found({"color": {"$ne": "red"}}) == {"b", "d"}
    # Numbers compare as numbers (9 < 10), not as text.
    assert found({"score": {"$gt": 9}}) == {"c", "d"}
    assert found({"score": {"$gte": 10}}) == {"c", "d"}
    assert found({"score": {"$lt": 10}}) == {"a", "b"}
    assert found({"score": {"$lte": 9}}) == {"a", "b"}
    assert found({"score": {"$gt": 4.99, "$lt": 11}}) == {"b", "c"}
    assert found({"score": {"$gte": 3.0}, "color": "red"}) == {"c"}
    assert found({"meta": {"lang": "fr"}}) == {"b"}
    assert found({"color": "purple"}) == set()
    assert found({"missing": "x"}) == set()


def test_ne_leaves_out_items_without_the_field(s, request):
    if isinstance(s.store, InMemoryStore):
        # It compares the missing field as None, which is not "red"; PostgresStore compares
        # SQL NULL, which is nothing: the documentation is silent, PostgresStore is the
        # reference here.
        request.applymarker(pytest.mark.xfail(strict=True, reason="InMemoryStore keeps them"))
    s.put(("items",), "red", {"color": "red"})
    s.put(("items",), "blue", {"color": "blue"})
    s.put(("items",), "plain", {"size": 1})
    assert keys(s.search(("items",), filter={"color": {"$ne": "red"}})) == {"blue"}


def test_search_pages_with_limit_and_offset(s):
    s.batch([PutOp(("paged",), f"k{n:02}", {"n": n}) for n in range(7)])
    pages = [s.search(("paged",), limit=3, offset=offset) for offset in (0, 3, 6, 9)]
    assert [len(page) for page in pages] == [3, 3, 1, 0]
    seen = [item.key for page in pages for item in page]
    assert sorted(seen) == [f"k{n:02}" for n in range(7)]
    assert len(s.search(("paged",))) == 7
    assert len(s.search(("paged",), limit=2)) == 2


def test_a_limit_above_one_hundred_returns_that_many(s):
    s.batch([PutOp(("many",), f"k{n:03}", {"n": n}) for n in range(130)])
    assert len(s.search(("many",), limit=120)) == 120
    assert keys(s.search(("many",), limit=500)) == {f"k{n:03}" for n in range(130)}
    assert len(s.search(("many",), limit=120, offset=100)) == 30


def test_list_namespaces_as_documented(s):
    s.batch([PutOp(namespace, "k", {"x": 1}) for namespace in DOC_NAMESPACES])
    assert s.list_namespaces() == sorted(DOC_NAMESPACES)
    # The docstring's own example.
    assert s.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert s.list_namespaces(max_depth=1) == [("a",)]
    assert s.list_namespaces(max_depth=2) == [("a", "b"), ("a", "c")]
    assert s.list_namespaces(max_depth=50) == sorted(DOC_NAMESPACES)
    assert s.list_namespaces(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert s.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert s.list_namespaces(suffix=("d", "*")) == [("a", "b", "d", "e"), ("a", "b", "d", "i")]
    assert s.list_namespaces(prefix=("a", "b"), suffix=("f",)) == [("a", "b", "f")]
    assert s.list_namespaces(prefix=("b",)) == []
    assert s.list_namespaces(prefix=("a", "b", "c", "d", "e", "f")) == []
    assert s.list_namespaces(limit=2) == sorted(DOC_NAMESPACES)[:2]
    assert s.list_namespaces(limit=2, offset=3) == sorted(DOC_NAMESPACES)[3:5]
    assert s.list_namespaces(offset=10) == []


def test_list_namespaces_ops_with_several_conditions_of_a_kind_need_them_all(s):
    s.batch([PutOp(namespace, "k", {"x": 1}) for namespace in DOC_NAMESPACES])

    def listed(*conditions: MatchCondition) -> list[tuple[str, ...]]:
        return s.batch([ListNamespacesOp(match_conditions=conditions)])[0]

    prefix, suffix = "prefix", "suffix"
    assert listed(MatchCondition(prefix, ("a", "*")), MatchCondition(prefix, ("*", "b", "d"))) == [
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
    ]
    assert listed(MatchCondition(prefix, ("a", "b")), MatchCondition(prefix, ("a", "c"))) == []
    assert listed(MatchCondition(suffix, ("f",)), MatchCondition(suffix, ("c", "*"))) == [
        ("a", "c", "f")
    ]
    assert listed(MatchCondition(suffix, ("e",)), MatchCondition(suffix, ("i",))) == []
    assert listed(MatchCondition(prefix, ()), MatchCondition(suffix, ())) == sorted(DOC_NAMESPACES)


def test_a_namespace_listing_leaves_out_emptied_namespaces(s, request):
    if isinstance(s.store, InMemoryStore):
        # Its dict of namespaces keeps an entry once made (by a put, even by a get);
        # PostgresStore lists the namespaces of stored items, which is the reference here.
        request.applymarker(pytest.mark.xfail(strict=True, reason="InMemoryStore keeps them"))
    s.put(("keep",), "k", {"x": 1})
    s.put(("gone", "soon"), "k", {"x": 1})
    s.delete(("gone", "soon"), "k")
    assert s.list_namespaces() == [("keep",)]


def test_put_refuses_a_bad_namespace(s):
    for namespace in ((), ("a.b",), ("",), ("ok", ""), ("langgraph",), ("langgraph", "x")):
        with pytest.raises(InvalidNamespaceError):
            s.put(namespace, "k", {"x": 1})
    assert s.list_namespaces() == []


def test_reads_refuse_a_bad_label(s):
    for labels in (("a.b",), ("",), ("ok", "")):
        for method, args, kwargs in (
            ("get", (labels, "k"), {}),
            ("search", (labels,), {}),
            ("delete", (labels, "k"), {}),
            ("list_namespaces", (), {"prefix": labels}),
            ("list_namespaces", (), {"suffix": labels}),
        ):
            with pytest.raises(InvalidNamespaceError):
                getattr(s, method)(*args, **kwargs)
