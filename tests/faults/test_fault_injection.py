"""Crashes, lost messages and broken connections while runs execute lose no step, repeat no
side effect and leave a consistent audit log (small runs of ``testsupport.faults.harness``,
three seeds): every run ends as its plan says, which a recovery that fails the runs it touches
does not."""

import pytest

from testsupport.faults.harness import FaultPlan, run_harness

pytestmark = [pytest.mark.long, pytest.mark.worker]


@pytest.mark.parametrize("seed", [7, 11, 23])
def test_runs_survive_killed_workers_lost_messages_and_broken_connections(
    seed, transactional_db, seeded, tmp_path
):
    plan = FaultPlan(runs=10, steps=4, kills=10, redis_restarts=1, pg_terminations=2, seed=seed)
    report = run_harness(plan, workdir=tmp_path)
    print(report.table())
    assert report.ok, report.table()
    figures = report.figures
    kills = figures["faults: worker pool processes killed"]
    kills += figures["faults: worker main processes killed"]
    assert kills >= plan.kills // 2, report.table()
    assert figures["faults: redis restarts"] + figures["faults: pg_terminate_backend rounds"] >= 1
    outcomes = figures["runs by outcome against the plan"]
    assert sum(outcomes.values()) == plan.runs, report.table()
    assert outcomes.get("succeeded", 0) >= 1, report.table()
    # Each unknown outcome needs a fault that hit a call of the tool that is not idempotent.
    causes = kills + figures["  connections terminated"]
    assert outcomes.get("failed: outcome unknown", 0) <= causes, report.table()
