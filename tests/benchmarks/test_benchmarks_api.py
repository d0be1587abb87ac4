"""The API's and pages' benchmarks (api, pages, search, retention) run on a tiny size and print
their rows (``tests/benchmarks/tiny.py``)."""

from __future__ import annotations

import pytest

from tests.benchmarks.tiny import run_group

pytestmark = [pytest.mark.long, pytest.mark.worker]


def test_the_api_benchmarks_run_on_a_tiny_size_and_print_their_rows(tmp_path) -> None:
    run_group("api", tmp_path)
