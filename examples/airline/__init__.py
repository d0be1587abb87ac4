"""The τ-bench airline agent as a client of agentops: live airline tools on PostgreSQL
(``store``, ``tools``), an OpenAI-compatible server replaying the recorded model turns
(``model_server``) and the driver that replays whole conversations (``replay``)."""
