"""Calling one tool: its timeout, its outcome and its structured error.

Nothing here touches the database: ``runs.executor.claim`` claims the step before and
``runs.executor.record`` records the outcome after.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.utils import timezone

from runs.tools import Tool, ToolContext, ToolError


@dataclass
class Outcome:
    """What one attempt produced: ``result`` when ``ok``, else ``error`` (see
    ``structured_error``). ``duration_ms`` is the tool's time in ms; ``effect_unknown`` says the
    call may or may not have taken effect (it timed out); ``from_ledger`` that the result is the
    one recorded by an earlier attempt, and no tool was called."""

    ok: bool
    result: Any = None
    error: dict[str, Any] | None = None
    duration_ms: int = 0
    effect_unknown: bool = False
    from_ledger: bool = False


def structured_error(
    kind: str, message: str, *, attempt: int, retryable: bool, tb: str = ""
) -> dict[str, Any]:
    """The error kept on a step and its attempt: ``type``, ``message``, ``traceback``,
    ``attempt`` (1-based), ``retryable`` and ``at`` (ISO 8601 time)."""
    return {
        "type": kind,
        "message": message,
        "traceback": tb,
        "attempt": attempt,
        "retryable": retryable,
        "at": timezone.now().isoformat(),
    }


Job = tuple[Callable[[], None], threading.Event]


class _ToolThread:
    """The daemon thread tools called from a process's main thread run in (a Celery worker
    runs tasks there), reused from call to call: starting a thread per call cost about a tenth
    of a no-op step. A tool that overruns its timeout keeps its thread, which exits once the
    tool returns, and the next call gets a new one. Calls from other threads (eager tasks in a
    web process's request threads) get a thread of their own that exits after the call.

    The main thread's tool threads left behind by a timeout are kept (``abandoned``) until they
    end: Python cannot stop one, so a Celery pool process that still has one replaces itself
    (``runs.tasks``)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Job | None] | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0
        self.abandoned: list[threading.Thread] = []

    @staticmethod
    def _start() -> tuple[queue.SimpleQueue[Job | None], threading.Thread]:
        jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        thread = threading.Thread(target=_ToolThread._serve, args=(jobs,), name="tool", daemon=True)
        thread.start()
        return jobs, thread

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[Job | None]) -> None:
        while (job := jobs.get()) is not None:
            fn, done = job
            try:
                fn()
            finally:
                done.set()

    def run(self, fn: Callable[[], None], timeout: float) -> bool:
        """Run ``fn`` in a tool thread; False when it did not return within ``timeout`` s."""
        reuse = threading.current_thread() is threading.main_thread()
        if self._pid != os.getpid():  # first call, or a forked child: the threads stayed behind
            self._jobs, self._thread, self.abandoned = None, None, []
            self._pid = os.getpid()
        if not reuse:
            jobs, thread = self._start()
        elif self._jobs is None or self._thread is None:
            jobs, thread = self._jobs, self._thread = self._start()
        else:
            jobs, thread = self._jobs, self._thread
        done = threading.Event()
        jobs.put((fn, done))
        if not reuse:
            jobs.put(None)
        if done.wait(timeout):
            return True
        if reuse:
            jobs.put(None)
            self._jobs = self._thread = None
            self.abandoned.append(thread)
        return False

    def running_abandoned(self, wait: float) -> int:
        """How many threads abandoned at a timeout are still running after waiting up to
        ``wait`` seconds in all for them to end (those that ended are forgotten)."""
        deadline = time.monotonic() + wait
        for thread in self.abandoned:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.abandoned = [thread for thread in self.abandoned if thread.is_alive()]
        return len(self.abandoned)


_tool_thread = _ToolThread()


def runaway_tool_threads(wait: float = 0) -> int:
    """The number of tools of this process that overran their timeout and are still running,
    after waiting up to ``wait`` seconds for them to return.

    Such a tool keeps its thread, and a CPU-bound one the interpreter, for as long as it runs:
    Python cannot stop a thread. Only ending the process stops it.
    """
    return _tool_thread.running_abandoned(wait)


def call_tool(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> Outcome:
    """Call ``tool`` with ``args`` and wait at most ``ctx.timeout_seconds`` seconds.

    The tool runs in a daemon thread so a hung tool cannot hold the worker past its timeout;
    on timeout the thread is abandoned (Python cannot kill it: see ``runaway_tool_threads``)
    and the outcome is a ``timeout`` error with ``effect_unknown``, retryable only when the
    tool is safe to repeat. A
    ``ToolError`` keeps its own type and retryable flag (the tool knows what happened); any
    other exception is retryable when the tool is safe to repeat and otherwise leaves the
    effect unknown, so a non-idempotent call is never repeated blindly. A result that is not
    JSON-serializable is a ``bad_result`` error.
    """
    box: dict[str, Any] = {}
    started = time.monotonic()

    def target() -> None:
        try:
            box["result"] = tool.fn(args, ctx)
        except BaseException as exc:  # recorded as the attempt's error
            box["exc"] = exc
            box["tb"] = traceback.format_exc()
        finally:
            # Connections are per thread: one the tool (or its heartbeat) opened dies here.
            connections.close_all()

    finished = _tool_thread.run(target, ctx.timeout_seconds)
    duration_ms = int((time.monotonic() - started) * 1000)
    if not finished:
        error = structured_error(
            "timeout",
            f"{tool.name} did not return within {ctx.timeout_seconds} s",
            attempt=ctx.attempt,
            retryable=tool.safe_to_repeat,
        )
        error["outcome_unknown"] = True
        return Outcome(False, error=error, duration_ms=duration_ms, effect_unknown=True)
    exc = box.get("exc")
    if exc is None:
        try:
            json.dumps(box.get("result"))
        except (TypeError, ValueError) as err:
            error = structured_error(
                "bad_result",
                f"tool returned a value that is not JSON: {err}",
                attempt=ctx.attempt,
                retryable=False,
            )
            return Outcome(False, error=error, duration_ms=duration_ms)
        return Outcome(True, box.get("result"), duration_ms=duration_ms)
    if isinstance(exc, ToolError):
        # The tool reports its own failure: it knows whether anything took effect.
        error = structured_error(
            exc.type, str(exc), attempt=ctx.attempt, retryable=exc.retryable, tb=box["tb"]
        )
        return Outcome(False, error=error, duration_ms=duration_ms)
    # Any other exception may have come after the effect: only a tool safe to repeat retries.
    error = structured_error(
        type(exc).__name__,
        str(exc),
        attempt=ctx.attempt,
        retryable=tool.safe_to_repeat,
        tb=box["tb"],
    )
    error["outcome_unknown"] = not tool.safe_to_repeat
    return Outcome(
        False, error=error, duration_ms=duration_ms, effect_unknown=not tool.safe_to_repeat
    )
