"""A reviewer fixes one argument in the inbox and approves, in a real browser: the tool runs
with the edited value on a real worker, and the audit log keeps both versions."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from agentops.actors import Actor
from audit.models import AuditEvent
from runs.control.create import run_create
from runs.models import Run, RunStatus, ToolCall
from tests.conftest import wait_for
from tests.e2e.conftest import SCREENSHOTS, TIMEOUT_MS, approve_confirmed, log_in

pytestmark = pytest.mark.e2e

ARGS = {"to": ["cfo@example.com"], "subject": "Q3 numbers", "body": "Total: 42"}
EDITED = {**ARGS, "to": ["cfo-office@example.com"]}


def test_a_reviewer_edits_an_argument_in_the_inbox_and_approves(
    worker, asgi_server, operator, reviewer, chromium
):
    run = run_create(
        actor=Actor.for_user(operator),
        agent="plan",
        goal="Mail the Q3 total",
        steps=[{"tool": "send_email", "args": ARGS, "rationale": "The CFO asked."}],
    )
    approval = wait_for(lambda: run.approvals.first())
    context = chromium.new_context(
        base_url=asgi_server.url, viewport={"width": 1280, "height": 900}
    )
    context.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    page = context.new_page()
    log_in(page, "rita", "/approvals/")
    item = page.locator(f'[data-approval-id="{approval.pk}"]')
    item.locator("[data-card-summary]").click()
    item.locator("details.edit-args summary").click()
    editor = item.locator("[data-approval-args-editor]")
    assert json.loads(editor.input_value()) == ARGS
    editor.fill(json.dumps(EDITED, indent=2))
    item.locator("textarea[name=comment]").fill("Send it to the office address.")
    page.screenshot(path=SCREENSHOTS / "e2e-edit-args.png", full_page=True)
    approve_confirmed(page, item)
    expect(page.locator(".message-success")).to_contain_text("Approved send_email")

    finished = wait_for(
        lambda: Run.objects.filter(pk=run.pk, status=RunStatus.SUCCEEDED).first(), 60
    )
    step = finished.steps.get()
    # The tool's own answer, from the worker that ran it: it sent to the edited address.
    assert step.result == {"sent": 1, "to": ["cfo-office@example.com"]}
    assert step.args == EDITED
    call = ToolCall.objects.get(step=step)
    assert call.idempotency_key == step.idempotency_key
    (edited,) = AuditEvent.objects.filter(run_id=run.pk, verb="step.args_edited")
    assert (edited.payload["from"]["args"], edited.payload["to"]["args"]) == (ARGS, EDITED)
    assert edited.payload["to"]["idempotency_key"] == call.idempotency_key
    assert edited.actor_name == "rita"
    context.close()


def test_arguments_that_fail_the_schema_get_a_clear_message(
    worker, asgi_server, operator, reviewer, chromium
):
    run = run_create(
        actor=Actor.for_user(operator),
        agent="plan",
        goal="Mail the Q3 total",
        steps=[{"tool": "send_email", "args": ARGS}],
    )
    approval = wait_for(lambda: run.approvals.first())
    context = chromium.new_context(base_url=asgi_server.url)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    log_in(page, "rita", "/approvals/")
    item = page.locator(f'[data-approval-id="{approval.pk}"]')
    item.locator("[data-card-summary]").click()
    item.locator("details.edit-args summary").click()
    item.locator("[data-approval-args-editor]").fill('{"to": "not a list"}')
    approve_confirmed(page, item)
    expect(page.locator(".message-error")).to_contain_text("args")
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert run.steps.get().args == ARGS
    context.close()
