"""The workers page renders the workers' last report from the cache and never asks the
workers itself: a fresh report sends nothing, a stale one has one refresh task sent for all
the pages that see it, and that task (run as a worker runs it) asks through Celery and keeps
the new report."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.urls import reverse

from agentops import celery_app
from fleet import broker, tasks
from testsupport.factories import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def inspect_calls(monkeypatch) -> list[dict[str, Any]]:
    """The calls of Celery's ``control.inspect`` (made through the real app, whose broker is
    the test Redis), recorded with their options."""
    calls: list[dict[str, Any]] = []
    real = celery_app.control.inspect

    def counted(**options: Any) -> Any:
        calls.append(options)
        return real(**options)

    monkeypatch.setattr(celery_app.control, "inspect", counted)
    return calls


@pytest.fixture
def sent(monkeypatch) -> list[dict[str, Any]]:
    """Messages sent by the workers page (not eager, as with a broker), held instead of sent:
    their options."""
    celery_app.conf.task_always_eager = False  # (set back after each test)
    held: list[dict[str, Any]] = []
    monkeypatch.setattr(
        tasks.refresh_workers_report, "apply_async", lambda **options: held.append(options)
    )
    return held


WORKER = broker.WorkerState(
    name="celery@cached", stats={"pool": {"max-concurrency": 3}, "uptime": 65}, active=[]
)


def test_a_fresh_report_is_rendered_without_asking_the_workers(
    client, operator, inspect_calls, sent
):
    broker.workers_report_keep(broker.WorkersReport([WORKER], time.time() - 2))
    client.force_login(operator)
    for name in ("fleet-workers", "fleet-workers-live"):
        html = client.get(reverse(name)).content.decode()
        assert 'data-worker="celery@cached"' in html
        assert "As the workers answered 2." in html
    assert inspect_calls == []
    assert sent == []


def test_a_stale_report_has_one_refresh_sent_and_the_task_asks_the_workers(
    client, operator, reviewer, settings, inspect_calls, sent
):
    settings.AGENTOPS_WORKERS_REFRESH_SECONDS = 5
    settings.AGENTOPS_INSPECT_TIMEOUT_SECONDS = 0.2
    broker.workers_report_keep(broker.WorkersReport([WORKER], time.time() - 6))
    client.force_login(operator)
    first = client.get(reverse("fleet-workers")).content.decode()
    assert 'data-worker="celery@cached"' in first  # the stale report, while a new one comes
    assert client.get(reverse("fleet-workers-live")).status_code == 200
    # One refresh for both requests, discarded by the worker if it comes too late.
    (options,) = sent
    assert options["expires"] == 5 + 2 + 5
    assert inspect_calls == []

    tasks.refresh_workers_report()  # as a worker runs it
    assert inspect_calls
    assert inspect_calls[0]["timeout"] == 0.2
    report = broker.workers_report()
    assert report is not None
    assert report.age_seconds(time.time()) < 5
    assert "celery@cached" not in [worker.name for worker in report.workers]
    # The claim is released with the new report: the next stale one is asked for again.
    broker.workers_report_keep(broker.WorkersReport([], time.time() - 6))
    client.get(reverse("fleet-workers-live"))
    assert len(sent) == 2


def test_without_a_report_the_page_says_it_asks_the_workers(client, operator, sent):
    client.force_login(operator)
    html = client.get(reverse("fleet-workers")).content.decode()
    assert "Asking the workers…" in html
    assert len(sent) == 1
    assert 'data-url="/workers/live/"' in html
    assert '<script src="/static/js/workers.js" defer>' in html


def test_the_live_part_needs_the_operator_role(client, seeded):
    client.force_login(make_user("vera", "viewer"))
    assert client.get(reverse("fleet-workers-live")).status_code == 403
