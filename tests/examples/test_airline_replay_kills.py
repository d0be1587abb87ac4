"""The airline replay survives SIGKILL: the client process (with its model server) and the
Celery workers are killed at random moments, at least 50 times, and restarted; the replay
ends with the recorded results, no write made twice and no run stuck."""

from __future__ import annotations

import random
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from examples.airline.store import Store
from runs.models import Run, ToolCall
from tests.conftest import _child_env
from tests.examples.test_airline_replay import AIRLINE_DSN, DATA, TRAJECTORIES, WRITES
from testsupport.cluster import Cluster
from testsupport.factories import make_token, make_user
from testsupport.processes import Process, daphne_command, free_port, wait_until

pytestmark = [pytest.mark.long, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

CONVERSATIONS = 10
KILLS = 50
SEED = 20261123


def _daphne(env: dict[str, str], workdir: Path) -> tuple[Process, str]:
    port = free_port()
    server = Process(
        daphne_command(port=port), {**env, "AGENTOPS_DB_POOL": "1"}, workdir / "daphne.log"
    )

    def accepts() -> bool:
        import socket

        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return False
        return True

    server.wait_until(accepts, "daphne")
    return server, f"http://127.0.0.1:{port}"


def test_the_replay_survives_fifty_kills_of_the_client_and_the_workers(tmp_path, seeded):
    rng = random.Random(SEED)
    tokens = [
        make_token(make_user(name, group))
        for name, group in (("kill-agent", "operator"), ("kill-reviewer", "reviewer"))
    ]
    session = f"kills-{uuid.uuid4().hex[:8]}"
    env = {
        **_child_env(),
        "AGENTOPS_SWEEP_INTERVAL_SECONDS": "1",
        "AGENTOPS_REQUEUE_AFTER_SECONDS": "2",
        "AGENTOPS_LEASE_MARGIN_SECONDS": "2",
    }
    with Cluster(env, workdir=tmp_path, workers=2, concurrency=1) as cluster:
        server, url = _daphne(cluster.env, tmp_path)
        command = [
            sys.executable, "-m", "examples.airline.replay", str(TRAJECTORIES),
            "--limit", str(CONVERSATIONS), "--url", url, "--token", tokens[0],
            "--reviewer-token", tokens[1], "--session", session, "--concurrency", "5",
            "--airline-db", AIRLINE_DSN, "--data-dir", str(DATA),
        ]  # fmt: skip
        kills: Counter[str] = Counter()
        starts = 0
        try:
            client = Process(command, cluster.env, tmp_path / "client.log", name="client")
            starts += 1
            while sum(kills.values()) < KILLS:
                time.sleep(rng.uniform(0.2, 1.2))
                if not client.alive:
                    # It finished before the kills did: start it again (it finds its runs
                    # done or resumes them), so the remaining kills still land on work.
                    client = Process(command, cluster.env, tmp_path / "client.log", name="client")
                    starts += 1
                    continue
                if rng.random() < 0.5:
                    client.crash()
                    kills["client"] += 1
                    client = Process(command, cluster.env, tmp_path / "client.log", name="client")
                    starts += 1
                else:
                    i = rng.randrange(len(cluster.workers))
                    cluster.workers[i].crash()
                    kills["worker"] += 1
                    cluster.workers[i] = cluster.start_worker()
            # No more kills: the last client runs to the end.
            wait_until(lambda: not client.alive, 600, "the last replay to end")
            log = (tmp_path / "client.log").read_text(errors="replace")
            assert client.proc.returncode == 0, log[-3000:]
        finally:
            server.stop(10)
    print(f"kills {dict(kills)}, client starts {starts}")
    summary = log.strip().splitlines()[-1]
    assert summary.startswith(f"{CONVERSATIONS} conversations"), log[-3000:]
    assert "0 differing from the recording" in summary
    assert f"runs {{'succeeded': {CONVERSATIONS}}}" in summary
    assert kills["client"] >= 10
    assert kills["worker"] >= 10

    runs = Run.objects.filter(metadata__session=session)
    # One run per conversation, however many times the client started again.
    assert runs.count() == CONVERSATIONS
    assert set(runs.values_list("status", flat=True)) == {"succeeded"}
    writes = ToolCall.objects.filter(run__in=runs, tool__in=WRITES)
    keys = Counter(writes.values_list("idempotency_key", flat=True))
    assert keys
    assert set(keys.values()) == {1}
    store = Store(AIRLINE_DSN, DATA)
    try:
        effects: Counter[str] = Counter()
        for run in runs:
            world = f"{session}:{run.metadata['task_id']}:{run.metadata['trial']}"
            for key, _tool, _output in store.effects(world):
                effects[key] += 1
    finally:
        store.close()
    # Every write took effect once in the airline database, under its step's key.
    assert effects == keys
