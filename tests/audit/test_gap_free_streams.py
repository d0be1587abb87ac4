"""Reads of the live streams never pass an event that may still commit before them: two
transactions take event ids in one order and commit in the other (real PostgreSQL, one
connection each), and a reader in between must not hand out a cursor that skips the later one.
"""

from __future__ import annotations

import queue
from typing import Any

import psycopg
import pytest
from django.conf import settings

from audit.models import AuditEvent
from audit.streams import stream_events, stream_head

pytestmark = pytest.mark.django_db(transaction=True)


def ids(after: int, **filters: Any) -> list[int]:
    return list(stream_events(after=after, **filters).values_list("id", flat=True))


def naive_ids(after: int) -> list[int]:
    """What a reader in id order sees: the rule the streams had before."""
    return list(AuditEvent.objects.filter(id__gt=after).values_list("id", flat=True))


def test_the_later_event_waits_while_a_smaller_id_is_uncommitted(opened):
    cursor = stream_head()
    first, second = opened(), opened()
    first.begin()
    second.begin()
    smaller = first.record()
    larger = second.record()
    assert smaller < larger
    second.commit()
    # In id order the hole is there: the larger id is visible, the smaller not yet.
    assert naive_ids(cursor) == [larger]
    assert ids(cursor) == []
    assert stream_head() == cursor
    first.commit()
    assert ids(cursor) == [smaller, larger]
    assert stream_head() == larger


def test_an_event_with_a_smaller_id_committing_later_comes_after_the_cursor(opened):
    # The transaction that began first takes its event id last and commits first.
    cursor = stream_head()
    early, late = opened(), opened()
    early.begin()
    late.begin()
    smaller = late.record()
    larger = early.record()
    assert smaller < larger
    early.commit()
    assert ids(cursor) == [larger]
    cursor = stream_head()
    assert cursor == larger
    late.commit()
    # Resuming after the larger id still yields the smaller one; id order would skip it.
    assert naive_ids(cursor) == []
    assert ids(cursor) == [smaller]
    assert stream_head() == smaller


def test_the_stream_of_one_project_and_verb_family_keeps_the_rule(opened):
    cursor = stream_head()
    mine, theirs = opened(project_id=1), opened(project_id=2)
    mine.begin()
    theirs.begin()
    smaller = mine.record()
    theirs.record()
    theirs.commit()
    assert ids(cursor, project_ids=[1]) == []
    mine.commit()
    assert ids(cursor, project_ids=[1]) == [smaller]
    assert ids(cursor, project_ids=[1], verb_prefix="approval.") == []


def test_one_runs_events_commit_in_id_order(opened):
    chain = opened()
    chain.begin()
    chain.record()
    chain.commit()
    run_id = chain.run_id
    cursor = stream_head(run_id=run_id)
    first, second = opened(run_id=run_id), opened(run_id=run_id)
    first.begin()
    second.begin()
    earlier = first.record()
    # The second writer waits for the chain head the first one holds: it takes no id yet.
    second.record_later()
    with pytest.raises(queue.Empty):
        second.wait(timeout=0.5)
    assert ids(cursor, run_id=run_id) == []
    first.commit()
    later = second.wait()
    assert later > earlier
    assert ids(cursor, run_id=run_id) == [earlier]
    second.commit()
    assert ids(cursor, run_id=run_id) == [earlier, later]
    assert stream_head(run_id=run_id) == later


def test_an_open_transaction_in_another_database_does_not_hold_the_streams_back(opened):
    db = settings.DATABASES["default"]
    other = psycopg.connect(
        host=db["HOST"],
        port=db["PORT"],
        user=db["USER"],
        password=db["PASSWORD"] or None,
        dbname="postgres",
    )
    try:
        other.execute("SELECT pg_current_xact_id()")  # open, with a transaction id
        cursor = stream_head()
        writer = opened()
        writer.begin()
        written = writer.record()
        writer.commit()
        assert ids(cursor) == [written]
    finally:
        other.close()


def test_an_open_writing_transaction_here_holds_the_streams_back(opened):
    cursor = stream_head()
    idle = opened()
    idle.begin()  # took a transaction id: it may still write an event with a smaller position
    writer = opened()
    writer.begin()
    written = writer.record()
    writer.commit()
    assert ids(cursor) == []
    idle.commit()
    assert ids(cursor) == [written]
