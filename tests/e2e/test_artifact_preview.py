"""Artifacts in a real browser (Debian's chromium): an uploaded HTML page and SVG image, opened
from the site's own origin, show as text and run no script; an operator opens a run's text
preview, sees its image, and opens an artifact from the run page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agentops_client import Client
from playwright.sync_api import Browser, Dialog, Page, expect

from projects.roles import Role
from tests.conftest import AsgiServer
from tests.e2e.conftest import logged_in_page, wait_until
from tests.e2e.test_accessibility import blocking_violations
from testsupport.factories import make_token, make_user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360"
    "00000000050001a5f645400000000049454e44ae426082"
)
# Each tries to run script in the site's origin: set a global, read the session cookie.
HTML = (
    b"<!doctype html><html><body><h1>Invoice</h1>"
    b"<script>window.__pwned = document.cookie || 'ran'</script>"
    b'<img src="x" onerror="window.__pwned = \'onerror\'"></body></html>'
)
SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" '
    b"onload=\"window.__pwned = 'onload'\"><script>window.__pwned = 'svg'</script></svg>"
)


@pytest.fixture(scope="module")
def server(django_db_setup, tmp_path_factory) -> Iterator[AsgiServer]:
    """daphne keeping artifacts in a directory of this module's own."""
    started = AsgiServer(
        tmp_path_factory.mktemp("daphne-e2e-artifacts") / "daphne.log",
        AGENTOPS_ARTIFACT_DIR=str(tmp_path_factory.mktemp("e2e-artifacts")),
    )
    yield started
    started.stop()


@pytest.fixture
def agent(server: AsgiServer, seeded: None) -> Iterator[Client]:
    with Client(server.url, make_token(make_user("agent", Role.OPERATOR)), websocket=False) as made:
        yield made


def _no_script_ran(page: Page, dialogs: list[str]) -> None:
    assert page.evaluate("() => window.__pwned === undefined")
    assert dialogs == []


def test_uploaded_html_and_svg_run_no_script_in_the_site_origin(
    server: AsgiServer, agent: Client, chromium: Browser
):
    make_user("olivia", Role.OPERATOR)
    run_id = agent.create_run("make an invoice").id
    html = agent.upload_artifact(run_id, HTML, name="invoice.html", content_type="text/html")
    svg = agent.upload_artifact(run_id, SVG, name="logo.svg", content_type="image/svg+xml")
    page = logged_in_page(chromium, server.url, "olivia", f"/runs/{run_id}/")
    dialogs: list[str] = []

    def dismissed(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismissed)
    try:
        # The run page's download link offers the file as a file.
        for artifact in (html, svg):
            with page.expect_download() as download:
                page.locator(f"#artifact-{artifact.id} [data-artifact-download]").click()
            assert download.value.suggested_filename == artifact.name
        for artifact, marker in ((html, "<h1>Invoice</h1>"), (svg, "<svg")):
            response = page.goto(artifact.href)
            assert response is not None
            assert response.headers["content-type"] == "text/plain; charset=utf-8"
            assert "sandbox" in response.headers["content-security-policy"]
            # The markup shows as text; nothing of it ran.
            expect(page.locator("body")).to_contain_text(marker)
            _no_script_ran(page, dialogs)
    finally:
        page.context.close()


def test_an_operator_previews_a_runs_artifacts_from_the_run_page(
    server: AsgiServer, agent: Client, chromium: Browser, tmp_path: Path
):
    make_user("olivia", Role.OPERATOR)
    run_id = agent.create_run("summarize the logs").id
    notes = agent.upload_artifact(
        run_id, b"3 errors found\n<b>not bold</b>\n", name="summary.txt", content_type="text/plain"
    )
    chart = agent.upload_artifact(run_id, PNG, name="chart.png", content_type="image/png")
    page = logged_in_page(chromium, server.url, "olivia", f"/runs/{run_id}/")
    try:
        section = page.locator("#artifacts")
        expect(section).to_contain_text("Artifacts (2)")
        row = section.locator(f"#artifact-{notes.id}")
        expect(row).to_contain_text("summary.txt")
        row.locator("summary").click()
        preview = row.locator("[data-artifact-preview]")
        expect(preview).to_have_text("3 errors found\n<b>not bold</b>\n")
        expect(row.locator("b")).to_have_count(0)
        image = section.locator(f"#artifact-{chart.id} [data-artifact-image]")
        expect(image).to_be_visible()
        wait_until(page, "img => img.complete && img.naturalWidth === 1", image.element_handle())
        with page.context.expect_page() as opened:
            row.locator("[data-artifact-open]").click()
        tab = opened.value
        tab.wait_for_load_state()
        expect(tab.locator("body")).to_contain_text("3 errors found")
        tab.close()
        # The section adds no serious accessibility violation (axe-core, as every page).
        assert blocking_violations(page) == []
    finally:
        page.context.close()
