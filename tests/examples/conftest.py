"""Fixtures of the airline example's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from examples.airline import model_server
from tests.examples.test_airline_replay import TRAJECTORIES


@pytest.fixture(scope="session")
def replay_model_url() -> Iterator[str]:
    """The base URL of a replay model server of the τ-bench conversations
    (``model_server.spawn``), one for the session: its answers depend on the request alone,
    so tests share it (``GET /v1/requests`` holds every test's requests: filter by model)."""
    process, url = model_server.spawn(TRAJECTORIES)
    yield url
    process.terminate()
    process.wait()
