"""The tool registry: callables a step may name, with their argument schema and risk."""

from runs.tools.registry import (
    PreviewContext,
    PreviewFn,
    Tool,
    ToolContext,
    ToolError,
    all_tools,
    get_tool,
    register,
    schema_invalid,
    schema_problem,
)

__all__ = [
    "PreviewContext",
    "PreviewFn",
    "Tool",
    "ToolContext",
    "ToolError",
    "all_tools",
    "get_tool",
    "register",
    "schema_invalid",
    "schema_problem",
]
