"""The executor's plain-SQL rows read and write exactly what the ORM would."""

import importlib.metadata
import uuid
from datetime import datetime

import pytest
from django.db import connection, transaction
from django.db.models.signals import post_init
from django.test.utils import CaptureQueriesContext
from django_fsm import ConcurrentTransition

from agentops.actors import Actor
from runs.executor.entry import run_advance
from runs.models import Checkpoint, Run, Step, StepAttempt, StepStatus, ToolCall
from runs.store import inserts, rows, writes
from testsupport.factories import make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(operator):
    return make_run(
        operator,
        goal="rows",
        steps=[{"tool": "echo", "args": {"value": {"nested": [1, "two"]}}}] * 2,
    )


def test_a_selected_row_equals_the_orm_instance(run):
    step = run.steps.order_by("index").first()
    (loaded,) = rows.select(Step, "id = %s", [step.pk])
    for field in Step._meta.concrete_fields:
        assert getattr(loaded, field.attname) == getattr(step, field.attname), field.name
    assert loaded.args == {"value": {"nested": [1, "two"]}}
    assert isinstance(loaded.run_id, uuid.UUID)
    assert isinstance(loaded.created_at, datetime)
    assert loaded.created_at.tzinfo is not None


def _instance_state(obj):
    found = {k: v for k, v in obj.__dict__.items() if k not in ("_state", rows.LOADED)}
    return found, (obj._state.adding, obj._state.db)


@pytest.mark.parametrize("model", [Run, Step, StepAttempt, Checkpoint, ToolCall])
def test_instances_are_built_as_from_db_builds_them(model, run):
    # Executed, so that the run has rows of every model on the hot path.
    run_advance(run_id=run.pk, actor=Actor.worker(), execute=True)
    table = rows.table_of(model)
    found = rows.fetch(f"SELECT {rows.column_list(model)} FROM {table.name}", [])  # noqa: S608
    assert found, model
    built = rows.instances(model, found)
    for row, obj in zip(found, built, strict=True):
        values = rows._converted(table, row, connection)
        expected = model.from_db(connection.alias, table.attnames, values)
        assert _instance_state(obj) == _instance_state(expected)
        assert type(obj) is model


def test_instances_call_the_init_receivers_of_a_model_that_has_them(run):
    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append((sender, instance.pk))

    post_init.connect(receiver, sender=Step)
    try:
        loaded = rows.select(Step, "run_id = %s", [run.pk], order_by='"index"')
    finally:
        post_init.disconnect(receiver, sender=Step)
    assert len(loaded) == 2
    assert seen == [(Step, step.pk) for step in loaded]


class StepWithInit(Step):
    """A proxy of Step whose ``__init__`` does more than Django's."""

    class Meta:
        proxy = True
        app_label = "runs"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.built_by_init = True


def test_instances_go_through_a_models_own_init(run):
    loaded = rows.select(StepWithInit, "run_id = %s", [run.pk], order_by='"index"')
    assert [step.index for step in loaded] == [0, 1]
    assert all(step.built_by_init for step in loaded)


def test_select_orders_limits_and_finds_nothing_without_error(run):
    found = rows.select(Step, "run_id = %s", [run.pk], order_by='"index" DESC', limit=1)
    assert [s.index for s in found] == [1]
    with pytest.raises(Run.DoesNotExist):
        rows.get(Run, uuid.uuid4())


def test_update_writes_the_declared_fields_and_updated_at_only(run):
    step = rows.get(Step, run.steps.first().pk)
    before = step.updated_at
    step.enqueue()
    step.rationale = "not written"  # fixed after insert: not in Step.UPDATED_FIELDS
    with transaction.atomic():
        writes.update(step, guard={"status": StepStatus.PENDING})
    stored = Step.objects.get(pk=step.pk)
    assert stored.status == StepStatus.QUEUED
    assert stored.rationale == ""
    assert stored.updated_at > before
    # The instance's concurrency record follows the row: an ORM save is guarded by "queued".
    step.save()


def test_fsm_saved_state_is_recorded_on_the_installed_django_fsm(run):
    """Fails on a django-fsm-2 release ``writes.fsm_record_saved`` was not written for: check
    that ``ConcurrentTransitionMixin.save`` still calls ``_update_initial_state`` and guards
    on what it recorded, then add the release to ``FSM_SAVED_STATE_RELEASES``."""
    assert importlib.metadata.version("django-fsm-2").startswith(writes.FSM_SAVED_STATE_RELEASES)
    step = rows.get(Step, run.steps.first().pk)
    step.enqueue()
    with CaptureQueriesContext(connection) as queries:
        writes.update(step, guard={"status": StepStatus.PENDING})
    assert len(queries) == 1, "the statuses were read back: the release is not supported"
    Step.objects.filter(pk=step.pk).update(status=StepStatus.RUNNING)
    with pytest.raises(ConcurrentTransition):
        step.save()


