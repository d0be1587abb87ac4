"""Replay an agent version against a case set of agentops (``/api/v1/evals/``).

A case (``GET /api/v1/evals/case-sets/{id}/cases/``) holds a frozen ``conversation`` (OpenAI
chat messages), the ``tool_results`` on record and the ``write_tools``. The agent under test
is a callable ``agent(replay: CaseReplay) -> str | None`` that reads ``replay.conversation``,
calls tools only through ``replay.call_tool(name, args)`` and returns its final answer:

- a read tool answers the recorded result of the same call (same tool, equal arguments; a
  call made several times answers its recorded results in order, then the last again), or
  ``"Error: no recorded result ..."`` when there is none;
- a write tool never runs: the call is recorded as sandboxed and answers the recorded result
  of the same call, if there is one, else ``SANDBOXED``.

``replay_case`` gives the outcome agentops scores (``{"case", "calls", "final", "error"}``);
``run_eval`` replays a whole set and posts the outcomes, and the command line
``python -m agentops_client.evals CASE_SET --agent MODULE:CALLABLE --agent-version V
--url URL --token TOKEN [--threshold 0.9]`` exits 1 when the pass rate is below the threshold
(for CI).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable
from copy import deepcopy
from typing import Any

from agentops_client.sync import Client

SANDBOXED = {"sandboxed": True, "note": "a write tool: not run in an eval replay"}
Agent = Callable[["CaseReplay"], Any]


def _key(tool: str, args: Any) -> str:
    return json.dumps([tool, args], sort_keys=True, separators=(",", ":"), default=str)


class CaseReplay:
    """One case as its agent under test sees it: ``conversation`` (a copy it may extend),
    ``metadata``, ``write_tools``; ``calls`` are the tool calls made so far
    (``{"tool", "args", "sandboxed"}``)."""

    def __init__(self, case: dict[str, Any]) -> None:
        self.case_id = case.get("id")
        self.conversation: list[dict[str, Any]] = deepcopy(case.get("conversation") or [])
        self.metadata: dict[str, Any] = dict(case.get("metadata") or {})
        self.write_tools = frozenset(case.get("write_tools") or [])
        self.calls: list[dict[str, Any]] = []
        self._recorded: dict[str, list[Any]] = {}
        for result in case.get("tool_results") or []:
            self._recorded.setdefault(_key(result["tool"], result["args"]), []).append(
                result.get("result")
            )
        self._asked: dict[str, int] = {}

    def call_tool(self, tool: str, args: dict[str, Any]) -> Any:
        """The answer to the agent's call of ``tool`` with ``args`` (see the module
        docstring); the call is recorded either way."""
        key = _key(tool, args)
        recorded = self._recorded.get(key, [])
        asked = self._asked.get(key, 0)
        self._asked[key] = asked + 1
        sandboxed = tool in self.write_tools
        self.calls.append({"tool": tool, "args": deepcopy(args), "sandboxed": sandboxed})
        if recorded:
            return recorded[min(asked, len(recorded) - 1)]
        if sandboxed:
            return dict(SANDBOXED)
        return f"Error: no recorded result for {tool} with these arguments"


def replay_case(case: dict[str, Any], agent: Agent) -> dict[str, Any]:
    """Replay ``case`` (a case's JSON) with ``agent``; returns ``{"case": id, "calls": [...],
    "final": text, "error": text}``. An exception of the agent is its outcome (``error``:
    type and message), never raised."""
    replay = CaseReplay(case)
    final, error = "", ""
    try:
        answer = agent(replay)
        final = answer if isinstance(answer, str) else ("" if answer is None else str(answer))
    except Exception as exc:  # the agent under test failing is a result, not a crash
        error = f"{type(exc).__name__}: {exc}"
    return {"case": case.get("id"), "calls": replay.calls, "final": final, "error": error}


def load_agent(spec: str) -> Agent:
    """The callable ``MODULE:CALLABLE`` names (``examples.airline.eval_agent:recorded``).

    Raises:
        ValueError: ``spec`` has no ``:``, or what it names is not callable.
        ImportError: no such module.
    """
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"{spec!r} is not MODULE:CALLABLE")
    found = importlib.import_module(module)
    for part in name.split("."):
        found = getattr(found, part)
    if not callable(found):
        raise ValueError(f"{spec!r} is not callable")
    return found


def run_eval(
    client: Client,
    case_set: int,
    agent: Agent,
    *,
    agent_version: str,
    threshold: float | None = None,
) -> dict[str, Any]:
    """Replay every case of the current version of ``case_set`` with ``agent`` and record
    the eval run; returns it as the server answered (``pass_rate``, ``below_threshold``,
    ``results``, ``url``).

    Raises:
        NotFound: no such case set (or one the token may not see).
        BadRequest: a bad label or threshold.
    """
    found = client._run(client.aio._request("GET", f"/evals/case-sets/{case_set}/cases/"))
    outcomes = [replay_case(case, agent) for case in found["cases"]]
    body = {
        "case_set": case_set,
        "version": found["version"],
        "agent_version": agent_version,
        "threshold": threshold,
        "outcomes": outcomes,
    }
    answer: dict[str, Any] = client._run(client.aio._request("POST", "/evals/runs/", body))
    return answer


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring); 0 when the pass rate reaches the
    threshold (or none was given), 1 when it does not."""
    parser = argparse.ArgumentParser(description="Replay an agent version against a case set")
    parser.add_argument("case_set", type=int)
    parser.add_argument("--agent", required=True, help="MODULE:CALLABLE")
    parser.add_argument("--agent-version", required=True)
    parser.add_argument("--threshold", type=float, default=None, help="a pass rate, 0..1")
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    args = parser.parse_args(argv)
    with Client(args.url, args.token) as client:
        found = run_eval(
            client,
            args.case_set,
            load_agent(args.agent),
            agent_version=args.agent_version,
            threshold=args.threshold,
        )
    print(f"{found['passed']}/{found['total']} passed ({found['pass_rate']:.1%}): {found['url']}")
    return 1 if found["below_threshold"] else 0


if __name__ == "__main__":
    sys.exit(main())
