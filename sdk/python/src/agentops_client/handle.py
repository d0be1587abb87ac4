"""A run as its agent drives it (``AsyncRunHandle``): client steps called and reported, model
turns recorded, the run completed and waited for; ``current_step`` inside a tool's call."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from agentops_client import _protocol as p
from agentops_client.errors import (
    AgentOpsError,
    Conflict,
    IdempotencyMismatch,
    ToolFailed,
)
from agentops_client.models import Rejected, Run, Step

if TYPE_CHECKING:
    from agentops_client.aio import AsyncClient

F = TypeVar("F", bound=Callable[..., Any])

_current_step: contextvars.ContextVar[Step | None] = contextvars.ContextVar(
    "agentops_current_step", default=None
)


def current_step() -> Step | None:
    """The client step whose tool is running (inside ``call_tool``'s function: its
    ``idempotency_key`` lets the tool make its own effect exactly-once), or None."""
    return _current_step.get()


class AsyncRunHandle:
    """A client run this process drives: calls its tools through agentops and records its
    model turns. Call ids and turn ids make every request repeatable after a crash."""

    def __init__(self, client: AsyncClient, run_id: str) -> None:
        self.client, self.run_id = client, run_id
        self._calls = 0
        self._turns = 0
        self._call_ids: Counter[str] = Counter()

    async def call_tool(
        self,
        name: str,
        args: dict[str, Any],
        fn: Callable[..., Any],
        *,
        args_schema: dict[str, Any] | None = None,
        call_id: str = "",
        rationale: str = "",
        error_when: Callable[[Any], bool] | None = None,
    ) -> Any:
        """Run the tool ``name`` under agentops: append a client step, wait for its gate, run
        ``fn(**args)`` (the final arguments: a reviewer may have edited them; ``fn`` may be
        async; a plain function runs in a worker thread) and report what it returned. A step
        already on record (a restarted client) returns its recorded result without running
        ``fn``. ``error_when(result)`` (optional) tells the tool's error answers (such as
        ``"Error: ..."`` strings): those are reported as tool errors (``report(is_error=)``).

        Returns the result, or a ``Rejected`` when a reviewer refused the call.

        Raises:
            ToolFailed: ``fn`` raised, or returned something that is not JSON (the error is
                reported; the run fails).
            StepFailed: the step failed, was cancelled or skipped.
            AgentOpsError: the server refused a request.
        """
        self._calls += 1
        if call_id:
            # The same call id twice in one run (models repeat them) still names two calls.
            self._call_ids[call_id] += 1
            call_id = f"{call_id}#{self._call_ids[call_id]}"
        key = p.call_key(self.run_id, self._calls, name, args, call_id)
        step = await self.client.append_step(
            self.run_id,
            name,
            args,
            args_schema=args_schema,
            rationale=rationale,
            idempotency_key=key,
        )
        if step.replayed or not step.settled:
            # A replayed answer is the step as it was when first appended: read it again.
            step = await self.client.wait_for_step(self.run_id, step.id)
        outcome = p.outcome_of(step)
        if outcome.kind != "run":
            return outcome.value
        token = _current_step.set(step)
        try:
            if inspect.iscoroutinefunction(fn):
                value = await fn(**step.args)
            else:
                # A plain function may block (a database call): off the event loop.
                value = await asyncio.to_thread(fn, **step.args)
                if inspect.isawaitable(value):
                    value = await value
            result = p.check_json(value, "the tool's result")
        except Exception as exc:
            await self._report(step, p.error_report(exc))
            raise ToolFailed(f"{name} raised {type(exc).__name__}: {exc}") from exc
        finally:
            _current_step.reset(token)
        body = {"result": result, "is_error": bool(error_when is not None and error_when(result))}
        done = await self._report(step, body)
        return p.outcome_of(done).value

    async def _report(self, step: Step, body: dict[str, Any]) -> Step:
        try:
            if "error" in body:
                return await self.client.report(self.run_id, step.id, error=body["error"])
            return await self.client.report(
                self.run_id, step.id, result=body["result"], is_error=body["is_error"]
            )
        except Conflict as exc:
            if not p.already_reported(exc):
                raise
            return await self.client.get_step(self.run_id, step.id)

    def tool(self, fn: F) -> F:
        """Decorator: calling ``fn(**kwargs)`` runs it under agentops (``call_tool``) and
        returns its result or a ``Rejected``."""

        @functools.wraps(fn)
        async def wrapper(**kwargs: Any) -> Any:
            return await self.call_tool(fn.__name__, kwargs, fn)

        return wrapper  # type: ignore[return-value]

    async def record_turn(
        self,
        messages: list[dict[str, Any]],
        usage: dict[str, Any] | None = None,
        *,
        turn_id: str = "",
        **identity: Any,
    ) -> Run:
        """Record a model turn (``AsyncClient.append_messages``, with what drove it:
        ``identity``), once even when a restarted client records it again."""
        self._turns += 1
        key = f"{self.run_id}:turn:{turn_id or self._turns}"
        try:
            return await self.client.append_messages(
                self.run_id, messages, usage, idempotency_key=key, **identity
            )
        except IdempotencyMismatch:
            # Recorded before a crash, with figures (latency) that differ this time.
            return await self.client.get_run(self.run_id)

    async def complete(self) -> Run:
        """The client appends no more steps (a repeat is harmless)."""
        try:
            return await self.client.complete_run(self.run_id)
        except Conflict:
            return await self.client.get_run(self.run_id)

    async def wait_finished(self, *, timeout: float | None = None) -> Run:
        """The run once it ended (``Run.finished``).

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
        """

        async def check() -> Run | None:
            run = await self.client.get_run(self.run_id)
            return run if run.finished else None

        return await self.client.watch(self.run_id, check, timeout=timeout)


__all__ = ["AgentOpsError", "AsyncClient", "AsyncRunHandle", "Rejected"]
