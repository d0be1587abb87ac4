"""Saved views of the runs list: each user's named filters and sort (``SavedView``).

A saved view is a user's own preference, not a change to any run: it is not audited.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from agentops.errors import Conflict, InvalidInput
from agentops.storable import require_storable
from runs.models.saved_views import MAX_VIEW_NAME, MAX_VIEW_QUERY, SavedView


def saved_view_query(params: Iterable[tuple[str, Any]], *, kept: Iterable[str]) -> str:
    """The query string a view keeps of the list's GET ``params`` ((name, value) pairs): the
    non-empty values of the names in ``kept`` (the list's filters, ``sort``, ``tz``), in the
    order of ``kept``; never a page cursor."""
    given = {name: str(value).strip() for name, value in params if str(value).strip()}
    return urlencode([(name, given[name]) for name in kept if name in given])


def saved_view_list(*, owner_id: int) -> QuerySet[SavedView]:
    """The saved views of user ``owner_id``, by name."""
    return SavedView.objects.filter(owner_id=owner_id).order_by("name")


def saved_view_create(*, owner_id: int, name: str, query: str) -> SavedView:
    """Save the runs list's ``query`` (see ``saved_view_query``) as user ``owner_id``'s view
    ``name`` (1-100 characters, surrounding spaces dropped).

    Raises:
        InvalidInput: no name, a name or query too long, or text PostgreSQL cannot store
            (``agentops.storable``).
        Conflict: the user already has a view of this name.
    """
    name = name.strip()
    if not name:
        raise InvalidInput("give the view a name", field="name")
    require_storable(name, field="name", max_length=MAX_VIEW_NAME)
    require_storable(query, field="query", max_length=MAX_VIEW_QUERY)
    try:
        with transaction.atomic():
            return SavedView.objects.create(owner_id=owner_id, name=name, query=query)
    except IntegrityError:
        raise Conflict(f"you already have a view named {name!r}") from None


def saved_view_delete(*, owner_id: int, view_id: int) -> None:
    """Delete user ``owner_id``'s view ``view_id``.

    Raises:
        SavedView.DoesNotExist: no such view of this user (another user's is not theirs).
    """
    deleted, _ = SavedView.objects.filter(pk=view_id, owner_id=owner_id).delete()
    if not deleted:
        raise SavedView.DoesNotExist(f"no saved view {view_id}")
