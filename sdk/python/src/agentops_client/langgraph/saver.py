"""``AgentOpsSaver``: a LangGraph checkpointer (``BaseCheckpointSaver``, sync and async) that
keeps a graph's threads in agentops over its REST API (``/api/v1/threads/``).

A LangGraph thread is an agentops session (the thread id its ``external_id``), opened by
the thread's first checkpoint; every checkpoint, channel value and pending write is a record
of the session's, audited in its chain. Values are stored as LangGraph's serializer
(``self.serde``) makes them, as PostgresSaver stores them: the checkpoint without its channel
values, each channel's value once per version (``new_versions``), each pending write with its
task id and index. Capabilities: ``put``, ``put_writes``, ``get_tuple``, ``list``,
``delete_thread``, ``copy_thread`` (a fork of the whole thread) and ``prune`` (retention:
``keep_latest`` or ``delete``); ``delete_for_runs`` is not one (agentops keeps no
LangGraph run ids apart from the checkpoints' metadata).
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from agentops_client import _protocol as p
from agentops_client.sync import Client

T = TypeVar("T")
THREADS = "/threads"
# The server's page size (``runs.thread_selectors.MAX_PAGE``).
PAGE = 100
# The type LangGraph's savers give a channel named in new_versions that holds no value.
EMPTY = "empty"


def _encoded(value: tuple[str, bytes]) -> dict[str, str]:
    return {"type": value[0], "data": base64.b64encode(value[1]).decode()}


def _decoded(value: dict[str, Any]) -> tuple[str, bytes]:
    return value["type"], base64.b64decode(value["data"])


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


class AgentOpsSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer backed by agentops.

    ``client`` is an agentops ``Client`` (its token's project holds the threads; ``project``,
    a slug, names another where the token's user may act); ``serde`` LangGraph's serializer
    (default: its ``JsonPlusSerializer``). Use it as any checkpointer::

        with Client(url, token) as client:
            graph = builder.compile(checkpointer=AgentOpsSaver(client))
            graph.invoke(inputs, {"configurable": {"thread_id": "ticket-42"}})

    Sync methods block on the client's loop thread; async ones await it from any event
    loop. Errors are the client's (``agentops_client.errors``): ``Conflict`` when the
    thread's session is closed, ``NotFound`` for the writes of an unknown checkpoint or the
    copy of an unknown thread, ``PermissionDenied`` when the token's role does not allow it.
    """

    def __init__(
        self, client: Client, *, project: str | None = None, serde: SerializerProtocol | None = None
    ) -> None:
        super().__init__(serde=serde)
        self.client = client
        self.project = project

    # --- how sync and async calls reach the client's loop ------------------------------

    def _wait(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.client.submit(coro).result()

    async def _await(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(self.client.submit(coro))

    def _scoped(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.project:
            body["project"] = self.project
        return body

    async def _call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        if self.project and method == "GET":
            params["project"] = self.project
        return await self.client.aio._request(method, THREADS + path, body, **params)

    # --- the wire format ------------------------------------------------------------------

    def _put_body(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict[str, Any]:
        conf = config["configurable"]
        saved: dict[str, Any] = dict(checkpoint)
        values = saved.pop("channel_values", {}) or {}
        blobs = [
            {
                "channel": channel,
                "version": str(version),
                **_encoded(
                    self.serde.dumps_typed(values[channel]) if channel in values else (EMPTY, b"")
                ),
            }
            for channel, version in new_versions.items()
        ]
        meta = get_serializable_checkpoint_metadata(config, metadata)
        return self._scoped(
            {
                "thread_id": str(conf["thread_id"]),
                "checkpoint_ns": conf.get("checkpoint_ns", ""),
                "checkpoint_id": checkpoint["id"],
                "parent_checkpoint_id": conf.get("checkpoint_id") or "",
                "checkpoint": _encoded(self.serde.dumps_typed(saved)),
                "channel_versions": {k: str(v) for k, v in checkpoint["channel_versions"].items()},
                "metadata": p.check_json(dict(meta), "checkpoint metadata"),
                "blobs": blobs,
            }
        )

    def _tuple(self, thread_id: str, record: dict[str, Any]) -> CheckpointTuple:
        checkpoint: Checkpoint = self.serde.loads_typed(_decoded(record["checkpoint"]))
        checkpoint["channel_values"] = {
            blob["channel"]: self.serde.loads_typed(_decoded(blob))
            for blob in record["blobs"]
            if blob["type"] != EMPTY
        }
        ns, parent = record["checkpoint_ns"], record["parent_checkpoint_id"]
        return CheckpointTuple(
            config=_config(thread_id, ns, record["checkpoint_id"]),
            checkpoint=checkpoint,
            metadata=record["metadata"],
            parent_config=_config(thread_id, ns, parent) if parent else None,
            pending_writes=[
                (w["task_id"], w["channel"], self.serde.loads_typed(_decoded(w)))
                for w in record["writes"]
            ],
        )

    # --- the capabilities, as coroutines on the client's loop -------------------------------

    async def _get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        params: dict[str, Any] = {
            "thread_id": thread_id,
            "checkpoint_ns": conf.get("checkpoint_ns", ""),
            "limit": 1,
        }
        if checkpoint_id := get_checkpoint_id(config):
            params["checkpoint_id"] = checkpoint_id
        page = (await self._call("GET", "/checkpoints/", **params))["checkpoints"]
        return self._tuple(thread_id, page[0]) if page else None

    async def _list_pages(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> list[CheckpointTuple]:
        conf = (config or {}).get("configurable") or {}
        if "thread_id" not in conf:
            raise ValueError("AgentOpsSaver lists the checkpoints of one thread: give thread_id")
        thread_id = str(conf["thread_id"])
        params: dict[str, Any] = {"thread_id": thread_id}
        if "checkpoint_ns" in conf:
            params["checkpoint_ns"] = conf["checkpoint_ns"]
        if checkpoint_id := conf.get("checkpoint_id"):
            params["checkpoint_id"] = checkpoint_id
        if filter:
            params["metadata"] = json.dumps(p.check_json(filter, "filter"))
        if before is not None and (cursor := get_checkpoint_id(before)):
            params["before"] = cursor
        found: list[CheckpointTuple] = []
        while limit is None or len(found) < limit:
            want = PAGE if limit is None else min(PAGE, limit - len(found))
            page = (await self._call("GET", "/checkpoints/", limit=want, **params))["checkpoints"]
            found.extend(self._tuple(thread_id, record) for record in page)
            if len(page) < want:
                break
            params["before"] = page[-1]["checkpoint_id"]
        return found

    async def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        body = self._put_body(config, checkpoint, metadata, new_versions)
        await self._call("POST", "/checkpoints/", body)
        return _config(body["thread_id"], body["checkpoint_ns"], checkpoint["id"])

    async def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> None:
        conf = config["configurable"]
        body = {
            "thread_id": str(conf["thread_id"]),
            "checkpoint_ns": conf.get("checkpoint_ns", ""),
            "checkpoint_id": conf["checkpoint_id"],
            "task_id": task_id,
            "task_path": task_path,
            "writes": [
                {
                    "idx": WRITES_IDX_MAP.get(channel, idx),
                    "channel": channel,
                    **_encoded(self.serde.dumps_typed(value)),
                }
                for idx, (channel, value) in enumerate(writes)
            ],
        }
        await self._call("POST", "/writes/", self._scoped(body))

    async def _delete_thread(self, thread_id: str) -> None:
        await self._call("POST", "/delete/", self._scoped({"thread_id": str(thread_id)}))

    async def _copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        body = {
            "source_thread_id": str(source_thread_id),
            "target_thread_id": str(target_thread_id),
        }
        await self._call("POST", "/copy/", self._scoped(body))

    async def _prune(self, thread_ids: Sequence[str], strategy: str) -> None:
        if isinstance(thread_ids, str):
            raise TypeError("thread_ids must be a sequence of thread ids, not a str")
        body = {"thread_ids": [str(t) for t in thread_ids], "strategy": strategy}
        await self._call("POST", "/prune/", self._scoped(body))

    # --- BaseCheckpointSaver --------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its ``checkpoint_id``; none: the thread's latest in
        its ``checkpoint_ns``), with its channel values and pending writes; None when there
        is none."""
        return self._wait(self._get_tuple(config))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async ``get_tuple``."""
        return await self._await(self._get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The checkpoints of ``config``'s thread (of its ``checkpoint_ns`` when it names one),
        newest first: whose metadata contains ``filter``, older than ``before``'s checkpoint,
        at most ``limit``; fetched 100 a request.

        Raises:
            ValueError: ``config`` names no thread (agentops lists one thread at a time).
        """
        yield from self._wait(self._list_pages(config, filter, before, limit))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async ``list``."""
        for found in await self._await(self._list_pages(config, filter, before, limit)):
            yield found

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save ``checkpoint`` (with the values of the channels in ``new_versions``) after the
        checkpoint ``config`` names; the config naming the saved one."""
        return self._wait(self._put(config, checkpoint, metadata, new_versions))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async ``put``."""
        return await self._await(self._put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Save task ``task_id``'s pending ``writes`` (channel, value) after the checkpoint
        ``config`` names; a write already on record is kept (special channels: replaced)."""
        self._wait(self._put_writes(config, writes, task_id, task_path))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async ``put_writes``."""
        await self._await(self._put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint of the thread (its session, runs and conversation stay)."""
        self._wait(self._delete_thread(thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        """Async ``delete_thread``."""
        await self._await(self._delete_thread(thread_id))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint of a thread, with its values and writes, to a thread that has
        none (opening its session): a fork of the whole thread.

        Raises:
            NotFound: no such source thread.
            Conflict: the target has checkpoints already.
        """
        self._wait(self._copy_thread(source_thread_id, target_thread_id))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async ``copy_thread``."""
        await self._await(self._copy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune threads: ``keep_latest`` keeps each namespace's latest checkpoint (with its
        writes and the values it names), ``delete`` deletes every checkpoint.

        Raises:
            TypeError: ``thread_ids`` is one string.
            BadRequest: an unknown strategy.
            Conflict: ``keep_latest`` of a thread that uses a ``DeltaChannel``.
        """
        self._wait(self._prune(thread_ids, strategy))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async ``prune``."""
        await self._await(self._prune(thread_ids, strategy))

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The version after ``current``: its counter plus one and a random suffix, as
        LangGraph's own savers make it (``InMemorySaver``, ``PostgresSaver``), so the
        branches of a forked thread never give one channel version two values."""
        if current is None:
            counter = 0
        elif isinstance(current, int):
            counter = current
        else:
            counter = int(current.split(".")[0])
        return f"{counter + 1:032}.{random.random():016}"
