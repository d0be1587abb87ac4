"""The synchronous client (``Client``) and run handle (``RunHandle``): the asynchronous ones
(``agentops_client.aio``) driven on a private event loop thread, so both behave the same."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from agentops_client.aio import AsyncClient
from agentops_client.artifacts import ArtifactMethods
from agentops_client.handle import AsyncRunHandle
from agentops_client.models import AgentState, Approval, Run, Session, Step

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


async def _in_context(coro: Coroutine[Any, Any, T], context: contextvars.Context) -> T:
    """``coro`` run as a task of the running loop in ``context``."""
    return await asyncio.get_running_loop().create_task(coro, context=context)


class Client(ArtifactMethods):
    """An agentops client for synchronous code; the arguments are ``AsyncClient``'s.

    Use it as a context manager, or call ``close``. Every method blocks until the server
    answered (with the retries ``AsyncClient`` makes) and raises what it raises.
    """

    def __init__(self, base_url: str, token: str, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.aio: AsyncClient = self._run(self._make(base_url, token, options))

    @staticmethod
    async def _make(base_url: str, token: str, options: dict[str, Any]) -> AsyncClient:
        return AsyncClient(base_url, token, **options)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.submit(coro).result()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` (a coroutine of ``self.aio``) on the client's loop thread, in the
        caller's context (its context variables, such as the current trace span), and give
        its future: ``.result()`` blocks, ``asyncio.wrap_future`` awaits it from any loop."""
        return asyncio.run_coroutine_threadsafe(
            _in_context(coro, contextvars.copy_context()), self._loop
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections and stop the loop thread."""
        self._run(self.aio.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def create_run(self, goal: str, **options: Any) -> Run:
        """See ``AsyncClient.create_run``."""
        return self._run(self.aio.create_run(goal, **options))

    def get_run(self, run_id: str) -> Run:
        """See ``AsyncClient.get_run``."""
        return self._run(self.aio.get_run(run_id))

    def get_step(self, run_id: str, step_id: int) -> Step:
        """See ``AsyncClient.get_step``."""
        return self._run(self.aio.get_step(run_id, step_id))

    def append_step(self, run_id: str, tool: str, args: dict[str, Any], **options: Any) -> Step:
        """See ``AsyncClient.append_step``."""
        return self._run(self.aio.append_step(run_id, tool, args, **options))

    def report(self, run_id: str, step_id: int, **outcome: Any) -> Step:
        """See ``AsyncClient.report``."""
        return self._run(self.aio.report(run_id, step_id, **outcome))

    def append_messages(self, run_id: str, messages: list[dict[str, Any]], **options: Any) -> Run:
        """See ``AsyncClient.append_messages``."""
        return self._run(self.aio.append_messages(run_id, messages, **options))

    def messages(self, run_id: str, **options: Any) -> dict[str, Any]:
        """See ``AsyncClient.messages``."""
        return self._run(self.aio.messages(run_id, **options))

    def context(self, run_id: str) -> dict[str, Any]:
        """See ``AsyncClient.context``."""
        return self._run(self.aio.context(run_id))

    def compact(self, run_id: str, summary: str | None = None, **options: Any) -> dict[str, Any]:
        """See ``AsyncClient.compact``."""
        return self._run(self.aio.compact(run_id, summary, **options))

    def complete_run(self, run_id: str) -> Run:
        """See ``AsyncClient.complete_run``."""
        return self._run(self.aio.complete_run(run_id))

    def cancel_run(self, run_id: str, reason: str = "") -> Run:
        """See ``AsyncClient.cancel_run``."""
        return self._run(self.aio.cancel_run(run_id, reason))

    def get_state(self, run_id: str, version: int | None = None) -> AgentState:
        """See ``AsyncClient.get_state``."""
        return self._run(self.aio.get_state(run_id, version))

    def put_state(
        self, run_id: str, state: dict[str, Any], *, base: AgentState | int, **options: Any
    ) -> AgentState:
        """See ``AsyncClient.put_state``."""
        return self._run(self.aio.put_state(run_id, state, base=base, **options))

    def patch_state(
        self,
        run_id: str,
        patch: dict[str, Any] | list[dict[str, Any]],
        *,
        base: AgentState | int,
        **options: Any,
    ) -> AgentState:
        """See ``AsyncClient.patch_state``."""
        return self._run(self.aio.patch_state(run_id, patch, base=base, **options))

    def update_state(
        self, run_id: str, fn: Callable[[dict[str, Any]], dict[str, Any]], **options: Any
    ) -> AgentState:
        """See ``AsyncClient.update_state`` (``fn`` runs on the client's loop thread)."""
        return self._run(self.aio.update_state(run_id, fn, **options))

    def create_session(self, external_id: str, **options: Any) -> Session:
        """See ``AsyncClient.create_session``."""
        return self._run(self.aio.create_session(external_id, **options))

    def get_session(self, session_id: str) -> Session:
        """See ``AsyncClient.get_session``."""
        return self._run(self.aio.get_session(session_id))

    def list_sessions(self, **filters: str) -> list[Session]:
        """See ``AsyncClient.list_sessions``."""
        return self._run(self.aio.list_sessions(**filters))

    def close_session(self, session_id: str) -> Session:
        """See ``AsyncClient.close_session``."""
        return self._run(self.aio.close_session(session_id))

    def add_session_items(
        self, session_id: str, items: list[dict[str, Any]], **options: Any
    ) -> dict[str, Any]:
        """See ``AsyncClient.add_session_items``."""
        return self._run(self.aio.add_session_items(session_id, items, **options))

    def session_messages(self, session_id: str, **options: Any) -> dict[str, Any]:
        """See ``AsyncClient.session_messages``."""
        return self._run(self.aio.session_messages(session_id, **options))

    def session_context(self, session_id: str) -> dict[str, Any]:
        """See ``AsyncClient.session_context``."""
        return self._run(self.aio.session_context(session_id))

    def pop_session_item(self, session_id: str) -> dict[str, Any] | None:
        """See ``AsyncClient.pop_session_item``."""
        return self._run(self.aio.pop_session_item(session_id))

    def clear_session(self, session_id: str) -> int:
        """See ``AsyncClient.clear_session``."""
        return self._run(self.aio.clear_session(session_id))

    def compact_session(
        self, session_id: str, summary: str | None = None, **options: Any
    ) -> dict[str, Any]:
        """See ``AsyncClient.compact_session``."""
        return self._run(self.aio.compact_session(session_id, summary, **options))

    def get_session_state(self, session_id: str, version: int | None = None) -> AgentState:
        """See ``AsyncClient.get_session_state``."""
        return self._run(self.aio.get_session_state(session_id, version))

    def put_session_state(
        self, session_id: str, state: dict[str, Any], *, base: AgentState | int, **options: Any
    ) -> AgentState:
        """See ``AsyncClient.put_session_state``."""
        return self._run(self.aio.put_session_state(session_id, state, base=base, **options))

    def patch_session_state(
        self,
        session_id: str,
        patch: dict[str, Any] | list[dict[str, Any]],
        *,
        base: AgentState | int,
        **options: Any,
    ) -> AgentState:
        """See ``AsyncClient.patch_session_state``."""
        return self._run(self.aio.patch_session_state(session_id, patch, base=base, **options))

    def erase_subject(self, subject: str, **options: Any) -> dict[str, Any]:
        """See ``AsyncClient.erase_subject``."""
        return self._run(self.aio.erase_subject(subject, **options))

    def pending_approvals(self) -> list[Approval]:
        """See ``AsyncClient.pending_approvals``."""
        return self._run(self.aio.pending_approvals())

    def approve(
        self, approval_id: int, comment: str = "", args: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """See ``AsyncClient.approve``."""
        return self._run(self.aio.approve(approval_id, comment, args))

    def reject(self, approval_id: int, reason: str) -> dict[str, Any]:
        """See ``AsyncClient.reject``."""
        return self._run(self.aio.reject(approval_id, reason))

    def wait_for_step(self, run_id: str, step_id: int, *, timeout: float | None = None) -> Step:
        """See ``AsyncClient.wait_for_step``."""
        return self._run(self.aio.wait_for_step(run_id, step_id, timeout=timeout))

    def start_run(self, goal: str, **options: Any) -> RunHandle:
        """Create a client run and return its handle (see ``AsyncClient.start_run``)."""
        return RunHandle(self, self._run(self.aio.start_run(goal, **options)))

    def resume(self, run_id: str) -> RunHandle:
        """Reattach to a run after a crash (see ``AsyncClient.resume``)."""
        return RunHandle(self, self.aio.resume(run_id))


class RunHandle:
    """A client run this process drives (see ``AsyncRunHandle``)."""

    def __init__(self, client: Client, handle: AsyncRunHandle) -> None:
        self.client, self.aio = client, handle
        self.run_id = handle.run_id

    def call_tool(
        self, name: str, args: dict[str, Any], fn: Callable[..., Any], **options: Any
    ) -> Any:
        """See ``AsyncRunHandle.call_tool``: the result, or a ``Rejected``."""
        return self.client._run(self.aio.call_tool(name, args, fn, **options))

    def tool(self, fn: F) -> F:
        """Decorator: calling ``fn(**kwargs)`` runs it under agentops and returns its result
        or a ``Rejected``."""

        @functools.wraps(fn)
        def wrapper(**kwargs: Any) -> Any:
            return self.call_tool(fn.__name__, kwargs, fn)

        return wrapper  # type: ignore[return-value]

    def record_turn(
        self,
        messages: list[dict[str, Any]],
        usage: dict[str, Any] | None = None,
        *,
        turn_id: str = "",
        **identity: Any,
    ) -> Run:
        """See ``AsyncRunHandle.record_turn``."""
        return self.client._run(self.aio.record_turn(messages, usage, turn_id=turn_id, **identity))

    def complete(self) -> Run:
        """See ``AsyncRunHandle.complete``."""
        return self.client._run(self.aio.complete())

    def wait_finished(self, *, timeout: float | None = None) -> Run:
        """See ``AsyncRunHandle.wait_finished``."""
        return self.client._run(self.aio.wait_finished(timeout=timeout))


__all__ = ["Client", "RunHandle"]