def test_after_mark_saved_an_update_writes_only_what_changed_since(run):
    step = rows.get(Step, run.steps.first().pk)
    step.enqueue()
    with transaction.atomic():
        writes.update(step, guard={"status": StepStatus.PENDING})
    rows.mark_saved(step)
    # Changed by someone else after the save: the next update, which does not change it,
    # keeps theirs (without the record it would write back the instance's "").
    Step.objects.filter(pk=step.pk).update(lease_owner="someone")
    step.result = {"kept": True}
    with transaction.atomic():
        writes.update(step, guard={"status": StepStatus.QUEUED})
    stored = Step.objects.get(pk=step.pk)
    assert (stored.lease_owner, stored.result) == ("someone", {"kept": True})


def test_after_mark_saved_a_json_value_changed_in_place_is_written(run):
    step = rows.get(Step, run.steps.first().pk)
    step.result = {"n": [1]}
    with transaction.atomic():
        writes.update(step, guard={"status": StepStatus.PENDING})
    rows.mark_saved(step)
    step.result["n"].append(2)
    with transaction.atomic():
        writes.update(step, guard={"status": StepStatus.PENDING})
    assert Step.objects.get(pk=step.pk).result == {"n": [1, 2]}


def test_a_clone_changes_without_its_original(run):
    step = rows.get(Step, run.steps.first().pk)
    twin = rows.clone(step)
    twin.enqueue()
    twin.lease_owner = "twin"
    assert (step.status, step.lease_owner) == (StepStatus.PENDING, "")
    assert twin._state is not step._state
    with transaction.atomic():
        writes.update(twin, guard={"status": StepStatus.PENDING})
    # The original still writes as the row was loaded: its own change, guarded by "pending".
    step.enqueue()
    with pytest.raises(ConcurrentTransition):
        writes.update(step, guard={"status": StepStatus.PENDING})
    assert Step.objects.get(pk=step.pk).lease_owner == "twin"


def test_update_refuses_a_row_changed_since_it_was_read(run):
    step = rows.get(Step, run.steps.first().pk)
    Step.objects.filter(pk=step.pk).update(status=StepStatus.SKIPPED)
    step.enqueue()
    with pytest.raises(ConcurrentTransition):
        writes.update(step, guard={"status": StepStatus.PENDING})
    assert Step.objects.get(pk=step.pk).status == StepStatus.SKIPPED


def test_insert_sets_keys_and_creation_times_in_order(run):
    steps = list(run.steps.order_by("index"))
    checkpoints = [
        Checkpoint(run=run, step=s, index=s.index, state={"after": s.index}) for s in steps
    ]
    inserts.insert(checkpoints)
    assert all(c.pk is not None and c.created_at is not None for c in checkpoints)
    stored = {c.pk: c.state for c in Checkpoint.objects.filter(run=run)}
    assert [stored[c.pk] for c in checkpoints] == [{"after": 0}, {"after": 1}]


# Values an array literal must quote or escape, and values only some rows have.
AWKWARD = [
    "plain",
    'a,b {"c"} \\ NULL',
    "NULL",
    "",
    "é ✓ \U0001f600",
    "line\nbreak\ttab",
]


def test_rows_inserted_by_column_keep_every_value_and_their_order(run, operator):
    steps = [
        Step(
            run=run,
            index=10 + i,
            tool=f"tool-{i}",
            idempotency_key=f"rows-test-{i}",
            args={"text": text, "list": [text, None, 1.5], "deep": {"k": [text]}},
            rationale=text,
            requested_by=operator if i % 2 else None,
            result=None if i % 3 else {"r": text},
            next_attempt_at=datetime.fromisoformat("2026-01-02T03:04:05.123456+00:00")
            if i == 2
            else None,
        )
        for i, text in enumerate(AWKWARD)
    ]
    inserts.insert(steps)
    assert len({s.pk for s in steps}) == len(AWKWARD)
    stored = {s.pk: s for s in Step.objects.filter(run=run, index__gte=10)}
    for i, text in enumerate(AWKWARD):
        got = stored[steps[i].pk]
        assert (got.index, got.tool, got.rationale) == (10 + i, f"tool-{i}", text)
        assert got.args == {"text": text, "list": [text, None, 1.5], "deep": {"k": [text]}}
        assert got.requested_by_id == (operator.pk if i % 2 else None)
        assert got.result == (None if i % 3 else {"r": text})
        assert got.status == StepStatus.PENDING
    assert stored[steps[2].pk].next_attempt_at == datetime.fromisoformat(
        "2026-01-02T03:04:05.123456+00:00"
    )


def test_an_insert_of_many_rows_has_one_text_for_any_number_of_rows(run):
    texts = set()
    for count in (2, 3, 25):
        steps = [
            Step(run=run, index=100 * count + i, tool="echo", idempotency_key=f"{count}-{i}")
            for i in range(count)
        ]
        with CaptureQueriesContext(connection) as queries:
            inserts.insert(steps, returning=False)
        texts.add(queries.captured_queries[-1]["sql"].split(" SELECT ")[0])
        assert Step.objects.filter(run=run, index__gte=100 * count).count() == count
    if connection.vendor == "postgresql":
        assert len(texts) == 1
