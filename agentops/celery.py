"""The Celery application: ``celery -A agentops worker`` and ``celery -A agentops beat``."""

import os
from typing import Any

from celery import Celery
from celery.signals import task_postrun

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
