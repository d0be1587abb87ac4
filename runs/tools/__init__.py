"""The tool registry: callables a step may name, with their argument schema and risk."""

from runs.tools.registry import (
    ErrorPrefix,
    ErrorWhen,
    PreviewContext,
    PreviewFn,
    Tool,
    ToolContext,
    ToolError,
    all_tools,
    declare_error_form,
    get_tool,
    register,
    tool_error_of,
)
from runs.tools.schemas import schema_invalid, schema_problem

__all__ = [
    "ErrorPrefix",
    "ErrorWhen",
    "PreviewContext",
    "PreviewFn",
    "Tool",
    "ToolContext",
    "ToolError",
    "all_tools",
    "declare_error_form",
    "get_tool",
    "register",
    "schema_invalid",
    "schema_problem",
    "tool_error_of",
]
