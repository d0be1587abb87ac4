"""A pipelined transaction (``pipelined_atomic``): Django owns it (its BEGIN, COMMIT and
ROLLBACK), the batch inside it sends the statements, the guards are checked by the database
before Django commits, and everything is one transaction, as another connection sees it."""

import select
from collections.abc import Callable

import psycopg
import pytest
from django.conf import settings
from django.db import connection, transaction
from django_fsm import ConcurrentTransition

from agentops.actors import Actor
from runs import wakeups
from runs.control.create import run_create
from runs.models import Checkpoint, Run, Step, StepStatus
from runs.store import inserts, pipeline, rows, writes
from runs.store.transaction import pipelined_atomic
from tests.agentops.costs import client_call, recorded_run
from testsupport.factories import make_run
from testsupport.roundtrips import round_trips

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run(operator):
    """A run of two steps, which tasks run at once here: its checkpoints are removed and its
    steps made pending again, rows for the tests to write."""
    made = make_run(
        operator, goal="own transaction", steps=[{"tool": "echo", "args": {"value": 1}}] * 2
    )
    Checkpoint.objects.filter(run=made).delete()
    Step.objects.filter(run=made).update(status=StepStatus.PENDING)
    return made


def observer() -> psycopg.Connection:
    """A second connection to the test database, outside Django: what others see."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**params, autocommit=True)


def checkpoints_seen_by_others(run: Run) -> int:
    with observer() as other:
        found = other.execute(
            "SELECT count(*) FROM runs_checkpoint WHERE run_id = %s", [run.pk]
        ).fetchone()
    assert found is not None
    return int(found[0])


class GaveUp(Exception):
    """A service's own error inside the block."""


class Silent:
    """A wake-up sender that sends nothing."""

    def execute_step(self, step_id: int) -> None:
        pass

    def advance_run(self, run_id: object) -> None:
        pass

    def retry_step(self, step_id: int, delay: float) -> None:
        pass

    def compact_run(self, run_id: object) -> None:
        pass

    def compact_session(self, session_id: object) -> None:
        pass


def connection_is_idle() -> bool:
    return connection.connection.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_the_writes_are_one_transaction_committed_at_the_end(run):
    step = run.steps.order_by("index").first()
    with pipelined_atomic():
        batch = pipeline.current_batch()
        assert batch is not None
        assert batch.pipelined
        inserts.insert([Checkpoint(run=run, step=step, index=0, state={})], returning=False)
        batch.sync()  # the INSERT has run on the server...
        assert checkpoints_seen_by_others(run) == 0  # ...inside a transaction not yet committed
    assert checkpoints_seen_by_others(run) == 1
    assert connection_is_idle()


def test_a_failed_guard_fails_the_commit_in_the_same_round_trip_and_writes_nothing(run):
    first, second = list(run.steps.order_by("index"))
    loaded = {s.pk: s for s in rows.select(Step, "run_id = %s", [run.pk])}
    Step.objects.filter(pk=second.pk).update(status=StepStatus.SKIPPED)  # after the read
    for pk in (first.pk, second.pk):
        loaded[pk].enqueue()

    def write_both() -> None:
        with pipelined_atomic():
            inserts.insert([Checkpoint(run=run, step=first, index=0, state={})], returning=False)
            for pk in (first.pk, second.pk):
                writes.update(loaded[pk], guard={"status": StepStatus.PENDING})

    with pytest.raises(ConcurrentTransition):
        write_both()
    # The COMMIT went with the writes: only the database's own check kept them out.
    assert checkpoints_seen_by_others(run) == 0
    statuses = dict(Step.objects.filter(run=run).values_list("pk", "status"))
    assert statuses == {first.pk: StepStatus.PENDING, second.pk: StepStatus.SKIPPED}
    assert connection_is_idle()
    # The connection goes on as before: the next transaction commits.
    with pipelined_atomic():
        writes.update(loaded[first.pk], guard={"status": StepStatus.PENDING})
    assert Step.objects.get(pk=first.pk).status == StepStatus.QUEUED


class Stale(Exception):
    """The error of a failed check."""


def _check_then_insert(run: Run, step: Step, before_the_writes: Callable[[], None]) -> None:
    """A pipelined transaction: a check that fails (the step is pending, not queued), then
    ``before_the_writes``, then an INSERT held until the block ends."""
    with pipelined_atomic():
        batch = pipeline.current_batch()
        assert batch is not None
        batch.expect_later(
            "SELECT 1 FROM runs_step WHERE id = %s AND status = %s",
            [step.pk, StepStatus.QUEUED],
            Stale("not queued"),
        )
        before_the_writes()
        inserts.insert([Checkpoint(run=run, step=step, index=0, state={})], returning=False)


def test_a_failed_check_fails_the_block_before_django_commits_and_writes_nothing(run):
    """The check's answer comes with the held writes, before Django's COMMIT: the block fails
    with the check's error, Django rolls back, and nothing is written."""
    first = run.steps.order_by("index").first()
    with round_trips(connection) as trips, pytest.raises(Stale):
        _check_then_insert(run, first, lambda: None)
    assert trips.commits == 0
    assert checkpoints_seen_by_others(run) == 0
    assert connection_is_idle()


