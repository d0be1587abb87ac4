"""An admin previews a retention policy in Django admin, runs it, and watches the purge
(a real Celery task) finish: the old runs are gone, the run waiting for an approval stays.

Real processes: daphne serves admin, a Celery worker executes the steps and the purge, and
Playwright drives Debian's chromium. Screenshots go to /tmp/e2e-retention-*.png.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from approvals.models import ApprovalRequest, ApprovalStatus
from audit.selectors import chain_verify
from runs.models import RetentionPolicy, RetentionPurge, Run, Step
from tests.conftest import wait_for
from tests.e2e.conftest import SCREENSHOTS, TIMEOUT_MS, log_in
from testsupport.factories import EMAIL_ARGS, make_run, make_user

pytestmark = pytest.mark.e2e

CALCULATE = {"tool": "calculate", "args": {"expression": "2+2"}}


def test_admin_previews_and_runs_a_policy_and_the_waiting_run_stays(
    worker, asgi_server, operator, chromium
):
    make_user("ada", superuser=True)
    old = [
        make_run(operator, goal=f"old report {i}", steps=[CALCULATE] * (i + 2)) for i in range(2)
    ]
    recent = make_run(operator, goal="recent report", steps=[CALCULATE])
    waiting = make_run(
        operator,
        goal="mail the customer",
        steps=[CALCULATE, {"tool": "send_email", "args": EMAIL_ARGS}],
    )
    wait_for(
        lambda: (
            Run.objects.filter(pk__in=[r.pk for r in (*old, recent)], status="succeeded").count()
            == 3
        )
    )
    wait_for(
        lambda: ApprovalRequest.objects.filter(run=waiting, status=ApprovalStatus.PENDING).exists()
    )
    long_ago = timezone.now() - timedelta(days=90)
    Run.objects.filter(pk__in=[r.pk for r in old]).update(finished_at=long_ago)
    Run.objects.filter(pk=waiting.pk).update(created_at=long_ago, finished_at=long_ago)
    waiting_steps = list(Step.objects.filter(run=waiting).values_list("pk", "status"))
    policy = RetentionPolicy.objects.create(name="30 days", ttl_days=30)

    context = chromium.new_context(
        base_url=asgi_server.url, viewport={"width": 1280, "height": 900}
    )
    context.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    page = context.new_page()
    log_in(page, "ada", "/admin/runs/retentionpolicy/")
    with page.expect_navigation():
        page.click("[data-preview-link]")
    expect(page.locator('[data-preview="runs"]')).to_have_text("2")
    expect(page.locator('[data-preview="steps"]')).to_have_text("5")
    page.screenshot(path=SCREENSHOTS / "e2e-retention-preview.png", full_page=True)

    with page.expect_navigation():
        page.click("[data-action=run-now]")
    # The purge's page refreshes itself until the task has finished.
    expect(page.locator("[data-purge-status]")).to_have_attribute("data-purge-status", "succeeded")
    expect(page.locator(".field-runs .readonly")).to_have_text("2")
    page.screenshot(path=SCREENSHOTS / "e2e-retention-purge.png", full_page=True)

    page.goto("/admin/runs/retentionpurge/")
    row = page.locator("#result_list tbody tr").first
    expect(row).to_contain_text("30 days")
    expect(row).to_contain_text("ada")
    expect(row).to_contain_text("Succeeded")
    page.screenshot(path=SCREENSHOTS / "e2e-retention-history.png", full_page=True)

    # The run that stayed: its first step's state diff opens on a click.
    page.goto(f"/runs/{waiting.pk}/")
    diff = page.locator('[data-diff-path="/completed_steps"]')
    expect(diff).to_be_hidden()
    page.click("#checkpoint-0 summary")
    expect(diff).to_be_visible()
    expect(diff).to_have_attribute("data-diff-kind", "added")
    page.screenshot(path=SCREENSHOTS / "e2e-retention-kept-run.png", full_page=True)
    context.close()

    purge = RetentionPurge.objects.get()
    assert (purge.policy_id, purge.runs, purge.steps) == (policy.pk, 2, 5)
    assert set(Run.objects.values_list("pk", flat=True)) == {recent.pk, waiting.pk}
    assert list(Step.objects.filter(run=waiting).values_list("pk", "status")) == waiting_steps
    assert ApprovalRequest.objects.get(run=waiting).status == ApprovalStatus.PENDING
    assert chain_verify(f"run:{waiting.pk}").ok
