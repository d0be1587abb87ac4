"""Registering and looking up tools.

A tool is a Python callable ``fn(args: dict, ctx: ToolContext) -> JSON`` registered under a name
with a JSON Schema (draft 2020-12) for its arguments, a risk level, whether it has side
effects, and a timeout in seconds. Arguments are checked against the schema before a step is
accepted (``validate_args``).

A tool may also declare its *error form* (``error_when``): how a result it returns, instead of
raising, says the call was refused or went wrong (τ-bench's airline tools answer ``"Error:
..."``). Such a step still completes, with the result on record for the agent, but it is marked
a tool error (``tool_error_of``). Tools whose recorded outputs agentops replays without
running them (transcript runs) have their error form declared by name
(``declare_error_form``). A client that runs a tool itself says so in its report instead
(``is_error``, ``runs.executor.client``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from runs.tools.schemas import schema_problem
from runs.tools.validators import Validator

logger = logging.getLogger(__name__)


class ToolError(Exception):
    """A tool's own failure. ``retryable`` says whether another attempt may succeed."""

    def __init__(self, message: str, *, retryable: bool = False, type: str = "tool_error"):
        super().__init__(message)
        self.retryable = retryable
        self.type = type


def _no_heartbeat() -> bool:
    return True


@dataclass(frozen=True)
class ToolContext:
    """What a tool is told about the call: the idempotency key to pass to the outside system,
    the run and step ids, the 1-based attempt number and the timeout in seconds.

    A long tool calls ``heartbeat()`` now and then to extend its step's lease; it returns False
    once the lease is lost (the run was cancelled or the step recovered by the sweeper), and the
    tool should then stop without further effects.
    """

    idempotency_key: str
    run_id: str
    step_id: int
    attempt: int
    timeout_seconds: int
    heartbeat: Callable[[], bool] = _no_heartbeat


ToolFn = Callable[[dict[str, Any], ToolContext], Any]

# A tool's error form: whether a result (any JSON value) it returned is an error answer.
ErrorWhen = Callable[[Any], bool]


@dataclass(frozen=True)
class ErrorPrefix:
    """The error form "a string that starts with ``prefix``" (τ-bench's ``"Error: ..."``)."""

    prefix: str

    def __call__(self, result: Any) -> bool:
        return isinstance(result, str) and result.startswith(self.prefix)


@dataclass(frozen=True)
class PreviewContext:
    """What a tool's preview is told about the call it describes: the run and step ids and
    the run's project id."""

    run_id: str
    step_id: int
    project_id: int | None = None


# A dry run: what a call with these arguments would change, as a before/after description
# (an object such as ``{"balance": {"before": 120, "after": 20}}``, or text). It only reads:
# it must never perform the tool's effect.
PreviewFn = Callable[[dict[str, Any], PreviewContext], dict[str, Any] | str]


@dataclass(frozen=True)
class Tool:
    """A registered tool. ``risk`` is one of low, medium, high, critical; ``timeout_seconds``
    bounds one attempt; ``max_attempts`` counts the first attempt too. ``idempotent``: calling
    it twice with the same idempotency key has the effect of one call (the outside system
    deduplicates by key), so a call whose outcome is unknown may be repeated. ``error_when``
    (optional) is its error form: a result it holds true for is a tool error. ``key_args``
    names the arguments a reviewer's inbox shows on a call's line (empty: the first few).
    ``validators`` check each result it returns (``runs.tools.validators``), in order."""

    name: str
    fn: ToolFn
    description: str
    schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    risk: str = "low"
    side_effects: bool = False
    timeout_seconds: int = 60
    max_attempts: int = 3
    idempotent: bool = True
    preview: PreviewFn | None = None
    error_when: ErrorWhen | None = None
    key_args: tuple[str, ...] = ()
    validators: tuple[Validator, ...] = ()

    @property
    def safe_to_repeat(self) -> bool:
        """Whether an attempt whose outcome is unknown may be made again."""
        return self.idempotent or not self.side_effects

    def validate_args(self, args: Any) -> str | None:
        """The reason ``args`` fail this tool's schema, or None when they pass."""
        return schema_problem(self.schema, args)


