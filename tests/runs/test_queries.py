"""``runs.queries``: each SQL query does exactly what its ORM equivalent does, on the same
data (the ORM run inside a savepoint that is rolled back); one with no ORM equivalent is
checked against a second database session."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections, transaction
from django.db.models import Model, QuerySet

from agentops.actors import Actor
from runs.control.conversation import run_messages_append
from runs.control.create import run_create
from runs.control.fork import run_fork
from runs.models import (
    Checkpoint,
    Message,
    ModelCall,
    Run,
    Step,
    StepAttempt,
    ToolCall,
)
from runs.queries import advisory_lock_release, advisory_lock_try, runs_delete, steps_delete

pytestmark = pytest.mark.django_db

TABLES = (Step, StepAttempt, Checkpoint, ToolCall)
RUN_TABLES = (Run, Message, ModelCall)


class _RolledBack(Exception):
    pass


def _rows(*models: type[Model]) -> dict[str, set[Any]]:
    return {m.__name__: set(m._default_manager.values_list("pk", flat=True)) for m in models}


def _by_orm(delete: QuerySet[Any], remaining: Callable[[], Any]) -> tuple[int, Any]:
    """How many rows of its model ``delete``'s ORM delete deletes, and the ``remaining`` rows
    after it; rolled back, checked to leave the rows as they were."""
    before = remaining()
    try:
        with transaction.atomic():
            deleted = delete.delete()[1].get(delete.model._meta.label, 0)
            left = remaining()
            raise _RolledBack
    except _RolledBack:
        pass
    assert remaining() == before
    assert left != before
    return deleted, left


def _plan_runs(operator: Any, capture: Any, goals: list[str], steps: int) -> list[Run]:
    """Plan runs of ``steps`` echo steps each, executed."""
    actor = Actor.for_user(operator)
    plan = [{"tool": "echo", "args": {"value": i}} for i in range(steps)]
    with capture(execute=True):
        return [run_create(actor=actor, agent="plan", goal=goal, steps=plan) for goal in goals]


def test_steps_delete_deletes_what_the_orm_deletes(
    operator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    kept, gone = _plan_runs(operator, django_capture_on_commit_callbacks, ["kept", "gone"], 4)
    ids = list(Step.objects.filter(run=gone).order_by("index").values_list("pk", flat=True))[:3]
    assert all(_rows(*TABLES).values())
    deleted, by_orm = _by_orm(Step.objects.filter(pk__in=ids), lambda: _rows(*TABLES))

    assert steps_delete(step_ids=ids) == deleted == 3
    assert _rows(*TABLES) == by_orm
    assert Step.objects.filter(run=kept).count() == 4
    assert Step.objects.filter(run=gone).count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_advisory_lock_is_held_until_released() -> None:
    """No ORM equivalent: checked against a second database session."""
    key = 424242
    other = connections.create_connection("default")
    try:
        assert advisory_lock_try(key=key)

        def other_takes() -> bool:
            with other.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
                taken = bool(cursor.fetchone()[0])
                if taken:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
                return taken

        assert not other_takes()
        advisory_lock_release(key=key)
        assert other_takes()
    finally:
        other.close()


def test_runs_delete_deletes_what_the_orm_deletes(
    operator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    (planned,) = _plan_runs(operator, django_capture_on_commit_callbacks, ["forked"], 2)
    actor = Actor.for_user(operator)
    with django_capture_on_commit_callbacks(execute=True):
        fork = run_fork(run_id=planned.pk, actor=actor, from_index=1)
        talking = run_create(actor=actor, agent="client", goal="talks")
        run_messages_append(
            actor=actor,
            run_id=talking.pk,
            messages=[{"role": "user", "content": "hi"}],
            usage={"model": "m", "input_tokens": 3, "output_tokens": 2},
        )
        kept = run_create(actor=actor, agent="client", goal="kept")
        run_messages_append(
            actor=actor, run_id=kept.pk, messages=[{"role": "user", "content": "x"}]
        )
    ids = [planned.pk, talking.pk]
    Step.objects.filter(run_id__in=ids).delete()

    def remaining() -> dict[str, Any]:
        forks = Run.objects.filter(forked_from__isnull=False).values_list("pk", flat=True)
        return {**_rows(*RUN_TABLES), "forks": set(forks)}

    assert all(remaining().values())
    deleted, by_orm = _by_orm(Run.objects.filter(pk__in=ids), remaining)

    assert runs_delete(run_ids=ids) == deleted == 2
    assert remaining() == by_orm
    assert Run.objects.get(pk=fork.pk).forked_from_id is None
    assert Message.objects.filter(run=kept).count() == 1
