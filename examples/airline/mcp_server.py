"""The 14 τ-bench airline tools (``tools``) served as an MCP server over stdio.

    python -m examples.airline.mcp_server [--airline-db DSN] [--data-dir DIR] [--world NAME]

Each tool keeps the name, description and input JSON schema of ``tools.json`` and gets MCP
annotations: the read tools ``readOnlyHint``; the writes (``tools.WRITE_TOOLS``)
``destructiveHint``, and ``idempotentHint`` when the same call again changes nothing (the
updates of baggage, flights and passengers); ``openWorldHint`` is false for all, the data being
the airline's own. A call answers the tool's output text exactly as τ-bench's tool returns it;
τ-bench's error outputs (``"Error: ..."``) come with ``isError``, and so does a call the tool
cannot run (unknown tool, arguments that do not fit): ``"Error: <why>"``, as τ-bench's
environment words it.

Where the data is, by option or else environment variable (as ``replay``'s options):

- ``--airline-db`` / ``AIRLINE_DATABASE_URL``: the PostgreSQL database of the store (``store``),
  created when missing; default ``store.DEFAULT_DSN``.
- ``--data-dir`` / ``AIRLINE_DATA_DIR``: the τ-bench data files the worlds start from.
- ``--world`` / ``AIRLINE_WORLD``: the world (one copy of the data) the calls act on; created
  from the data files when it does not exist, found as the tools left it when it does (a
  restarted server carries on). Default: a new world for this process, ``mcp:<random>``.

One τ-bench conversation needs a world of its own. A stdio server is one process per client
connection, so by default each process, and with it each MCP session, gets its own fresh world:
an agent launching the server per conversation needs nothing more. A client multiplexing many
conversations over one process (a gateway registering this server once) picks the world per
call, without touching the tools' arguments, in the request's ``_meta``: ``{"agentops/world":
NAME}``; a name not seen before is a fresh world (the replay's names are
``SESSION:TASK:TRIAL``). Behind the agentops gateway, which names each call's run (one per MCP
session) as ``{"agentops/run": ID}``, a session without a world of its own gets the fresh world
``run:ID``: one conversation per session, as with a process per session. The world is keyed by
name in the database rather than held by the MCP session: the 2026-07-28 protocol (which the
SDK's client tries first) has no handshake or session to hang it on, and a world must outlive a
restart of the server.

A write runs once per idempotency key (``tools.call``): a client that may send a write again
(after a lost answer) gives its key as ``{"agentops/idempotency-key": KEY}`` in ``_meta`` and
gets the first call's output back; without a key every call acts.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from examples.airline import tools
from examples.airline.store import DEFAULT_DATA_DIR, DEFAULT_DSN, Store

WORLD_META = "agentops/world"
# The gateway names the agentops run of the MCP session a call belongs to.
RUN_META = "agentops/run"
IDEMPOTENCY_META = "agentops/idempotency-key"
# Writes whose repeat with the same arguments changes nothing: they set values, and the
# price of the repeat is 0, so no payment is taken again. The others add a reservation, a
# certificate or refunds each time.
IDEMPOTENT_WRITES = frozenset(
    {"update_reservation_baggages", "update_reservation_flights", "update_reservation_passengers"}
)

logger = logging.getLogger(__name__)


def tool_annotations(name: str) -> types.ToolAnnotations:
    """The MCP annotations of the airline tool ``name`` (see the module docstring)."""
    if name in tools.WRITE_TOOLS:
        return types.ToolAnnotations(
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=name in IDEMPOTENT_WRITES,
            open_world_hint=False,
        )
    return types.ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )


def mcp_tools(data_dir: Path = DEFAULT_DATA_DIR) -> list[types.Tool]:
    """The airline tools of ``data_dir``'s ``tools.json`` as MCP tools."""
    return [
        types.Tool(
            name=spec["function"]["name"],
            description=spec["function"].get("description"),
            input_schema=spec["function"]["parameters"],
            annotations=tool_annotations(spec["function"]["name"]),
        )
        for spec in tools.tool_specs(data_dir)
    ]


