"""LangGraph under agentops (needs the ``langgraph`` extra): ``AgentOpsSaver``, a
checkpointer that keeps a graph's threads (checkpoints, channel values, pending writes) in
agentops sessions, audited, with retention and forks; ``AgentOpsStore``, a store whose items
are agentops memory items (audited, versioned, full-text searched, with TTLs);
``governed_tool_node``, LangGraph's ``ToolNode`` whose tool calls are client steps (risk,
approval, ledger, idempotency key); ``AgentOpsCallbackHandler``, which records the model
turns (messages, tokens, latency)."""

from agentops_client.langgraph.saver import AgentOpsSaver
from agentops_client.langgraph.store import AgentOpsStore
from agentops_client.langgraph.tools import AgentOpsCallbackHandler, governed_tool_node

__all__ = ["AgentOpsCallbackHandler", "AgentOpsSaver", "AgentOpsStore", "governed_tool_node"]
