"""The agent interface and the plan and client agents."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentops.errors import InvalidInput

if TYPE_CHECKING:
    from runs.models import Run

# The longest tool name and tool call id a step holds (``Step.tool``, ``Step.tool_call_id``).
MAX_TOOL_NAME = 128


@dataclass
class StepSpec:
    """A step an agent wants run: ``tool`` name, ``args`` object and the agent's ``rationale``;
    transcript steps also carry ``tool_call_id`` and the ``recorded_result`` to replay, the
    ``position`` of their recorded result (the ``tool`` message) in the conversation and
    the ``call_position`` of the assistant message that made the call. ``executor`` is
    ``server`` (a registered tool the workers run) or ``client`` (the client app runs it;
    ``args_schema`` is the JSON Schema it gave for the arguments, possibly empty).
    ``declared_risk`` is the risk the tool's own server declares (an MCP server's annotations,
    read by the gateway), empty if none."""

    tool: str
    args: dict[str, Any]
    rationale: str = ""
    tool_call_id: str = ""
    recorded_result: Any = None
    position: int | None = None
    call_position: int | None = None
    executor: str = "server"
    args_schema: dict[str, Any] = field(default_factory=dict)
    declared_risk: str = ""


@dataclass
class Prepared:
    """What an agent makes of a create request: initial ``steps``, the run's ``conversation``
    (messages) and agent data kept in the run's ``input``."""

    steps: list[StepSpec]
    conversation: list[dict[str, Any]] = field(default_factory=list)
    input: dict[str, Any] = field(default_factory=dict)


def parse_step_list(raw: Any, *, field_name: str = "steps") -> list[StepSpec]:
    """Turn ``[{"tool": str, "args": {}?, "rationale": str?}, ...]`` into step specs.

    Raises:
        InvalidInput: not a list of such objects.
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidInput(f"{field_name} must be a list", field=field_name)
    specs = []
    for i, item in enumerate(raw):
        where = f"{field_name}[{i}]"
        if not isinstance(item, dict):
            raise InvalidInput(f"{where} must be an object", field=where)
        unknown = set(item) - {"tool", "args", "rationale"}
        if unknown:
            raise InvalidInput(f"{where} has unknown keys: {sorted(unknown)}", field=where)
        tool = item.get("tool")
        if not isinstance(tool, str) or not 0 < len(tool) <= MAX_TOOL_NAME:
            raise InvalidInput(
                f"{where}.tool must be a string of 1 to {MAX_TOOL_NAME} characters",
                field=f"{where}.tool",
            )
        args = item.get("args", {})
        if not isinstance(args, dict):
            raise InvalidInput(f"{where}.args must be an object", field=f"{where}.args")
        rationale = item.get("rationale", "")
        if not isinstance(rationale, str):
            raise InvalidInput(f"{where}.rationale must be a string", field=f"{where}.rationale")
        specs.append(StepSpec(tool=tool, args=args, rationale=rationale))
    return specs


class Agent:
    """Base agent. ``kind`` is an ``AgentKind`` value."""

    kind = ""
    # Whether steps name registered tools whose arguments must pass the tool's schema.
    needs_registered_tools = True
    # Whether the agent takes a gate's refusal of a step as that tool call's outcome and goes
    # on (it can choose another call); an agent that cannot replan fails the run instead.
    replans_after_refusal = False

    def prepare(self, payload: dict[str, Any]) -> Prepared:
        """The steps, conversation and stored input of a run created with ``payload``.

        Raises:
            InvalidInput: the payload does not fit this agent.
        """
        return Prepared(steps=parse_step_list(payload.get("steps")))

    def is_finished(self, run: Run) -> bool:
        """Whether a run with no pending step is done."""
        return True

    def checkpoint_state(self, run: Run, *, index: int, tool: str, result: Any) -> dict[str, Any]:
        """The run's ``state`` after the step at ``index`` returned ``result``."""
        return {
            **run.state,
            "completed_steps": index + 1,
            "last_step": {"index": index, "tool": tool, "result": result},
        }


class PlanAgent(Agent):
    kind = "plan"

    def prepare(self, payload: dict[str, Any]) -> Prepared:
        prepared = super().prepare(payload)
        if not prepared.steps:
            raise InvalidInput("a plan run needs at least one step in steps", field="steps")
        return prepared


class ClientAgent(Agent):
    kind = "client"
    # The client app reads the refusal (the reviewer's reason) and appends what it does next.
    replans_after_refusal = True

    def is_finished(self, run: Run) -> bool:
        # A client run idles in `running` until the client app says it appends no more steps.
        return run.client_done


class McpAgent(ClientAgent):
    """An MCP client's session through the gateway: its tool calls are appended as client
    steps, which the gateway runs against the upstream MCP server."""

    kind = "mcp"
