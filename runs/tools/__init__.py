"""The tool registry: callables a step may name, with their argument schema and risk."""

from runs.tools.compensations import (
    Compensation,
    CompensationError,
    compensation_args,
    compensation_of,
    declare_compensation,
)
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
from runs.tools.validators import ValidationFailure, Validator, validation_failure

__all__ = [
    "Compensation",
    "CompensationError",
    "ErrorPrefix",
    "ErrorWhen",
    "PreviewContext",
    "PreviewFn",
    "Tool",
    "ToolContext",
    "ToolError",
    "ValidationFailure",
    "Validator",
    "all_tools",
    "compensation_args",
    "compensation_of",
    "declare_compensation",
    "declare_error_form",
    "get_tool",
    "register",
    "schema_invalid",
    "schema_problem",
    "tool_error_of",
    "validation_failure",
]
