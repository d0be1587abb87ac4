"""A pool process left with a runaway tool asks billiard to replace it
(``runs.tasks.leave_pool_after_this_task``), through billiard's private restart sentinel on
the releases it was written for."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import billiard
import pytest
from billiard import get_context
from billiard.pool import Worker

from runs import tasks
from runs.tasks import POOL_RESTART_BILLIARD, leave_pool_after_this_task


def _pool_process(monkeypatch: pytest.MonkeyPatch, target: Any) -> None:
    monkeypatch.setattr(tasks, "current_process", lambda: SimpleNamespace(_target=target))


def _worker(sentinel: Any) -> Worker:
    """A pool worker as billiard's pool makes one (its queues, the restart sentinel)."""
    context = get_context()
    return Worker(context.SimpleQueue(), context.SimpleQueue(), sentinel=sentinel)


def test_pool_restart_sentinel_on_the_installed_billiard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails on a billiard release the sentinel was not written for: check that
    ``billiard.pool.Worker`` still keeps it in ``_shutdown`` and ends once it is set, then add
    the release to ``POOL_RESTART_BILLIARD``."""
    version = str(getattr(billiard, "__version__", ""))
    assert version.startswith(POOL_RESTART_BILLIARD), version
    sentinel = get_context().Event()
    _pool_process(monkeypatch, _worker(sentinel))
    assert leave_pool_after_this_task()
    assert sentinel.is_set()


def test_no_pool_process_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    _pool_process(monkeypatch, None)
    assert not leave_pool_after_this_task()


def test_another_billiard_leaves_the_process_alone(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    sentinel = get_context().Event()
    _pool_process(monkeypatch, _worker(sentinel))
    monkeypatch.setattr(billiard, "__version__", "5.0.0")
    assert not leave_pool_after_this_task()
    assert not sentinel.is_set()
    assert "billiard 5.0.0" in caplog.text
