"""The replay's progress reaches its log as it happens, as ``scripts/start`` runs it (output
to a file, no reviewer): while its first write waits for a reviewer, the log already shows
the run started, the calls answered and the write asked for."""

from __future__ import annotations

import re
import sys

import pytest

from runs.models import Step, StepStatus
from tests.conftest import _child_env, wait_for
from tests.examples.test_airline_replay import AIRLINE_DSN, DATA, TRAJECTORIES
from testsupport.factories import make_token, make_user
from testsupport.processes import Process

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_the_log_shows_each_step_while_a_write_waits(worker, asgi_server, seeded, tmp_path):
    token = make_token(make_user("airline-agent", "operator"))
    log = tmp_path / "airline-agents.log"
    cmd = [sys.executable, "-m", "examples.airline.replay", str(TRAJECTORIES), "--limit", "1"]
    cmd += ["--url", asgi_server.url, "--token", token, "--airline-db", AIRLINE_DSN]
    cmd += ["--data-dir", str(DATA)]
    env = {k: v for k, v in _child_env().items() if k != "PYTHONUNBUFFERED"}
    replay = Process(cmd, env, log, name="replay")
    try:
        wait_for(lambda: "task 0/0: calls book_reservation" in log.read_text(), timeout=60)
        write = wait_for(
            lambda: Step.objects.filter(tool="book_reservation", status=StepStatus.WAITING).first()
        )
        run = write.run
        assert replay.alive
        lines = log.read_text().splitlines()
        assert "replaying 1 conversations" in lines[0]
        assert re.search(f"task 0/0: run {run.pk} (queued|running)$", lines[1])
        assert any("task 0/0: get_user_details answered '{" in line for line in lines)
        assert not any("HTTP Request" in line for line in lines)
    finally:
        replay.stop(timeout=5)
