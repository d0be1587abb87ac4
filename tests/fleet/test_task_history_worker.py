"""A real worker records each task's outcome in the task history (one row per execution, with
the run it concerned), and a failed task re-sent from the workers page executes again with
the same arguments."""

import uuid
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings
from django.urls import reverse

from agentops import celery_app
from agentops.actors import Actor
from audit.models import AuditEvent
from fleet.models import TaskRecord, TaskState
from fleet.tasks import refresh_workers_report
from projects.services import project_default
from runs.control.create import run_create
from tests.conftest import Worker
from tests.fleet.tasks import fail_until_allowed
from testsupport.factories import make_user
from testsupport.processes import wait_until

pytestmark = pytest.mark.worker

CALCULATE = {"tool": "calculate", "args": {"expression": "6*7"}}


@pytest.fixture
def fleet_worker(tmp_path, transactional_db, seeded, only_this_tests_workers) -> Iterator[Worker]:
    """A worker that also knows ``tests.fleet.tasks``; tasks go to it through Redis."""
    worker = Worker(tmp_path / "worker.log", concurrency=1, include="tests.fleet.tasks")
    celery_app.conf.task_always_eager = False
    yield worker
    celery_app.conf.task_always_eager = True
    worker.stop()


def recorded(task_id: str, state: str) -> TaskRecord:
    return wait_until(
        lambda: TaskRecord.objects.filter(task_id=task_id, state=state).first(),
        30,
        f"a {state} record of task {task_id}",
    )


def test_a_run_s_tasks_are_recorded_with_their_run_and_project(fleet_worker, operator, client):
    run = run_create(actor=Actor.for_user(operator), agent="plan", goal="g", steps=[CALCULATE])
    record = wait_until(
        lambda: TaskRecord.objects.filter(name="runs.advance_run", run_id=run.pk).first(),
        30,
        "the run's advance task recorded",
    )
    assert record.state == TaskState.SUCCESS
    assert record.project_id == project_default().pk
    assert record.call == {"args": [str(run.pk)], "kwargs": {}}
    assert record.args_summary == repr(str(run.pk))
    assert record.worker.startswith("test-")
    assert record.queue == "celery"
    assert record.started_at <= record.finished_at
    assert record.exception == ""
    # The workers' report (kept by the refresh task a worker runs: here run in place) lists
    # this one, and the workers page shows it with the record.
    refresh_workers_report()
    client.force_login(operator)
    html = client.get(reverse("fleet-workers")).content.decode()
    assert f'data-worker="{record.worker}"' in html
    assert f'data-task-record="{record.pk}"' in html


def test_a_failed_task_is_recorded_and_a_resent_copy_runs_again(fleet_worker, client):
    key = f"test-fleet-{uuid.uuid4().hex}"
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    failed = fail_until_allowed.apply_async((key,), {"note": "second time"})
    record = recorded(failed.id, TaskState.FAILURE)
    assert record.name == "tests.fleet.fail_until_allowed"
    assert record.exception == f"RuntimeError: not allowed yet: {key}"
    assert "Traceback" in record.traceback
    assert record.call == {"args": [key], "kwargs": {"note": "second time"}}
    assert (record.run_id, record.project_id) == (None, None)
    assert record.runtime_ms >= 0

    # Work of no run: only a superuser may re-send it.
    client.force_login(make_user("root", superuser=True))
    broker.set(f"{key}:allowed", "1")
    response = client.post(reverse("fleet-task-resend", args=[record.pk]))
    assert response.status_code == 302
    record.refresh_from_db()
    again = recorded(record.resent_task_id, TaskState.SUCCESS)
    assert again.call == record.call
    assert broker.get(f"{key}:done") == b"1"
    event = AuditEvent.objects.get(verb="task.resent")
    assert event.chain == "system"
    assert event.payload["new_task_id"] == record.resent_task_id
    assert event.actor_name == "root"
    broker.delete(f"{key}:allowed", f"{key}:done")
    broker.close()
