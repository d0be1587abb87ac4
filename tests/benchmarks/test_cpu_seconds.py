"""``testsupport.processes.cpu_seconds`` counts a process's descendants with it (a Celery worker's
pool process does the work its parent only hands out)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testsupport.processes import cpu_seconds

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")

# A parent that only waits for its child; the child spins until it has used 0.3 s of CPU, says
# so, then sleeps (alive, so its time is its own and not yet its parent's).
_CHILD = """
import sys, time
while time.process_time() < 0.3:
    pass
print("spun", flush=True)
time.sleep(30)
"""
_PARENT = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {_CHILD!r}])"


def test_a_process_counts_the_cpu_its_children_used() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline().strip() == "spun"
        time.sleep(0.05)
        used = cpu_seconds([parent.pid])
        assert set(used) == {parent.pid}
        # /proc counts user and system time each in whole clock ticks, rounded down: the child's
        # 0.3 s may read up to two ticks short (CI once read 0.29 s).
        tick = 1 / os.sysconf("SC_CLK_TCK")
        assert 0.3 - 2 * tick <= used[parent.pid] < 2.0
    finally:
        subprocess.run(["pkill", "-P", str(parent.pid)], check=False)  # the child first
        parent.kill()
        parent.wait()


def test_a_process_that_is_gone_counts_nothing() -> None:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    assert cpu_seconds([ended.pid]) == {ended.pid: 0.0}