_REGISTRY: dict[str, Tool] = {}
# The error forms of tools agentops replays without running them, by name.
_ERROR_FORMS: dict[str, ErrorWhen] = {}


def register(
    name: str,
    *,
    description: str,
    schema: dict[str, Any] | None = None,
    risk: str = "low",
    side_effects: bool = False,
    timeout_seconds: int = 60,
    max_attempts: int = 3,
    idempotent: bool | None = None,
    preview: PreviewFn | None = None,
    error_when: ErrorWhen | None = None,
    key_args: tuple[str, ...] = (),
    validators: tuple[Validator, ...] = (),
) -> Callable[[ToolFn], ToolFn]:
    """Decorator registering ``fn`` as the tool ``name``.

    ``idempotent`` defaults to True for tools without side effects and False for the others.
    ``preview`` (optional, ``PreviewFn``) describes what a call would change without making
    it; reviewers see it on the call's approval card (``runs.tools.preview.tool_preview``).
    ``error_when`` (optional, ``ErrorWhen``) is the tool's error form (``tool_error_of``).
    ``key_args`` (optional) names the arguments the approvals inbox shows on a call's line.
    ``validators`` (optional) check its results (``runs.tools.validators``).

    Raises:
        ValueError: ``name`` is taken, or the schema is not a valid JSON Schema.
    """

    def decorate(fn: ToolFn) -> ToolFn:
        if name in _REGISTRY:
            raise ValueError(f"tool {name!r} is already registered")
        tool_schema = schema or {"type": "object"}
        Draft202012Validator.check_schema(tool_schema)
        _REGISTRY[name] = Tool(
            name=name,
            fn=fn,
            description=description,
            schema=tool_schema,
            risk=risk,
            side_effects=side_effects,
            timeout_seconds=timeout_seconds,
            max_attempts=max_attempts,
            idempotent=(not side_effects) if idempotent is None else idempotent,
            preview=preview,
            error_when=error_when,
            key_args=key_args,
            validators=tuple(validators),
        )
        return fn

    return decorate


def declare_error_form(names: Iterable[str], error_when: ErrorWhen) -> None:
    """Declare ``error_when`` the error form of the tools ``names`` as agentops meets them
    without running them: tools whose recorded outputs transcript runs replay. A registered
    tool of the same name that declares its own ``error_when`` is judged by that.

    Raises:
        ValueError: one of ``names`` already has a declared form.
    """
    names = list(names)
    taken = sorted(set(names) & set(_ERROR_FORMS))
    if taken:
        raise ValueError(f"tools {taken} already have a declared error form")
    _ERROR_FORMS.update(dict.fromkeys(names, error_when))


def tool_error_of(name: str, result: Any) -> bool:
    """Whether ``result`` (any JSON value) is an error answer of the tool ``name``: by the
    registered tool's ``error_when`` when it has one, else by the form declared for the name
    (``declare_error_form``); False for a tool with neither, and for an error form that
    raises (logged: recording the call's outcome must not fail on it)."""
    tool = _REGISTRY.get(name)
    error_when = tool.error_when if tool is not None else None
    error_when = error_when or _ERROR_FORMS.get(name)
    if error_when is None:
        return False
    try:
        return bool(error_when(result))
    except Exception:
        logger.exception("the error form of tool %r raised; the result counts as none", name)
        return False


def get_tool(name: str) -> Tool | None:
    """The tool registered as ``name``, or None."""
    return _REGISTRY.get(name)


def all_tools() -> list[Tool]:
    """Every registered tool, sorted by name."""
    return sorted(_REGISTRY.values(), key=lambda t: t.name)