class Airline:
    """The worlds of ``store`` the server acts on: ``world`` unless a call names another."""

    def __init__(self, store: Store, world: str) -> None:
        self.store = store
        self.world = world
        self.created: set[str] = set()

    def open(self, world: str) -> None:
        """Create ``world`` from the data files unless it exists.

        Raises:
            ValueError: ``world`` is a template (the data files' copy, never written).
        """
        if world in self.created:
            return
        if world.startswith("template:"):
            raise ValueError(f"world {world!r} is the data files' template, never written")
        self.store.create_world(world)
        self.created.add(world)

    def call(self, world: str, name: str, args: dict[str, Any], idempotency_key: str) -> str:
        """Run tool ``name`` on ``world`` (created when new) like ``tools.call``.

        Raises:
            ValueError: a template world, an unknown tool.
            TypeError: arguments that do not fit the tool.
        """
        self.open(world)
        return tools.call(self.store, world, name, args, idempotency_key=idempotency_key)


def build_server(airline: Airline, data_dir: Path = DEFAULT_DATA_DIR) -> Server[Any]:
    """The MCP server of the airline tools acting on ``airline``'s worlds."""
    listed = types.ListToolsResult(tools=mcp_tools(data_dir))

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listed

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        meta = params.meta or {}
        run = meta.get(RUN_META)
        world = str(meta.get(WORLD_META) or (f"run:{run}" if run else airline.world))
        key = str(meta.get(IDEMPOTENCY_META) or f"mcp:{uuid.uuid4()}")
        call = functools.partial(airline.call, world, params.name, params.arguments or {}, key)
        try:
            output = await anyio.to_thread.run_sync(call)
        except Exception as exc:
            # As τ-bench's environment answers a call its tool raised on.
            logger.info("airline tool %r failed on world %r: %r", params.name, world, exc)
            output = f"Error: {exc}"
        return types.CallToolResult(
            content=[types.TextContent(text=output)], is_error=tools.is_error(output)
        )

    return Server(
        "airline",
        title="τ-bench airline",
        description="The τ-bench airline customer-service tools on PostgreSQL",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve(server: Server[Any]) -> None:
    """Serve ``server`` over this process's stdin and stdout until stdin closes."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: list[str] | None = None) -> int:
    """Parse the options (see the module docstring) and serve."""
    env = os.environ
    parser = argparse.ArgumentParser(
        prog="python -m examples.airline.mcp_server",
        description=__doc__.split("\n\n")[0],
        epilog="Each option falls back to its environment variable, then its default. "
        "Per call, _meta {'agentops/world': NAME} picks another world and "
        "{'agentops/idempotency-key': KEY} makes a retried write act once.",
    )
    parser.add_argument(
        "--airline-db",
        default=env.get("AIRLINE_DATABASE_URL", DEFAULT_DSN),
        help="PostgreSQL of the airline worlds (AIRLINE_DATABASE_URL; default %(default)s)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(env.get("AIRLINE_DATA_DIR", DEFAULT_DATA_DIR)),
        help="τ-bench airline data files (AIRLINE_DATA_DIR; default %(default)s)",
    )
    parser.add_argument(
        "--world",
        default=env.get("AIRLINE_WORLD", ""),
        help="the world the calls act on, created when new (AIRLINE_WORLD; "
        "default: a new world mcp:<random> for this process)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    world = args.world or f"mcp:{uuid.uuid4().hex}"
    store = Store(args.airline_db, args.data_dir)
    try:
        airline = Airline(store, world)
        try:
            airline.open(world)
        except ValueError as exc:
            parser.error(str(exc))
        logger.info("airline tools on world %r", world)
        anyio.run(serve, build_server(airline, args.data_dir))
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
