"""Evals in the browser: an operator makes a case from a run's page with an expected call
written in the editor, then reads an eval run's results table (pass rate, expected vs made)
and the comparison of two agent versions (the regressed case shown as such). Playwright
drives Debian's chromium against uvicorn."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agentops.actors import Actor
from evals.models import Case
from evals.services import case_set_create, eval_run_record
from projects.services import project_default
from runs.control.create import run_create
from tests.e2e.conftest import TIMEOUT_MS, log_in

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_make_a_case_then_read_results_and_comparison(asgi_server, operator, chromium):
    actor = Actor.for_user(operator)
    run = run_create(
        actor=actor,
        agent="plan",
        goal="refund the customer",
        steps=[{"tool": "echo", "args": {"value": 1}}],
    )
    case_set = case_set_create(project_id=project_default().pk, name="refunds", actor=actor)
    context = chromium.new_context(base_url=asgi_server.url)
    context.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    page = context.new_page()
    log_in(page, "olivia", f"/runs/{run.pk}/")

    page.click("[data-make-case]")
    page.check("input[name=expect][value=operator]")
    page.fill("#case-tool", "echo")
    page.fill("#case-args", "{not json")
    page.click("[data-case-form] button[type=submit]")
    expect(page.locator("[data-messages]")).to_contain_text("not JSON")
    assert not Case.objects.exists()

    page.fill("#case-args", '{"value": 2}')
    page.fill("#case-name", "refund of 2")
    page.click("[data-case-form] button[type=submit]")
    expect(page.locator("[data-cases] tr[data-case]")).to_have_count(1)
    expect(page.locator("[data-cases]")).to_contain_text("refund of 2")
    case = Case.objects.get()
    assert case.expected == {
        "kind": "calls",
        "calls": [{"tool": "echo", "args": {"value": 2}}],
        "source": "operator",
    }

    def outcome(value: int) -> list[dict[str, object]]:
        call = {"tool": "echo", "args": {"value": value}}
        return [{"case": case.pk, "calls": [call], "final": "", "error": ""}]

    good = eval_run_record(
        case_set_id=case_set.pk, version=None, agent_version="v1", outcomes=outcome(2), actor=actor
    )
    bad = eval_run_record(
        case_set_id=case_set.pk, version=None, agent_version="v2", outcomes=outcome(3), actor=actor
    )

    page.goto(f"/evals/runs/{bad.pk}/")
    expect(page.locator("[data-pass-rate]")).to_contain_text("0/1 passed")
    row = page.locator("[data-results] tr[data-result=failed]")
    expect(row).to_contain_text("arguments differ")
    expect(row.locator("pre").first).to_contain_text('"value": 2')
    expect(row.locator("pre").last).to_contain_text('"value": 3')

    page.goto(f"/evals/case-sets/{case_set.pk}/")
    page.select_option("#compare-first", str(good.pk))
    page.select_option("#compare-second", str(bad.pk))
    page.click("[data-compare-form] button[type=submit]")
    expect(page.locator("[data-regressed-count]")).to_have_text("1 regressed")
    expect(page.locator("[data-comparison] tr[data-change=regressed]")).to_contain_text(
        "refund of 2"
    )
    context.close()
