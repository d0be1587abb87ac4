"""The τ-bench airline agent as a client of agentops: live airline tools on PostgreSQL
(``store``, ``documents``, ``read_tools``, ``write_tools``, run by ``tools``; also served as an
MCP server by ``mcp_server``), an OpenAI-compatible server replaying the recorded model turns
(``model_server``) and the driver that replays whole conversations (``replay``)."""
