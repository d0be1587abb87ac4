"""Cases from τ-bench-shaped files: a list of conversations, each ``{"task_id", "trial",
"traj": [OpenAI chat messages], "reward"?, "info"?}`` (τ-bench's trajectories format, as in
``../shared/data/tau-bench-airline/trajectories.json``).

A conversation becomes a case at its first assistant message that calls one of
``write_tools``: the conversation before that message, the recorded outcome of that agent
turn (its tool calls up to the next user message) as the expected calls, and every recorded
call's output as the tool results on record (a call's output is the ``tool`` message after it
with its ``tool_call_id``). A conversation without such a call is left out.
"""

from __future__ import annotations

import json
from typing import Any

from agentops.actors import Actor
from agentops.errors import InvalidInput
from evals.models import Case, CaseSource
from evals.services import NewCase, case_checked, cases_add

# The most conversations one import reads.
MAX_CONVERSATIONS = 1000


def _calls(message: dict[str, Any], where: str) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise InvalidInput(f"{where}: a tool call without a function name", field="file")
        try:
            args = json.loads(function.get("arguments") or "{}")
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"{where}: arguments are not JSON", field="file") from exc
        if not isinstance(args, dict):
            raise InvalidInput(f"{where}: arguments are not a JSON object", field="file")
        found.append((function["name"], args))
    return found


def _tool_results(traj: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    found = []
    for i, message in enumerate(traj):
        ids = [c.get("id") for c in message.get("tool_calls") or [] if isinstance(c, dict)]
        for call_id, (tool, args) in zip(ids, _calls(message, f"{where} message {i}"), strict=True):
            output = next(
                (m.get("content") for m in traj[i + 1 :] if m.get("tool_call_id") == call_id), None
            )
            found.append({"tool": tool, "args": args, "result": output})
    return found


def new_case_from_conversation(
    conversation: Any, *, write_tools: set[str], where: str
) -> NewCase | None:
    """The case of one τ-bench conversation (see the module docstring), or None when it
    calls none of ``write_tools``.

    Raises:
        InvalidInput: the conversation is not τ-bench-shaped (``where`` says which).
    """
    if not isinstance(conversation, dict) or not isinstance(conversation.get("traj"), list):
        raise InvalidInput(f"{where}: each conversation is an object with traj", field="file")
    traj = conversation["traj"]
    if not all(isinstance(m, dict) for m in traj):
        raise InvalidInput(f"{where}: traj holds message objects", field="file")
    for i, message in enumerate(traj):
        calls = (
            _calls(message, f"{where} message {i}") if message.get("role") == "assistant" else []
        )
        if not any(tool in write_tools for tool, _ in calls):
            continue
        expected = []
        for later in traj[i:]:
            if later.get("role") == "user":
                break
            expected += [{"tool": t, "args": a} for t, a in _calls(later, where)]
        task, trial = conversation.get("task_id"), conversation.get("trial")
        return case_checked(
            {
                "name": f"τ-bench task {task}, trial {trial}",
                "source": CaseSource.TAU_BENCH,
                "conversation": traj[:i],
                "tool_results": _tool_results(traj, where),
                "write_tools": sorted(write_tools),
                "expected": {"kind": "calls", "calls": expected, "source": "recorded"},
                "metadata": {
                    "task_id": task,
                    "trial": trial,
                    "reward": conversation.get("reward"),
                },
            },
            where,
        )
    return None


def cases_import_tau_bench(
    *,
    case_set_id: int,
    conversations: Any,
    write_tools: list[str],
    limit: int | None = None,
    actor: Actor,
) -> list[Case]:
    """Add a case per conversation of ``conversations`` (τ-bench-shaped, see the module
    docstring) that calls one of ``write_tools``, the first ``limit`` such (None: all), to
    case set ``case_set_id`` as one new version.

    Raises:
        CaseSet.DoesNotExist: no such case set.
        InvalidInput: not a list of at most ``MAX_CONVERSATIONS`` τ-bench conversations, no
            write tool named, or a bad ``limit``.
    """
    if not isinstance(conversations, list) or len(conversations) > MAX_CONVERSATIONS:
        raise InvalidInput(
            f"the file must be a list of at most {MAX_CONVERSATIONS} conversations", field="file"
        )
    if not write_tools or not all(isinstance(w, str) and w for w in write_tools):
        raise InvalidInput("write_tools must name at least one tool", field="write_tools")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise InvalidInput("limit must be a positive number", field="limit")
    made: list[NewCase] = []
    for i, conversation in enumerate(conversations):
        case = new_case_from_conversation(
            conversation, write_tools=set(write_tools), where=f"conversation {i}"
        )
        if case is not None:
            made.append(case)
        if limit is not None and len(made) >= limit:
            break
    return cases_add(case_set_id=case_set_id, cases=made, actor=actor)
