"""``runs.queries``: each SQL query deletes exactly what its ORM equivalent deletes, on the
same data (the ORM run inside a savepoint that is rolled back)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from agentops.actors import Actor
from runs.control.create import run_create
from runs.models import Checkpoint, Step, StepAttempt, ToolCall
from runs.queries import steps_delete

pytestmark = pytest.mark.django_db

TABLES = (Step, StepAttempt, Checkpoint, ToolCall)


class _RolledBack(Exception):
    pass


def _remaining() -> dict[str, set[Any]]:
    return {model.__name__: set(model.objects.values_list("pk", flat=True)) for model in TABLES}


def test_steps_delete_deletes_what_the_orm_deletes(
    operator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    actor = Actor.for_user(operator)
    steps = [{"tool": "echo", "args": {"value": i}} for i in range(4)]
    with django_capture_on_commit_callbacks(execute=True):
        kept = run_create(actor=actor, agent="plan", goal="kept", steps=steps)
        gone = run_create(actor=actor, agent="plan", goal="gone", steps=steps)
    ids = list(Step.objects.filter(run=gone).order_by("index").values_list("pk", flat=True))[:3]
    before = _remaining()
    assert all(before[model.__name__] for model in TABLES)

    try:
        with transaction.atomic():
            deleted = Step.objects.filter(pk__in=ids).delete()[1].get("runs.Step", 0)
            by_orm = _remaining()
            raise _RolledBack
    except _RolledBack:
        pass
    assert _remaining() == before

    assert steps_delete(step_ids=ids) == deleted == 3
    assert _remaining() == by_orm
    assert by_orm != before
    assert Step.objects.filter(run=kept).count() == 4
    assert Step.objects.filter(run=gone).count() == 1
