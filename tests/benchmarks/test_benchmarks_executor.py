"""The executor's benchmarks (throughput, dispatch, approval, live) run on a tiny size and
print their rows (``tests/benchmarks/tiny.py``)."""

from __future__ import annotations

import pytest

from benchmarks import bench_throughput
from benchmarks.run import BENCHMARKS
from tests.benchmarks.tiny import GROUPS, run_group

pytestmark = [pytest.mark.long, pytest.mark.worker]


def test_the_groups_hold_every_benchmark_once() -> None:
    names = [module.NAME for modules in GROUPS.values() for module in modules]
    assert sorted(names) == sorted(BENCHMARKS)


def test_the_executor_benchmarks_run_on_a_tiny_size_and_print_their_rows(tmp_path) -> None:
    run_group("executor", tmp_path)


def test_the_throughput_window_splits_at_the_last_creation_response() -> None:
    # 0.5 s of a 2 s window creating; 600 steps finished in the 1.5 s after it.
    assert bench_throughput.creation_split(100.0, 100.5, 102.0, 600) == (25.0, 400.0)
    # Every run done before the last response: nothing after it.
    assert bench_throughput.creation_split(100.0, 101.0, 100.8, 0) == (100.0, 0.0)
