"""Tools run in a reused thread, and a tool that hangs past its timeout does not hold up the
calls after it."""

import threading
import time

import tests.tools  # noqa: F401  (registers the test tools)
from runs.executor.call import call_tool
from runs.tools import ToolContext, get_tool


def ctx(timeout: int) -> ToolContext:
    return ToolContext(
        idempotency_key="k", run_id="r", step_id=1, attempt=1, timeout_seconds=timeout
    )


def call(name: str, args: dict, timeout: int = 1):
    tool = get_tool(name)
    assert tool is not None
    return call_tool(tool, args, ctx(timeout))


def test_calls_from_the_main_thread_share_one_tool_thread():
    idents = {call("test_thread_id", {}).result for _ in range(3)}
    assert len(idents) == 1
    assert threading.get_ident() not in idents


def test_a_call_after_a_hung_tool_runs_at_once_in_a_new_thread():
    hung = call("test_hang", {})
    assert not hung.ok
    assert hung.error["type"] == "timeout"
    began = time.monotonic()
    outcome = call("echo", {"value": 2})
    assert outcome.ok
    assert outcome.result == 2
    assert time.monotonic() - began < 1  # not queued behind the hung tool (it waits 5 s)


def test_calls_from_other_threads_run_side_by_side():
    results = []

    def worker() -> None:
        results.append(call("test_thread_id", {}))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert len(results) == 2
    assert all(o.ok for o in results)
