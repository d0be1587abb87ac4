"""The throughput benchmark's split of its window at the last creation response
(``bench_throughput.creation_split``): the share spent creating and the steps/s after it."""

from benchmarks.bench_throughput import creation_split


def test_the_window_splits_at_the_last_creation_response() -> None:
    # 0.5 s of a 2 s window creating; 600 steps finished in the 1.5 s after it.
    assert creation_split(100.0, 100.5, 102.0, 600) == (25.0, 400.0)


def test_runs_all_done_before_the_last_response_leave_nothing_after_it() -> None:
    assert creation_split(100.0, 101.0, 100.8, 0) == (100.0, 0.0)
