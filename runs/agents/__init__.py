"""Agents: where a run's steps come from.

- ``plan``: every step is given when the run is created.
- ``client``: a client app appends steps over the API and says when it is done.
- ``mcp``: an MCP client's session through the gateway (``gateway``), driven like ``client``.
- ``transcript``: a recorded OpenAI chat-format conversation is replayed; each assistant tool
  call becomes a step, in order, and executing it returns the recorded ``tool`` message.

Each agent turns its creation payload into step specs (``StepSpec``) and says whether the run
is finished once no step is pending. The executor then treats every run alike.
"""

from agentops.errors import InvalidInput
from runs.agents.base import Agent, ClientAgent, McpAgent, PlanAgent, StepSpec
from runs.agents.transcript import TranscriptAgent, parse_transcript

__all__ = ["StepSpec", "agent_for", "parse_transcript"]


_AGENTS: dict[str, Agent] = {
    "plan": PlanAgent(),
    "client": ClientAgent(),
    "transcript": TranscriptAgent(),
    "mcp": McpAgent(),
}


def agent_for(kind: str) -> Agent:
    """The agent for ``kind`` (plan, client, transcript).

    Raises:
        InvalidInput: unknown kind.
    """
    try:
        return _AGENTS[kind]
    except KeyError:
        raise InvalidInput(
            f"agent must be one of {sorted(_AGENTS)}, not {kind!r}", field="agent"
        ) from None
