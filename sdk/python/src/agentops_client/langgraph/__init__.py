"""LangGraph under agentops (needs the ``langgraph`` extra): ``AgentOpsSaver``, a
checkpointer that keeps a graph's threads (checkpoints, channel values, pending writes) in
agentops sessions, audited, with retention and forks."""

from agentops_client.langgraph.saver import AgentOpsSaver

__all__ = ["AgentOpsSaver"]
