"""Batches of rows: pipelined reads, writes held and sent as one statement, guards checked
before the commit, and what a batch costs in round trips as libpq's own trace counts them."""

import uuid

import pytest
from django.db import connection, transaction
from django_fsm import ConcurrentTransition

from agentops.actors import Actor
from audit.services import audited_atomic
from runs.control.create import run_create
from runs.executor.entry import run_advance
from runs.models import Checkpoint, Run, Step, StepStatus
from runs.store import inserts, pipeline, rows, writes
from tests.agentops.costs import client_call, recorded_run
from testsupport.factories import make_run
from testsupport.roundtrips import count_round_trips, round_trips

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(operator):
    return make_run(operator, goal="batch", steps=[{"tool": "echo", "args": {"value": 1}}] * 3)


def test_the_round_trip_count_follows_the_trace_not_the_messages():
    trace = "\n".join(
        [
            "F\t10\tQuery\t BEGIN",  # one message, one answer: 1
            "B\t10\tCommandComplete\t BEGIN",
            "B\t5\tReadyForQuery\t T",
            "F\t40\tParse",  # a pipeline of three statements and a sync: 1
            "F\t40\tBind",
            "F\t9\tExecute",
            "F\t40\tBind",
            "F\t9\tExecute",
            "F\t4\tSync",
            "B\t13\tCommandComplete",
            "B\t13\tCommandComplete",
            "B\t5\tReadyForQuery\t T",
            "B\t20\tNoticeResponse",  # unasked: no round trip
            'F\t11\tQuery\t "COMMIT"',
            'B\t11\tCommandComplete\t "COMMIT"',
            "B\t5\tReadyForQuery\t I",
        ]
    )
    found = count_round_trips(trace)
    assert (found.count, found.sent, found.commits) == (3, 8, 1)


def test_reads_queued_together_cost_one_round_trip(run):
    step_ids = list(run.steps.order_by("index").values_list("pk", flat=True))
    connection.ensure_connection()
    with transaction.atomic(), pipeline.batch() as batch, round_trips(connection) as trips:
        read_run = rows.select_later(Run, "id = %s", [run.pk], lock=True)
        read_steps = [rows.select_later(Step, "id = %s", [pk]) for pk in step_ids]
        batch.sync()
        (loaded_run,) = read_run()
        loaded = [read() for read in read_steps]
    assert trips.count == 1
    assert loaded_run.goal == "batch"
    assert [step.pk for (step,) in loaded] == step_ids


def test_held_writes_go_as_one_statement_and_all_take_effect(run):
    first, second, third = run.steps.order_by("index")
    with transaction.atomic(), pipeline.batch():
        for step in rows.select(Step, "run_id = %s", [run.pk], order_by='"index"'):
            step.enqueue()
            writes.update(step, guard={"status": StepStatus.PENDING})
        inserts.insert([Checkpoint(run=run, step=first, index=0, state={"k": 1})], returning=False)
        writes.write_where(Run, {"goal": "written"}, {"pk": run.pk})
        batch = pipeline.current_batch()
        assert batch is not None
        assert len(batch._held.writes) == 5  # nothing sent yet
    stored = dict(Step.objects.filter(run=run).values_list("pk", "status"))
    assert stored == {first.pk: "queued", second.pk: "queued", third.pk: "queued"}
    assert Run.objects.get(pk=run.pk).goal == "written"
    assert list(Checkpoint.objects.filter(run=run).values_list("state", flat=True)) == [{"k": 1}]


def test_two_writes_of_one_row_both_take_effect(run):
    # One statement may change a row only once: the second write starts a new statement.
    step = run.steps.order_by("index").first()
    with transaction.atomic(), pipeline.batch():
        writes.write_where(Step, {"rationale": "one"}, {"pk": step.pk})
        writes.write_where(Step, {"lease_owner": "two"}, {"pk": step.pk})
    stored = Step.objects.get(pk=step.pk)
    assert (stored.rationale, stored.lease_owner) == ("one", "two")


def test_an_update_after_an_insert_of_its_table_sees_the_new_row(run):
    step = run.steps.order_by("index").first()
    with transaction.atomic(), pipeline.batch():
        inserts.insert([Checkpoint(run=run, step=step, index=0, state={})], returning=False)
        writes.write_where(Checkpoint, {"state": {"seen": True}}, {"run_id": run.pk})
    assert list(Checkpoint.objects.filter(run=run).values_list("state", flat=True)) == [
        {"seen": True}
    ]


