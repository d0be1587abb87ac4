"""Stable pages of the runs list: column sort and keyset pagination as of the moment the list
was opened.

A page is found by the sort value and id of the row before it (keyset pagination: no
``OFFSET``, so a page costs the same at any depth), among the runs created up to ``as_of``,
the moment its first page was read. Runs created later never shift a later page: the pager's
links carry both in a signed cursor (``django.core.signing``: a cursor is never parsed from
text a user could forge into a database error). Sorts are by one column with the run's id
breaking ties, both in the same direction.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core import signing
from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime

from agentops.errors import InvalidInput
from runs.models import Run

# The sorts the list offers: ``?sort=<key>`` (ascending) or ``-<key>`` → the run's column.
SORTS = {
    "created": "created_at",
    "updated": "updated_at",
    "goal": "goal",
    "tokens": "usage_tokens",
    "cost": "cost_usd",
    "duration": "duration_ms",
}
DEFAULT_SORT = "-created"
_SALT = "runs.list_pages"


@dataclass(frozen=True)
class Sort:
    """A sort of the runs list: its ``key`` as given (``-tokens``), the run's ``column`` and
    whether it is ``descending``."""

    key: str
    column: str
    descending: bool

    @property
    def ordering(self) -> tuple[str, str]:
        """``order_by`` arguments: the column, then the id, in the sort's direction."""
        sign = "-" if self.descending else ""
        return f"{sign}{self.column}", f"{sign}id"


def sort_of(key: str) -> Sort:
    """The sort ``key`` names (``created``, ``-tokens``; empty: ``DEFAULT_SORT``).

    Raises:
        InvalidInput: no such sort (field ``sort``).
    """
    key = key or DEFAULT_SORT
    column = SORTS.get(key.removeprefix("-"))
    if column is None:
        raise InvalidInput(f"sort by one of {', '.join(SORTS)} (- first: descending)", field="sort")
    return Sort(key, column, key.startswith("-"))


@dataclass(frozen=True)
class Cursor:
    """Where a page starts: the runs created up to ``as_of``, after (``forward``) or before
    the row whose sort value is ``value`` and id ``run_id``."""

    as_of: datetime
    value: Any
    run_id: uuid.UUID
    forward: bool


def cursor_encode(cursor: Cursor, sort: Sort) -> str:
    """``cursor`` as a signed token bound to ``sort`` (the value as its field's text)."""
    value = cursor.value.isoformat() if isinstance(cursor.value, datetime) else str(cursor.value)
    payload = [sort.key, cursor.as_of.isoformat(), value, str(cursor.run_id), cursor.forward]
    return signing.dumps(payload, salt=_SALT, compress=True)


def cursor_decode(token: str, sort: Sort) -> Cursor:
    """The cursor ``token`` holds.

    Raises:
        InvalidInput: not a token of ``cursor_encode``, or one made for another sort
            (field ``cursor``).
    """
    try:
        key, as_of, value, run_id, forward = signing.loads(token, salt=_SALT)
        if key != sort.key:
            raise ValueError("another sort")
        moment = parse_datetime(as_of)
        if moment is None or moment.tzinfo is None:
            raise ValueError("not an aware time")
        field = Run._meta.get_field(sort.column)
        return Cursor(moment, field.to_python(value), uuid.UUID(run_id), bool(forward))
    except (signing.BadSignature, ValidationError, ValueError, TypeError) as exc:
        raise InvalidInput("not a page link of this list", field="cursor") from exc


@dataclass(frozen=True)
class KeysetPage:
    """One page: its ``rows`` in the sort's order, and the cursors of the pages ``before``
    (newer, for the default sort) and ``after`` it (None: there is none)."""

    rows: list[Any]
    before: str | None
    after: str | None
    as_of: datetime


def keyset_page(
    queryset: QuerySet[Any],
    *,
    sort: Sort,
    cursor: Cursor | None,
    as_of: datetime,
    size: int,
    key: Callable[[Any], tuple[Any, uuid.UUID]],
) -> KeysetPage:
    """The page of ``queryset`` (runs) that ``cursor`` names (None: the first), ``size`` rows,
    sorted by ``sort``, among the runs created up to the cursor's ``as_of`` (no cursor:
    ``as_of``). ``key`` gives a row's (sort value, run id). Reads ``size + 1`` rows, no count.
    """
    if cursor is not None:
        as_of = cursor.as_of
    rows = queryset.filter(created_at__lte=as_of)
    forward = cursor is None or cursor.forward
    if cursor is not None:
        # "After" in the sort's direction: less than the cursor's row when descending.
        later = cursor.forward == sort.descending
        lookup = "lt" if later else "gt"
        rows = rows.filter(
            Q(**{f"{sort.column}__{lookup}": cursor.value})
            | Q(**{sort.column: cursor.value, f"id__{lookup}": cursor.run_id})
        )
    ordering = sort.ordering if forward else tuple(_flip(name) for name in sort.ordering)
    found = list(rows.order_by(*ordering)[: size + 1])
    more = len(found) > size
    found = found[:size]
    if not forward:
        found.reverse()

    def token(row: Any, ahead: bool) -> str:
        value, run_id = key(row)
        return cursor_encode(Cursor(as_of, value, run_id, ahead), sort)

    # Going forward, a page was left behind (unless this is the first); going back, there
    # are more before when more rows were found than fit.
    has_before = cursor is not None and (forward or more)
    has_after = more if forward else True
    return KeysetPage(
        rows=found,
        before=token(found[0], False) if found and has_before else None,
        after=token(found[-1], True) if found and has_after else None,
        as_of=as_of,
    )


def _flip(name: str) -> str:
    return name[1:] if name.startswith("-") else f"-{name}"
