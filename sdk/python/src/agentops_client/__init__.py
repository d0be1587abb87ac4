"""agentops-client: put an agent's tool calls and model turns under agentops.

``Client`` (sync) and ``AsyncClient`` (async) speak the REST API; ``start_run`` / ``resume``
give a run handle whose ``call_tool`` and ``tool`` decorator run a local function as a client
step (append → wait for its gate → run → report), returning its result or a ``Rejected``.
``Memory`` and ``AsyncMemory`` (``agentops_client.memory``) read and write the memory store as
LangGraph's ``BaseStore`` does. ``agentops_client.openai_agents`` routes an OpenAI Agents SDK
agent through a handle.
"""

from agentops_client._protocol import Retry
from agentops_client.aio import AsyncClient
from agentops_client.artifacts import Artifact, ArtifactMismatch
from agentops_client.errors import (
    AgentOpsError,
    BadRequest,
    Conflict,
    IdempotencyMismatch,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    ServerError,
    StepFailed,
    TooLarge,
    ToolFailed,
)
from agentops_client.handle import AsyncRunHandle, current_step
from agentops_client.memory import AsyncMemory, Memory, MemoryItem
from agentops_client.models import AgentState, Approval, Rejected, Run, Session, Step
from agentops_client.sync import Client, RunHandle

__all__ = [
    "AgentOpsError",
    "AgentState",
    "Approval",
    "Artifact",
    "ArtifactMismatch",
    "AsyncClient",
    "AsyncMemory",
    "AsyncRunHandle",
    "BadRequest",
    "Client",
    "Conflict",
    "IdempotencyMismatch",
    "Memory",
    "MemoryItem",
    "NotAuthenticated",
    "NotFound",
    "PermissionDenied",
    "PreconditionFailed",
    "Rejected",
    "Retry",
    "Run",
    "RunHandle",
    "ServerError",
    "Session",
    "Step",
    "StepFailed",
    "TooLarge",
    "ToolFailed",
    "current_step",
]