def test_a_failed_guard_raises_before_the_commit_and_nothing_is_written(run):
    first, second = list(run.steps.order_by("index"))[:2]
    loaded = {s.pk: s for s in rows.select(Step, "run_id = %s", [run.pk])}
    Step.objects.filter(pk=second.pk).update(status=StepStatus.SKIPPED)  # after the read
    for pk in (first.pk, second.pk):
        loaded[pk].enqueue()

    def write_both() -> None:
        with transaction.atomic(), pipeline.batch():
            for pk in (first.pk, second.pk):
                writes.update(loaded[pk], guard={"status": StepStatus.PENDING})
            inserts.insert([Checkpoint(run=run, step=first, index=0, state={})], returning=False)

    with pytest.raises(ConcurrentTransition):
        write_both()
    statuses = dict(Step.objects.filter(run=run).values_list("pk", "status"))
    assert statuses[first.pk] == StepStatus.PENDING
    assert statuses[second.pk] == StepStatus.SKIPPED
    assert not Checkpoint.objects.filter(run=run).exists()


def test_an_orm_statement_closes_the_batch_and_reads_a_true_count(run):
    step = run.steps.order_by("index").first()
    with transaction.atomic(), pipeline.batch():
        writes.write_where(Step, {"rationale": "held"}, {"pk": step.pk})
        # The ORM reads its row count at once: the batch sends what it holds first.
        assert Step.objects.filter(pk=step.pk, rationale="held").update(lease_owner="orm") == 1
        assert pipeline.current_batch() is None
    assert Step.objects.get(pk=step.pk).lease_owner == "orm"


def test_a_json_field_changed_in_place_or_to_an_equal_python_value_is_written(run):
    step = run.steps.order_by("index").first()
    Step.objects.filter(pk=step.pk).update(result={"n": [1]})
    loaded = rows.get(Step, step.pk)
    loaded.result["n"].append(2)  # in place: the loaded object itself changed
    with transaction.atomic():
        writes.update(loaded, guard={"status": StepStatus.PENDING})
    assert Step.objects.get(pk=step.pk).result == {"n": [1, 2]}
    loaded = rows.get(Step, step.pk)
    loaded.result = {"n": [True, 2]}  # equal in Python (1 == True), not in JSON
    with transaction.atomic():
        writes.update(loaded, guard={"status": StepStatus.PENDING})
    with connection.cursor() as cursor:
        cursor.execute("SELECT result::text FROM runs_step WHERE id = %s", [step.pk])
        assert cursor.fetchone()[0] == '{"n": [true, 2]}'


def test_an_unchanged_field_is_not_written(run):
    step = run.steps.order_by("index").first()
    loaded = rows.get(Step, step.pk)
    # Changed by someone else after the load: an update that does not change it keeps theirs.
    Step.objects.filter(pk=step.pk).update(lease_owner="someone")
    loaded.enqueue()
    with transaction.atomic():
        writes.update(loaded, guard={"status": StepStatus.PENDING})
    stored = Step.objects.get(pk=step.pk)
    assert (stored.status, stored.lease_owner) == (StepStatus.QUEUED, "someone")


def test_a_recorded_step_costs_three_round_trips_inside_another_transaction(settings):
    """Each step after the second, inside the test's transaction: the savepoint, the check of
    what the claim left with the writes, the audit events and the next step's claim, and the
    savepoint's release (on its own, test_pipeline_transaction: one)."""
    settings.AGENTOPS_CLAIM_NEXT_SECONDS = 60
    assert recorded_run(21).count - recorded_run(11).count == 3 * 10


def test_audit_events_of_a_pipelined_block_keep_the_chain_valid(run):
    from audit.selectors import chain_verify

    run_advance(run_id=run.pk, actor=Actor.worker(), execute=True)
    assert Run.objects.get(pk=run.pk).status == "succeeded"
    report = chain_verify(f"run:{run.pk}")
    assert report.ok, report


def test_prefetching_audit_chains_needs_a_pipelined_block():
    from runs.store.audit import prefetch_chains

    with pytest.raises(RuntimeError), audited_atomic():
        prefetch_chains([f"run:{uuid.uuid4()}"], 1)


def test_a_client_step_appended_and_reported_costs_nine_round_trips(operator):
    """Appending (the run's policy: its grants and project's policy version, one read before
    the savepoint; savepoint; locks, count, reserved key, a repeat of the call; writes;
    release) and reporting (savepoint; locks; writes; release) a low-risk client step inside
    the test's transaction, as the MCP gateway does for each call; the risk rules are kept by
    the process."""
    actor = Actor.for_user(operator)
    run = run_create(actor=actor, agent="client", goal="client round trips")
    client_call(actor, run.pk, 0)  # the first call of a run also starts it
    assert [client_call(actor, run.pk, n).count for n in (1, 2, 3)] == [9, 9, 9]
    assert list(run.steps.order_by("index").values_list("status", "result")) == [
        ("succeeded", n) for n in range(4)
    ]
    from audit.selectors import chain_verify

    assert chain_verify(f"run:{run.pk}").ok