def test_a_check_answered_before_the_writes_are_sent_fails_the_block_as_well(run):
    """The other order: the check's error is in the socket before the held writes go out
    (PostgreSQL sends an error at once, without waiting for the pipeline's sync). psycopg
    reads it while sending the INSERT, so the batch stops there and Django rolls the
    transaction back: nothing is written, the block fails with the check's error, and the
    connection (and the statements psycopg prepares on their fifth use) goes on working."""
    first = run.steps.order_by("index").first()
    connection.ensure_connection()
    pgconn = connection.connection.pgconn

    def answered() -> None:
        readable, _, _ = select.select([pgconn.socket], [], [], 30)
        assert readable, "the check's error never arrived"

    for _ in range(settings.DATABASES["default"]["OPTIONS"].get("prepare_threshold") or 1):
        with round_trips(connection) as trips, pytest.raises(Stale):
            _check_then_insert(run, first, answered)
        assert trips.commits == 0
        assert checkpoints_seen_by_others(run) == 0
        assert connection_is_idle()
    Step.objects.filter(pk=first.pk).update(status=StepStatus.QUEUED)
    _check_then_insert(run, first, lambda: None)
    assert checkpoints_seen_by_others(run) == 1


def test_a_check_that_holds_lets_the_writes_commit(run):
    first = run.steps.order_by("index").first()
    with pipelined_atomic():
        batch = pipeline.current_batch()
        assert batch is not None
        batch.expect_later(
            "SELECT 1 FROM runs_step WHERE id = %s AND status = %s FOR UPDATE",
            [first.pk, StepStatus.PENDING],
            Stale("not pending"),
        )
        inserts.insert([Checkpoint(run=run, step=first, index=0, state={})], returning=False)
    assert checkpoints_seen_by_others(run) == 1


def test_an_error_in_the_block_rolls_the_transaction_back(run):
    step = run.steps.order_by("index").first()

    def give_up() -> None:
        with pipelined_atomic():
            inserts.insert([Checkpoint(run=run, step=step, index=0, state={})], returning=False)
            pipeline.current_batch().sync()  # type: ignore[union-attr]
            raise GaveUp

    with pytest.raises(GaveUp):
        give_up()
    assert checkpoints_seen_by_others(run) == 0
    assert connection_is_idle()
    with transaction.atomic():
        Checkpoint.objects.create(run=run, step=step, index=0, state={})
    assert checkpoints_seen_by_others(run) == 1


def test_an_orm_statement_ends_the_pipeline_and_django_commits_the_rest(run):
    first, second = list(run.steps.order_by("index"))
    with pipelined_atomic():
        inserts.insert([Checkpoint(run=run, step=first, index=0, state={})], returning=False)
        Step.objects.filter(pk=second.pk).update(rationale="by the ORM")
        assert pipeline.current_batch() is None
        assert checkpoints_seen_by_others(run) == 0
    assert checkpoints_seen_by_others(run) == 1
    assert Step.objects.get(pk=second.pk).rationale == "by the ORM"

    def give_up_after_the_orm() -> None:
        with pipelined_atomic():
            inserts.insert([Checkpoint(run=run, step=second, index=1, state={})], returning=False)
            Step.objects.filter(pk=second.pk).update(rationale="rolled back")
            raise GaveUp

    with pytest.raises(GaveUp):
        give_up_after_the_orm()
    assert checkpoints_seen_by_others(run) == 1
    assert Step.objects.get(pk=second.pk).rationale == "by the ORM"
    assert connection_is_idle()


def test_a_recorded_step_costs_three_round_trips_and_one_commit(monkeypatch):
    """Each step after the second: Django's BEGIN (psycopg waits for it); the check of what the
    claim's transaction left, the writes, the audit events, the next step's claim and what
    the next transaction needs, in one round trip; Django's COMMIT."""
    monkeypatch.setattr(settings, "AGENTOPS_CLAIM_NEXT_SECONDS", 60)
    # No wake-up reaches the (eager) tasks: this test's worker runs each run from its start.
    monkeypatch.setattr(wakeups, "_installed", [Silent()])
    short, long = recorded_run(11), recorded_run(21)
    assert (long.count - short.count, long.commits - short.commits) == (30, 10)


def test_a_client_step_appended_and_reported_costs_nine_round_trips(operator):
    """Appending (the run's policy: its grants and project's policy version, one read before
    BEGIN; BEGIN; the locks and reads; the writes; COMMIT) and reporting (the same) a
    low-risk client step, as the MCP gateway does for each call."""
    actor = Actor.for_user(operator)
    run = run_create(actor=actor, agent="client", goal="client round trips")
    client_call(actor, run.pk, 0)  # the first call of a run also starts it
    calls = [client_call(actor, run.pk, n) for n in (1, 2, 3)]
    assert [(trips.count, trips.commits) for trips in calls] == [(9, 2)] * 3
    assert list(run.steps.order_by("index").values_list("status", "result")) == [
        ("succeeded", n) for n in range(4)
    ]
