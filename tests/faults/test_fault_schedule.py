"""The fault injector's schedule starts with one fault of each kind, so a workload that ends
early has still met every kind (with a plain shuffle, seed 11 of the suite's plan put the Redis
restart and both connection terminations after runs that had all finished)."""

import random

import pytest

from testsupport.faults.injector import FaultInjector
from testsupport.faults.plan import FaultPlan


@pytest.mark.parametrize("seed", range(50))
def test_each_kind_of_fault_comes_once_before_any_comes_twice(seed):
    plan = FaultPlan(runs=10, steps=4, kills=10, redis_restarts=1, pg_terminations=2, seed=seed)
    kinds = FaultInjector(cluster=None, plan=plan, rng=random.Random(seed)).schedule()
    assert sorted(set(kinds[:4])) == ["kill_child", "kill_parent", "pg_terminate", "redis_restart"]
    assert sorted(kinds) == sorted(
        ["kill_parent"] * (10 // plan.parent_kill_every)
        + ["kill_child"] * (10 - 10 // plan.parent_kill_every)
        + ["redis_restart"]
        + ["pg_terminate"] * 2
    )
