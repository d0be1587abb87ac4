"""The workers page: queue depths and oldest-message ages read from Redis, the workers of the
last report with their active tasks (another project's task shown without its arguments), and
an unreachable broker said on the page."""

import json
import re
import time
import uuid

import pytest
import redis
from django.conf import settings as django_settings
from django.urls import reverse
from kombu import Queue

from agentops import celery_app
from agentops.actors import Actor
from fleet import broker
from projects.models import Project
from runs.control.create import run_create
from testsupport.factories import make_user

pytestmark = pytest.mark.django_db

CALCULATE = {"tool": "calculate", "args": {"expression": "1+1"}}


@pytest.fixture
def queue(settings):
    name = f"test-workers-{uuid.uuid4().hex}"
    settings.CELERY_TASK_QUEUES = (Queue(name),)
    client = redis.Redis.from_url(django_settings.CELERY_BROKER_URL)
    yield name, client
    client.delete(name)
    client.close()


def test_queues_workers_and_active_tasks(client, operator, queue):
    name, redis_client = queue
    now = time.time()
    for age in (125, 3):
        redis_client.lpush(name, json.dumps({"headers": {"sent_at": now - age}}))
    beta = Project.objects.create(slug="beta", name="Beta")
    beth = make_user("beth", "operator", project=beta)
    mine = run_create(actor=Actor.for_user(operator), agent="plan", goal="g", steps=[CALCULATE])
    theirs = run_create(
        actor=Actor.for_user(beth), agent="plan", goal="g", steps=[CALCULATE], project=beta
    )
    their_step = theirs.steps.get()
    worker = broker.WorkerState(
        name="celery@host-1",
        stats={"pool": {"max-concurrency": 4}, "total": {"runs.advance_run": 7, "runs.sweep": 2}},
        active=[
            {"id": "a1", "name": "runs.advance_run", "args": [str(mine.pk)], "kwargs": {}},
            {"id": "a2", "name": "runs.execute_step", "args": [their_step.pk], "kwargs": {}},
        ],
    )
    broker.workers_report_keep(broker.WorkersReport([worker], time.time()))
    client.force_login(operator)
    html = client.get(reverse("fleet-workers")).content.decode()
    row = html[html.index(f'data-queue="{name}"') :]
    assert "data-queue-messages>2<" in row
    # 125 s old when pushed, a second or two more when the page reads it.
    assert re.search(r"data-queue-age>2 min [5-7] s<", row)
    assert 'data-worker="celery@host-1"' in html
    workers_row = html[html.index('data-worker="celery@host-1"') :]
    assert '<td class="num">4</td>' in workers_row
    assert '<td class="num">9</td>' in workers_row
    assert f'href="/runs/{mine.pk}/"' in html
    assert f"/runs/{theirs.pk}/" not in html
    assert "another project's" in html


def test_an_unreachable_broker_is_said_on_the_page(client, operator, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    broker.workers_report_keep(broker.WorkersReport([], time.time(), "connection refused"))
    client.force_login(operator)
    response = client.get(reverse("fleet-workers"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "The broker&#x27;s queues could not be read" in html
    assert "The workers could not be asked: connection refused" in html


def test_a_sent_message_carries_its_send_time(queue, settings):
    name, _ = queue
    before = time.time()
    celery_app.conf.task_always_eager = False  # (set back after each test)
    # Nobody consumes this queue: the message waits there.
    celery_app.send_task("tests.fleet.never_run", args=[1], queue=name)
    (state,) = broker.queue_states()
    assert (state.name, state.messages) == (name, 1)
    assert 0 <= state.oldest_age_seconds <= time.time() - before + 0.01
