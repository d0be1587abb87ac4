"""The workers page in a real browser follows the workers live: opened before any worker
answered it says it asks them, and a worker that answers appears without a reload, through a
real worker asking the others (the refresh task) and the page's poll of its live part."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.conftest import AsgiServer, Worker
from tests.e2e.conftest import TIMEOUT_MS, logged_in_page

pytestmark = pytest.mark.e2e


@pytest.fixture
def server(transactional_db, seeded, tmp_path) -> Iterator[AsgiServer]:
    """daphne, with a worker of its own, the page refreshing every second. The workers
    report is kept in the cache of the tests' child processes (``CHILD_CACHE_PREFIX``), so
    the page finds it whichever worker, this one or the session's shared one, made it."""
    env: dict[str, str] = {"AGENTOPS_WORKERS_REFRESH_SECONDS": "1"}
    server = AsgiServer(tmp_path / "daphne.log", **env)
    worker = Worker(tmp_path / "worker.log", concurrency=1, purge=False, **env)
    yield server
    worker.stop()
    server.stop()


def test_a_worker_appears_on_the_open_workers_page(
    server, operator, chromium: Browser, tmp_path: Path
):
    page = logged_in_page(chromium, server.url, "olivia", "/workers/")
    region = page.locator("[data-workers-live]")
    page.evaluate("window.__noReload = 1")
    # This test's worker by its node name (the Worker's --hostname, %h expanded): the session's
    # shared worker may be on the page too.
    own = f"test-{os.getpid()}-{tmp_path.name}@"
    expect(page.locator(f"[data-worker^='{own}']")).to_be_visible(timeout=TIMEOUT_MS)
    expect(region).not_to_have_attribute("data-updates", "0")
    expect(page.locator("[data-report-age]")).to_be_visible()
    assert page.evaluate("window.__noReload") == 1
    page.context.close()
