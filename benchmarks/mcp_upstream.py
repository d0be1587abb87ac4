"""The gateway benchmark's upstream MCP server, over stdio: one read-only tool, ``noop``
(``readOnlyHint``: low risk, no approval), which answers its arguments back at once and does
nothing else, so that a call's latency is the transport and whatever stands in between.

Usage: ``python -m benchmarks.mcp_upstream``
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool, ToolAnnotations

TOOL = "noop"

TOOLS = [
    Tool(
        name=TOOL,
        description="Answer the arguments back (benchmark: does nothing).",
        input_schema={
            "type": "object",
            "properties": {"i": {"type": "integer"}},
            "required": ["i"],
            "additionalProperties": False,
        },
        annotations=ToolAnnotations(read_only_hint=True),
    ),
]


async def _list_tools(ctx: Any, params: Any) -> ListToolsResult:
    return ListToolsResult(tools=TOOLS)


async def _call_tool(ctx: Any, params: Any) -> CallToolResult:
    text = json.dumps({"tool": params.name, "args": dict(params.arguments or {})})
    return CallToolResult(content=[TextContent(type="text", text=text)])


def main() -> None:
    server = Server("benchmark upstream", on_list_tools=_list_tools, on_call_tool=_call_tool)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    asyncio.run(serve())


if __name__ == "__main__":
    main()
