"""What loading rows for a page costs less of, with the same values: timestamps by psycopg's
C loader (``agentops.postgresql``); django-fsm's optimistic locking still holds on loaded
rows."""

from __future__ import annotations

import datetime

import pytest
from django.db import connection
from django_fsm import ConcurrentTransition

from agentops.postgresql.base import UtcTimestamptzLoader
from runs.models import Run, RunStatus
from testsupport.factories import run_row

pytestmark = pytest.mark.django_db

MOMENT = datetime.datetime(2026, 3, 29, 1, 30, 15, 123456, tzinfo=datetime.UTC)


def test_timestamps_load_as_aware_utc_datetimes_with_the_c_loader() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT %s::timestamptz, '2026-03-29 03:30:15.123456+02'::timestamptz,"
            " '0001-01-01 00:00:00+00'::timestamptz",
            [MOMENT],
        )
        row = cursor.fetchone()
        loader = cursor.cursor.adapters.get_loader(1184, 0)
    assert loader is UtcTimestamptzLoader
    assert row == (MOMENT, MOMENT, datetime.datetime(1, 1, 1, tzinfo=datetime.UTC))
    assert all(value.tzinfo is datetime.UTC for value in row)


def test_a_model_timestamp_reads_back_as_written() -> None:
    run = run_row(goal="g")
    Run.objects.filter(pk=run.pk).update(created_at=MOMENT)
    loaded = Run.objects.get(pk=run.pk)
    assert loaded.created_at == MOMENT
    assert loaded.created_at.tzinfo is datetime.UTC
    assert loaded.created_at.isoformat() == "2026-03-29T01:30:15.123456+00:00"


def test_a_stale_instance_still_cannot_save_over_a_changed_status() -> None:
    run = run_row(goal="g")
    stale = Run.objects.get(pk=run.pk)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    stale.goal = "other"
    with pytest.raises(ConcurrentTransition):
        stale.save()
