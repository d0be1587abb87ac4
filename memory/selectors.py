"""Reads of the memory store that the API and the pages share: get, search and list
namespaces (LangGraph ``BaseStore.get``, ``search``, ``list_namespaces``), and an item's
history. Expired items are never returned, whether or not the purge has deleted them yet.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection
from django.db.models import F, Q, QuerySet
from django.db.models.fields.json import KeyTransform
from django.utils import timezone

from agentops.errors import InvalidInput
from agentops.storable import require_storable
from memory.models import MemoryItem, MemoryVersion
from memory.namespaces import matches, namespace_labels, namespace_path
from memory.rows import SEARCH_CONFIG

MAX_LIMIT: Final = 100
MAX_OFFSET: Final = 10_000
MAX_QUERY_CHARS: Final = 1000
MAX_FILTER_KEYS: Final = 20
# The comparison operators a value filter may use (LangGraph's store filters).
FILTER_OPERATORS: Final = {
    "$eq": "exact",
    "$ne": "exact",
    "$gt": "gt",
    "$gte": "gte",
    "$lt": "lt",
    "$lte": "lte",
}


def live_items(*, now: datetime | None = None) -> QuerySet[MemoryItem]:
    """Items that have not expired at ``now`` (default: this instant)."""
    now = now or timezone.now()
    return MemoryItem.objects.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))


def under_prefix(items: QuerySet[MemoryItem], labels: Sequence[str]) -> QuerySet[MemoryItem]:
    """``items`` whose namespace is ``labels`` or starts with them (label by label: the
    prefix ``("a",)`` takes ``a.b`` but not ``ab``); every item for no labels. Uses the
    ``(project, namespace_path)`` index (``LIKE 'a.%'``)."""
    if not labels:
        return items
    path = namespace_path(labels)
    return items.filter(Q(namespace_path=path) | Q(namespace_path__startswith=f"{path}."))


def memory_get(*, project_id: int, namespace: Any, key: Any) -> MemoryItem:
    """The live item ``key`` in ``namespace`` of project ``project_id``.

    Raises:
        InvalidInput: a bad namespace or key.
        MemoryItem.DoesNotExist: no such item, or it has expired.
    """
    labels = namespace_labels(namespace)
    if not isinstance(key, str) or not key:
        raise InvalidInput("key must be a non-empty string", field="key")
    return (
        live_items()
        .select_related("project")
        .get(project_id=project_id, namespace_path=namespace_path(labels), key=key)
    )


def _filter_q(filter: Any) -> Q:
    """The ``Q`` of a value filter: ``{"field": value}`` (equal, as JSON) or ``{"field":
    {"$gt": value, ...}}`` with the operators of ``FILTER_OPERATORS``, on top-level fields of
    the value; all must hold."""
    if not isinstance(filter, dict) or len(filter) > MAX_FILTER_KEYS:
        raise InvalidInput(
            f"filter must be an object of at most {MAX_FILTER_KEYS} fields", field="filter"
        )
    require_storable(filter, field="filter")
    condition = Q()
    for number, (name, wanted) in enumerate(filter.items()):
        if not name:
            raise InvalidInput("filter fields may not be empty", field="filter")
        tests = (
            wanted
            if isinstance(wanted, dict) and wanted and all(op in FILTER_OPERATORS for op in wanted)
            else {"$eq": wanted}
        )
        for op, operand in tests.items():
            if op not in ("$eq", "$ne") and not isinstance(operand, int | float | str):
                raise InvalidInput(f"{op} compares with a number or a string", field="filter")
            # Aliased key transforms, not ``value__<name>``: a name with ``__`` stays one key.
            test = Q(**{f"filter_field_{number}__{FILTER_OPERATORS[op]}": operand})
            condition &= ~test if op == "$ne" else test
    return condition


def _with_filter_fields(
    items: QuerySet[MemoryItem], filter: dict[str, Any]
) -> QuerySet[MemoryItem]:
    fields = {f"filter_field_{n}": KeyTransform(name, "value") for n, name in enumerate(filter)}
    return items.alias(**fields)


@dataclass(frozen=True)
class Found:
    """A search hit: the item and its rank (``score``, PostgreSQL's ``ts_rank``; None for a
    search without a query)."""

    item: MemoryItem
    score: float | None


def _page(limit: Any, offset: Any) -> tuple[int, int]:
    for name, number, top in (("limit", limit, MAX_LIMIT), ("offset", offset, MAX_OFFSET)):
        low = 1 if name == "limit" else 0
        if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= top:
            raise InvalidInput(f"{name} must be a whole number from {low} to {top}", field=name)
    return limit, offset


def memory_search(
    *,
    project_id: int,
    namespace_prefix: Any = (),
    query: Any = None,
    filter: Any = None,
    limit: Any = 10,
    offset: Any = 0,
) -> list[Found]:
    """The live items of project ``project_id`` under ``namespace_prefix`` (labels; empty:
    all), that match ``filter`` (``_filter_q``) and, with ``query`` (up to 1000 characters),
    its words by full-text search, best ranked first (PostgreSQL: ``websearch_to_tsquery``
    in the ``english`` configuration against the stored ``tsvector``, ranked by
    ``ts_rank``; SQLite: a substring of ``text``); without ``query`` the most recently
    written first. ``limit`` (1-100) items from ``offset`` (0-10,000). LangGraph's
    ``BaseStore.search``.

    Raises:
        InvalidInput: a bad prefix, query, filter, limit or offset.
    """
    labels = namespace_labels(namespace_prefix, field="namespace_prefix", allow_empty=True)
    limit, offset = _page(limit, offset)
    # The project comes along: the API names it on each item (one query, not one per item).
    items = under_prefix(
        live_items().filter(project_id=project_id).select_related("project"), labels
    )
    if filter is not None:
        condition = _filter_q(filter)
        items = _with_filter_fields(items, filter).filter(condition)
    if query is None or query == "":
        page = items.order_by("-updated_at", "namespace_path", "key")[offset : offset + limit]
        return [Found(item, None) for item in page]
    if not isinstance(query, str):
        raise InvalidInput("query must be a string", field="query")
    require_storable(query, field="query", max_length=MAX_QUERY_CHARS)
    if connection.vendor != "postgresql":
        page = items.filter(text__icontains=query).order_by("-updated_at", "key")
        return [Found(item, None) for item in page[offset : offset + limit]]
    words = SearchQuery(query, config=SEARCH_CONFIG, search_type="websearch")
    ranked = (
        items.filter(search_vector=words)
        .annotate(score=SearchRank(F("search_vector"), words))
        .order_by("-score", "-updated_at", "key")
    )
    return [Found(item, item.score) for item in ranked[offset : offset + limit]]


def memory_list_namespaces(
    *,
    project_id: int,
    prefix: Any = (),
    suffix: Any = (),
    max_depth: Any = None,
    limit: Any = 100,
    offset: Any = 0,
) -> list[tuple[str, ...]]:
    """The namespaces of project ``project_id``'s live items, sorted, that start with
    ``prefix`` and end with ``suffix`` (labels; ``*`` matches any one label), cut to their
    first ``max_depth`` labels (1 or more; None: whole, as is any depth past the deepest
    namespace) and deduplicated; ``limit`` (1-100) from ``offset``. LangGraph's
    ``BaseStore.list_namespaces``.

    Raises:
        InvalidInput: a bad prefix, suffix, depth, limit or offset.
    """
    start = namespace_labels(prefix, field="prefix", allow_empty=True)
    end = namespace_labels(suffix, field="suffix", allow_empty=True)
    if max_depth is not None and (
        isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1
    ):
        raise InvalidInput("max_depth must be a whole number from 1", field="max_depth")
    limit, offset = _page(limit, offset)
    fixed: list[str] = []
    for label in start:
        if label == "*":
            break
        fixed.append(label)
    items = under_prefix(live_items().filter(project_id=project_id), fixed)
    found: set[tuple[str, ...]] = set()
    paths = items.order_by("namespace_path").values_list("namespace_path", flat=True).distinct()
    for path in paths.iterator():
        labels = tuple(path.split("."))
        if matches(labels, start) and matches(labels, end, at_end=True):
            found.add(labels[:max_depth] if max_depth else labels)
    return sorted(found)[offset : offset + limit]


def memory_item_history(*, item_id: uuid.UUID) -> list[MemoryVersion]:
    """Every kept version of item ``item_id``, newest first."""
    return list(MemoryVersion.objects.filter(item_id=item_id).order_by("-id"))
