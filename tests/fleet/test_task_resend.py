"""Re-sending a failed task from the workers page: operators of the task's run's project may,
viewers and other projects' members may not (and nothing changes then); the task history is
scoped to the user's projects."""

import uuid

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from agentops import celery_app
from audit.models import AuditEvent
from fleet.models import TaskRecord, TaskState
from fleet.services import task_history_purge
from projects.models import Project
from testsupport.factories import make_run, make_user

pytestmark = pytest.mark.django_db

CALCULATE = {"tool": "calculate", "args": {"expression": "1+1"}}


@pytest.fixture
def sent(monkeypatch):
    """The messages ``celery_app.send_task`` would have sent: (name, args, kwargs, task_id)."""
    calls = []
    monkeypatch.setattr(
        celery_app,
        "send_task",
        lambda name, args=None, kwargs=None, task_id=None, **options: calls.append(
            (name, args, kwargs, task_id)
        ),
    )
    return calls


@pytest.fixture
def quiet_broker(monkeypatch):
    """The workers page without a broker round trip: no queues (and, eager, no workers)."""
    from fleet import broker

    monkeypatch.setattr(broker, "queue_states", lambda: [])


def record(*, run=None, state=TaskState.FAILURE, name="runs.advance_run", call=None, **fields):
    now = timezone.now()
    return TaskRecord.objects.create(
        task_id=str(uuid.uuid4()),
        name=name,
        state=state,
        call=call if call is not None else {"args": [str(run.pk) if run else "x"], "kwargs": {}},
        args_summary="…",
        run_id=run.pk if run else None,
        project_id=run.project_id if run else None,
        started_at=now,
        finished_at=now,
        exception="RuntimeError: boom" if state == TaskState.FAILURE else "",
        **fields,
    )


@pytest.fixture
def runs(operator):
    beta = Project.objects.create(slug="beta", name="Beta")
    beth = make_user("beth", "operator", project=beta)
    mine = make_run(operator, goal="g", steps=[CALCULATE])
    theirs = make_run(beth, goal="g", steps=[CALCULATE], project=beta)
    return mine, theirs, beth


@pytest.fixture
def resend(client, django_capture_on_commit_callbacks):
    """POST the re-send of a history row as the client's user, on-commit work executed."""

    def post(record_id):
        with django_capture_on_commit_callbacks(execute=True):
            return client.post(reverse("fleet-task-resend", args=[record_id]))

    return post


def messages_of(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_an_operator_resends_a_failed_task_of_their_project(client, operator, runs, sent, resend):
    mine, _, _ = runs
    failed = record(run=mine)
    client.force_login(operator)
    response = resend(failed.pk)
    assert response.status_code == 302
    failed.refresh_from_db()
    assert failed.resent_task_id
    assert sent == [("runs.advance_run", [str(mine.pk)], {}, failed.resent_task_id)]
    event = AuditEvent.objects.get(verb="task.resent")
    assert (event.run_id, event.chain) == (mine.pk, f"run:{mine.pk}")
    assert event.payload == {
        "task": "runs.advance_run",
        "task_id": failed.task_id,
        "args": [str(mine.pk)],
        "kwargs": {},
        "new_task_id": failed.resent_task_id,
    }
    assert messages_of(response) == [f"Task re-sent as {failed.resent_task_id}."]

    # A second click does not send it twice.
    again = resend(failed.pk)
    assert len(sent) == 1
    # (The first message is still unread: the test follows no redirect.)
    assert messages_of(again)[-1] == (
        f"Cannot re-send: it was re-sent already, as task {failed.resent_task_id}."
    )


@pytest.mark.parametrize(
    ("state", "call", "says"),
    [
        (TaskState.SUCCESS, None, "only a failed task can be re-sent; this one ended success"),
        (TaskState.RETRY, None, "only a failed task can be re-sent; this one ended retry"),
    ],
)
def test_only_failed_tasks_are_resent(client, operator, runs, sent, state, call, says, resend):
    done = record(run=runs[0], state=state, call=call)
    client.force_login(operator)
    response = resend(done.pk)
    assert messages_of(response) == [f"Cannot re-send: {says}."]
    assert sent == []
    assert not AuditEvent.objects.filter(verb="task.resent").exists()


def test_a_task_whose_arguments_were_not_kept_cannot_be_resent(
    client, operator, runs, sent, resend
):
    failed = record(run=runs[0])
    TaskRecord.objects.filter(pk=failed.pk).update(call=None)
    client.force_login(operator)
    response = resend(failed.pk)
    assert "its arguments were not kept" in messages_of(response)[0]
    assert sent == []


def test_a_viewer_may_not_resend(client, runs, sent, resend):
    failed = record(run=runs[0])
    viewer = make_user("vera", "viewer")
    client.force_login(viewer)
    assert resend(failed.pk).status_code == 403
    assert client.get(reverse("fleet-workers")).status_code == 403
    failed.refresh_from_db()
    assert failed.resent_task_id == ""
    assert sent == []
    assert not AuditEvent.objects.filter(verb="task.resent").exists()


def test_another_projects_task_is_not_found(client, runs, sent, resend):
    _, theirs, _ = runs
    other = make_user("otto", "operator")  # operator of the default project only
    failed = record(run=theirs)
    system = record(name="runs.sweep", call={"args": [], "kwargs": {}})
    client.force_login(other)
    for target in (failed, system):
        assert resend(target.pk).status_code == 404
        target.refresh_from_db()
        assert target.resent_task_id == ""
    assert resend(999999).status_code == 404
    assert sent == []


def test_resending_needs_a_post(client, operator, runs, sent):
    failed = record(run=runs[0])
    client.force_login(operator)
    assert client.get(reverse("fleet-task-resend", args=[failed.pk])).status_code == 405
    assert sent == []


def test_the_workers_page_lists_only_the_users_projects_tasks(client, operator, runs, quiet_broker):
    mine, theirs, _ = runs
    own = record(run=mine)
    other = record(run=theirs)
    system = record(name="runs.sweep", call={"args": [], "kwargs": {}})
    client.force_login(operator)
    html = client.get(reverse("fleet-workers")).content.decode()
    assert f'data-task-record="{own.pk}"' in html
    assert f'data-task-record="{other.pk}"' not in html
    assert f'data-task-record="{system.pk}"' not in html
    assert html.count("data-resend") == 1
    client.force_login(make_user("root", superuser=True))
    html = client.get(reverse("fleet-workers"), {"state": "failure"}).content.decode()
    assert html.count("data-task-record=") == 3
    assert html.count("data-resend") == 3


def test_the_history_forgets_outcomes_older_than_its_retention(operator, runs, settings):
    settings.AGENTOPS_TASK_HISTORY_DAYS = 7
    kept = record(run=runs[0])
    old = [record(run=runs[0]) for _ in range(3)]
    TaskRecord.objects.filter(pk__in=[r.pk for r in old]).update(
        finished_at=timezone.now() - timezone.timedelta(days=8)
    )
    assert task_history_purge(batch_size=2) == 3
    assert list(TaskRecord.objects.values_list("pk", flat=True)) == [kept.pk]
