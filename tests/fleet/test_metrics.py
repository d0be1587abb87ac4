"""GET /metrics: the fleet's figures for Prometheus, read at scrape time, checked against runs,
steps, approvals, task history rows and queue messages the test made; only with the bearer
token or a staff session."""

import json
import time
import uuid
from datetime import timedelta

import pytest
import redis
from django.conf import settings as django_settings
from django.urls import reverse
from django.utils import timezone
from kombu import Queue
from prometheus_client.parser import text_string_to_metric_families

import tests.tools  # noqa: F401  (registers test_refusing)
from agentops.actors import Actor
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from fleet.models import TaskRecord, TaskState
from runs.control.create import run_create
from testsupport.factories import make_user, plan_run, run_awaiting_approval

pytestmark = pytest.mark.django_db

TOKEN = "s3cret-metrics-token-for-tests"
CALCULATE = {"tool": "calculate", "args": {"expression": "1+1"}}


@pytest.fixture
def metrics_settings(settings):
    settings.AGENTOPS_METRICS_TOKEN = TOKEN
    queue = f"test-metrics-{uuid.uuid4().hex}"
    settings.CELERY_TASK_QUEUES = (Queue(queue),)
    client = redis.Redis.from_url(django_settings.CELERY_BROKER_URL)
    yield queue, client
    client.delete(queue, f"{queue}\x06\x169")
    client.close()


def scrape(client, **headers):
    response = client.get(reverse("metrics"), **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def decide(user, reviewer, capture, decision, wait_seconds):
    run = run_awaiting_approval(user, capture=capture)
    approval = ApprovalRequest.objects.get(run=run)
    approval_decide(approval_id=approval.pk, actor=Actor.for_user(reviewer), decision=decision)
    decided = ApprovalRequest.objects.get(pk=approval.pk).decided_at
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        created_at=decided - timedelta(seconds=wait_seconds)
    )


def task_record(name, state):
    now = timezone.now()
    TaskRecord.objects.create(
        task_id=str(uuid.uuid4()), name=name, state=state, started_at=now, finished_at=now
    )


def test_steps_whose_tool_answered_with_an_error_are_counted_apart(
    client, operator, metrics_settings, django_capture_on_commit_callbacks
):
    steps = [{"tool": "test_refusing", "args": {"refuse": True}}, CALCULATE]
    plan_run(operator, steps, capture=django_capture_on_commit_callbacks)
    samples = scrape(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert samples[("agentops_steps", (("status", "tool_error"),))] == 1
    assert samples[("agentops_steps", (("status", "succeeded"),))] == 1


def test_the_metrics_count_what_the_database_and_broker_hold(
    client, operator, reviewer, metrics_settings, django_capture_on_commit_callbacks
):
    queue, broker = metrics_settings
    capture = django_capture_on_commit_callbacks
    plan_run(operator, [CALCULATE], capture=capture)
    plan_run(operator, [CALCULATE, CALCULATE], capture=capture)
    run_awaiting_approval(operator, capture=capture)
    run_create(actor=Actor.for_user(operator), agent="plan", goal="queued", steps=[CALCULATE])
    # Approved: its step is queued and the run running (the wake-up is not delivered here).
    decide(operator, reviewer, capture, "approve", 20)
    decide(operator, reviewer, capture, "reject", 400)
    for name, state in [
        ("runs.execute_step", TaskState.FAILURE),
        ("runs.execute_step", TaskState.FAILURE),
        ("runs.sweep", TaskState.FAILURE),
        ("runs.execute_step", TaskState.SUCCESS),
    ]:
        task_record(name, state)
    sent = time.time()
    for age in (30, 10, 5):
        message = {"body": "", "headers": {"sent_at": sent - age}, "properties": {}}
        broker.lpush(queue, json.dumps(message))
    broker.lpush(f"{queue}\x06\x169", json.dumps({"headers": {}}))

    samples = scrape(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    runs = {
        labels[0][1]: value for (name, labels), value in samples.items() if name == "agentops_runs"
    }
    assert runs == {
        "queued": 1,
        "running": 1,
        "awaiting_approval": 1,
        "succeeded": 2,
        "failed": 1,
        "cancelled": 0,
        "compensated": 0,
        "compensation_failed": 0,
    }
    steps = {
        labels[0][1]: value
        for (name, labels), value in samples.items()
        if name == "agentops_steps" and value
    }
    assert steps == {
        "pending": 1,
        "awaiting_approval": 1,
        "queued": 1,
        "succeeded": 3,
        "rejected": 1,
    }
    assert samples[("agentops_approvals_pending", ())] == 1
    histogram = {
        dict(labels)["le"]: value
        for (name, labels), value in samples.items()
        if name == "agentops_approval_wait_seconds_bucket"
    }
    assert histogram == {
        "10.0": 0,
        "30.0": 1,
        "60.0": 1,
        "300.0": 1,
        "900.0": 2,
        "3600.0": 2,
        "14400.0": 2,
        "86400.0": 2,
        "+Inf": 2,
    }
    assert samples[("agentops_approval_wait_seconds_count", ())] == 2
    assert samples[("agentops_approval_wait_seconds_sum", ())] == pytest.approx(420, abs=0.01)
    assert samples[("agentops_queue_messages", (("queue", queue),))] == 4
    age = samples[("agentops_queue_oldest_message_age_seconds", (("queue", queue),))]
    assert 30 <= age < 40
    assert samples[("agentops_broker_up", ())] == 1
    assert samples[("agentops_task_failures", (("task", "runs.execute_step"),))] == 2
    assert samples[("agentops_task_failures", (("task", "runs.sweep"),))] == 1


def test_a_staff_session_may_scrape(client, metrics_settings, seeded):
    staff = make_user("sam", "viewer")
    staff.is_staff = True
    staff.save()
    client.force_login(staff)
    assert ("agentops_approvals_pending", ()) in scrape(client)


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer wrong-token",
        f"Token {TOKEN}",
        "Bearer ",
        f"Bearer {TOKEN}x",
        "Basic Zm9vOmJhcg==",
    ],
)
def test_without_the_token_or_a_session_it_is_401(client, metrics_settings, authorization):
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    response = client.get(reverse("metrics"), **headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert b"agentops_runs" not in response.content


def test_no_token_is_accepted_when_none_is_set(client, settings):
    settings.AGENTOPS_METRICS_TOKEN = ""
    assert client.get(reverse("metrics"), HTTP_AUTHORIZATION="Bearer ").status_code == 401
    assert client.get(reverse("metrics"), HTTP_AUTHORIZATION="Bearer x").status_code == 401


def test_a_signed_in_user_who_is_not_staff_is_refused(client, operator, metrics_settings):
    client.force_login(operator)
    response = client.get(reverse("metrics"))
    assert response.status_code == 403
    assert b"agentops_runs" not in response.content
