"""Agents: where a run's steps come from.

- ``plan``: every step is given when the run is created.
- ``client``: a client app appends steps over the API and says when it is done.
- ``transcript``: a recorded OpenAI chat-format conversation is replayed; each assistant tool
  call becomes a step, in order, and executing it returns the recorded ``tool`` message.

Each agent turns its creation payload into step specs (``StepSpec``) and says whether the run
is finished once no step is pending. The executor then treats every run alike.
"""

from runs.agents.base import StepSpec, agent_for
from runs.agents.transcript import parse_transcript

__all__ = ["StepSpec", "agent_for", "parse_transcript"]
