"""The airline agent as an agent under test of an eval (``agentops_client.evals``), in two
versions: ``recorded`` (the replay model server: the recorded τ-bench turns) and ``altered``
(the same server with the known wrong write calls of ``model_server.ALTERED``).

The agent is a plain chat-completions loop: it sends the case's conversation and the airline
tools to the model, runs each tool call it answers through the replay's ``call_tool`` (read
tools answer from the recorded results, write tools are sandboxed), and stops at the first
answer without a tool call, its final answer. The model is the case's τ-bench conversation
(``metadata``: ``task_id``, ``trial``). Each version's server starts on first use, on a
thread of this process, and serves until it exits.

    python manage.py run_eval CASE_SET --agent examples.airline.eval_agent:altered \\
        --agent-version altered
"""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx

from examples.airline import model_server, tools
from examples.airline.store import DEFAULT_DATA_DIR

TRAJECTORIES = DEFAULT_DATA_DIR / "trajectories.json"
# The most model turns one case may take (a loop that never answers fails the case).
MAX_TURNS = 30
_servers: dict[bool, model_server.ReplayServer] = {}
_lock = threading.Lock()


def _url(altered: bool) -> str:
    with _lock:
        if altered not in _servers:
            _servers[altered] = model_server.ReplayServer(TRAJECTORIES, altered=altered)
        return _servers[altered].url


def chat_agent(replay: Any, url: str) -> str:
    """Answer ``replay`` (an ``agentops_client.evals.CaseReplay``) with the model at ``url``.

    Raises:
        RuntimeError: the model answered an error, or took more than ``MAX_TURNS`` turns.
    """
    model = model_server.model_name(replay.metadata["task_id"], replay.metadata["trial"])
    messages = list(replay.conversation)
    specs = tools.tool_specs()
    with httpx.Client(base_url=url, timeout=30) as http:
        for _ in range(MAX_TURNS):
            answer = http.post(
                "/v1/chat/completions", json={"model": model, "messages": messages, "tools": specs}
            )
            if answer.status_code != 200:
                raise RuntimeError(f"the model answered {answer.status_code}: {answer.text}")
            message = answer.json()["choices"][0]["message"]
            messages.append(message)
            calls = message.get("tool_calls") or []
            if not calls:
                return str(message.get("content") or "")
            for call in calls:
                name = call["function"]["name"]
                result = replay.call_tool(name, json.loads(call["function"]["arguments"]))
                content = result if isinstance(result, str) else json.dumps(result)
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "name": name, "content": content}
                )
    raise RuntimeError(f"no final answer after {MAX_TURNS} model turns")


def recorded(replay: Any) -> str:
    """The recorded agent version."""
    return chat_agent(replay, _url(altered=False))


def altered(replay: Any) -> str:
    """The altered agent version: wrong write calls in the conversations of
    ``model_server.ALTERED``."""
    return chat_agent(replay, _url(altered=True))
