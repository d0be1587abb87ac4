"""Crashes, lost messages and broken connections while runs execute lose no step, repeat no
side effect and leave a consistent audit log (a small run of ``testsupport.faults``)."""

import pytest

from testsupport.faults import FaultPlan, run_harness

pytestmark = pytest.mark.worker


def test_runs_survive_killed_workers_lost_messages_and_broken_connections(
    transactional_db, seeded, tmp_path
):
    plan = FaultPlan(runs=12, steps=4, kills=12, redis_restarts=1, pg_terminations=3, seed=7)
    report = run_harness(plan, workdir=tmp_path)
    print(report.table())
    assert report.ok, report.table()
    figures = report.figures
    kills = figures["faults: worker pool processes killed"]
    kills += figures["faults: worker main processes killed"]
    assert kills >= plan.kills // 2, report.table()
    assert figures["faults: redis restarts"] + figures["faults: pg_terminate_backend rounds"] >= 1
