"""The task history's signal handlers: one INSERT per task execution, the run and project found
in it, arguments kept only when small JSON, nothing recorded for eager tasks, and a failed
write never breaks the task."""

import logging
import uuid
from types import SimpleNamespace

import pytest
from django.db import OperationalError

from agentops.actors import Actor
from fleet import receivers
from fleet.models import TaskRecord, TaskState
from fleet.receivers import record_task, stamp_sent_at
from projects.services import project_default
from testsupport.factories import plan_run

pytestmark = pytest.mark.django_db

CALCULATE = {"tool": "calculate", "args": {"expression": "1+1"}}
REQUEST = SimpleNamespace(hostname="w1@host", delivery_info={"routing_key": "celery"}, retries=2)


def test_a_step_task_is_recorded_with_its_run_and_project(
    operator, django_capture_on_commit_callbacks, django_assert_num_queries
):
    run = plan_run(operator, [CALCULATE], capture=django_capture_on_commit_callbacks)
    step = run.steps.get()
    task_id = str(uuid.uuid4())
    # The step's run and project, then the row.
    with django_assert_num_queries(2):
        record_task(
            task_id=task_id,
            name="runs.execute_step",
            state=TaskState.FAILURE,
            args=[step.pk],
            kwargs={},
            request=REQUEST,
            exception=ValueError("bad\x00value"),
            traceback="Traceback ...",
        )
    row = TaskRecord.objects.get(task_id=task_id)
    assert (row.run_id, row.project_id) == (run.pk, project_default().pk)
    assert (row.worker, row.queue, row.retries) == ("w1@host", "celery", 2)
    assert row.exception == "ValueError: bad\ufffdvalue"
    assert row.call == {"args": [step.pk], "kwargs": {}}
    assert row.args_summary == str(step.pk)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("runs.execute_step", [987654321]),  # no such step
        ("runs.execute_step", ["1; DROP TABLE runs_run"]),
        ("runs.advance_run", ["not-a-uuid"]),
        ("runs.advance_run", []),
        ("runs.sweep", []),
    ],
)
def test_a_task_of_no_known_run_is_recorded_without_one(name, args):
    task_id = str(uuid.uuid4())
    record_task(task_id=task_id, name=name, state=TaskState.SUCCESS, args=args, kwargs={})
    row = TaskRecord.objects.get(task_id=task_id)
    assert (row.run_id, row.project_id, row.call["args"]) == (None, None, args)


def test_long_or_non_json_arguments_are_summarised_but_not_kept():
    long_id, odd_id = str(uuid.uuid4()), str(uuid.uuid4())
    record_task(task_id=long_id, name="t", state="failure", args=["x" * 5000], kwargs={})
    record_task(task_id=odd_id, name="t", state="failure", args=[{1, 2}], kwargs={})
    long_row, odd_row = (
        TaskRecord.objects.get(task_id=long_id),
        TaskRecord.objects.get(task_id=odd_id),
    )
    assert long_row.call is None
    assert len(long_row.args_summary) == 200
    assert long_row.args_summary.endswith("…")
    assert (odd_row.call, odd_row.args_summary) == (None, "{1, 2}")
    assert not long_row.resendable


def test_a_failed_write_is_logged_and_does_not_raise(monkeypatch, caplog):
    def broken_create(**fields):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(receivers.TaskRecord.objects, "create", broken_create)
    with caplog.at_level(logging.ERROR, logger="fleet.receivers"):
        record_task(task_id="t-1", name="runs.sweep", state="success", args=[], kwargs={})
    assert "could not record the outcome of task t-1" in caplog.text


def test_arguments_that_cannot_be_shown_do_not_raise(caplog):
    class Hostile:
        def __repr__(self):
            raise RuntimeError("no repr")

    with caplog.at_level(logging.ERROR, logger="fleet.receivers"):
        record_task(task_id="t-2", name="t", state="failure", args=[Hostile()], kwargs={})
    assert "could not record the outcome of task t-2" in caplog.text


def test_eager_tasks_are_not_recorded(operator, django_capture_on_commit_callbacks):
    # Every task of this run runs eagerly, inside the test's transaction.
    run = plan_run(operator, [CALCULATE, CALCULATE], capture=django_capture_on_commit_callbacks)
    assert run.status == "succeeded"
    assert not TaskRecord.objects.exists()


def test_messages_are_stamped_with_their_send_time():
    headers = {"id": "x"}
    stamp_sent_at(headers=headers)
    assert isinstance(headers["sent_at"], float)
    kept = {"sent_at": 1.5}
    stamp_sent_at(headers=kept)
    assert kept == {"sent_at": 1.5}


def test_the_run_of_an_advance_task_is_found(operator):
    from runs.control.create import run_create

    run = run_create(actor=Actor.for_user(operator), agent="plan", goal="g", steps=[CALCULATE])
    task_id = str(uuid.uuid4())
    record_task(
        task_id=task_id, name="runs.advance_run", state="retry", args=[str(run.pk)], kwargs={}
    )
    row = TaskRecord.objects.get(task_id=task_id)
    assert (row.run_id, row.project_id, row.state) == (run.pk, run.project_id, TaskState.RETRY)


@pytest.mark.parametrize(
    ("setting", "recorded"),
    [("all", {"success", "failure", "retry"}), ("failures", {"failure", "retry"}), ("off", set())],
)
def test_the_setting_chooses_which_outcomes_are_recorded(settings, setting, recorded):
    settings.AGENTOPS_TASK_HISTORY = setting
    for state in ("success", "failure", "retry"):
        record_task(task_id=f"t-{state}", name="runs.sweep", state=state, args=[], kwargs={})
    assert set(TaskRecord.objects.values_list("state", flat=True)) == recorded
