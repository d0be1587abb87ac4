"""A small MCP server for the gateway's tests, over stdio: ``lookup`` (read-only),
``transfer`` (destructive), ``slow`` (read-only, sleeps) and ``quote`` (read-only, declares an
``outputSchema``: a non-negative ``price``, and answers ``structuredContent`` with the price
it was asked for, or none when asked for ``"price": null``). Every call it receives is appended
to the ``--log`` file as a JSON line (tool, arguments, ``_meta``, pid): the independent record
of what the upstream saw.

Usage: ``python -m tests.gateway.upstream_server --log PATH``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool, ToolAnnotations

TOOLS = [
    Tool(
        name="lookup",
        description="Look an account up.",
        input_schema={
            "type": "object",
            "properties": {"account": {"type": "string"}},
            "required": ["account"],
            "additionalProperties": False,
        },
        annotations=ToolAnnotations(read_only_hint=True),
    ),
    Tool(
        name="transfer",
        description="Move money between accounts.",
        input_schema={
            "type": "object",
            "properties": {"to": {"type": "string"}, "amount": {"type": "number"}},
            "required": ["to", "amount"],
            "additionalProperties": False,
        },
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True),
    ),
    Tool(
        name="slow",
        description="Answer after some seconds.",
        input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}},
        annotations=ToolAnnotations(read_only_hint=True),
    ),
    Tool(
        name="quote",
        description="Quote a price.",
        input_schema={"type": "object", "properties": {"price": {}}},
        output_schema={
            "type": "object",
            "properties": {"price": {"type": "number", "minimum": 0}},
            "required": ["price"],
        },
        annotations=ToolAnnotations(read_only_hint=True),
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--log", required=True, type=Path)
    log: Path = parser.parse_args().log

    async def list_tools(ctx: Any, params: Any) -> ListToolsResult:
        return ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: Any, params: Any) -> CallToolResult:
        args = dict(params.arguments or {})
        entry = {"tool": params.name, "args": args, "meta": dict(params.meta or {})}
        with log.open("a") as out:
            out.write(json.dumps({**entry, "pid": os.getpid()}) + "\n")
        if params.name == "slow":
            await asyncio.sleep(float(args.get("seconds", 1)))
        if params.name == "transfer" and args.get("amount", 0) < 0:
            text = "Error: a transfer cannot be negative"
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        text = json.dumps({"tool": params.name, "args": args})
        structured = None
        if params.name == "quote" and args.get("price") is not None:
            structured = {"price": args["price"]}
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=structured
        )

    server = Server("test upstream", on_list_tools=list_tools, on_call_tool=call_tool)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    asyncio.run(serve())


if __name__ == "__main__":
    main()
