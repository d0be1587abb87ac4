"""The Celery application: ``celery -A agentops worker`` and ``celery -A agentops beat``; and
sending the tasks whose loss something else makes good (``send_or_drop``)."""

import os
from typing import Any

from celery import Celery, Task
from celery.signals import task_postrun
from kombu.exceptions import OperationalError as BrokerUnreachable

from agentops.outages import Outage

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentops.settings")

app = Celery("agentops")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_postrun.connect
def close_broken_connections(task: Any = None, **kwargs: Any) -> None:
    """After each task, close database connections that failed or outlived CONN_MAX_AGE.

    Django does this between web requests; a worker that keeps its connection across tasks
    (CELERY_DB_REUSE_MAX) needs it too, or one terminated server connection would fail every
    later task of the process. An eager task (run inline by the caller) shares the caller's
    connection and transaction, so it is left alone, as Celery's own fix-up does.
    """
    from django.db import close_old_connections

    if task is not None and getattr(task.request, "is_eager", False):
        return

    close_old_connections()


BROKER = Outage(
    "the Celery broker",
    "tasks sent after a commit (wake-ups, notifications) are dropped: the sweeper and beat "
    "send them again once it is back",
)


def send_or_drop(task: Task, args: tuple[Any, ...], **options: Any) -> None:
    """``task.apply_async(args, **options)``, or nothing while the broker cannot be reached:
    for the messages sent after a commit that the database can recreate (wake-ups, which the
    sweeper sends again; notifications, which beat hands over again), so that the committed
    change is never answered as an error. The outage is logged when it begins and ends, not
    per message, and for a moment after each failure the broker is not tried, so requests do
    not each wait on Celery's connection retries (``agentops.outages``)."""
    if BROKER.skipping():
        return
    try:
        task.apply_async(args, **options)
    except BrokerUnreachable as exc:
        BROKER.failed(exc)
        return
    BROKER.reached()
