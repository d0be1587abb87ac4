"""An OpenAI-compatible chat-completions server that answers with the recorded assistant
turns of τ-bench conversations, so an unmodified OpenAI client or OpenAI Agents SDK agent
replays a conversation deterministically while its tools really run.

``POST /v1/chat/completions``: ``model`` names the conversation, ``tau-bench/<task_id>/<trial>``;
the answer is its next recorded assistant message after those the request already holds
(``answered_turns``). The recorded tool-call names and argument strings are kept, and the
ids with the turn's number added (``load_turns``).
``GET /v1/models`` lists the conversations. ``GET /v1/requests`` answers every
chat-completions request body received so far, in the order received (``{"requests":
[...]}``): what each model call was sent, for tests that check what the model saw (a
session's earlier turns, a compaction's summary).

Usage figures are synthetic (the recordings carry none), documented here so they can be
checked: ``prompt_tokens = ceil(characters of the request's message contents and tool-call
arguments / 4)``, ``completion_tokens = ceil(characters of the answer's content and
arguments / 4)``. ``PRICE_PER_MILLION`` gives the example's price (USD per million tokens;
synthetic, not any vendor's).

Errors: 404 unknown model or path; 400 a malformed body, ``stream: true`` (not supported) or
no recorded turn left (after a recording that ends on a tool call, the answer to its result
is an empty final message).

The altered version (``--altered``; ``ReplayServer(..., altered=True)``) is a second "agent
version" for evals: in the conversations of ``ALTERED`` the first call of a write tool acts on
the wrong object (``wrong_call``: its first text argument, a reservation or user id,
reversed); every other turn is the recorded one.

Run it alone: ``python -m examples.airline.model_server FILE [--host H] [--port N]
[--altered]``.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from examples.airline.tools import WRITE_TOOLS

PRICE_PER_MILLION = {"input": 2.50, "output": 10.00}
CREATED = 1715785200  # 2024-05-15 15:00 UTC: the conversations' "current time", fixed.
# The conversations whose first write the altered version gets wrong (``alter_turns``).
ALTERED = frozenset(
    {"tau-bench/3/0", "tau-bench/13/0", "tau-bench/25/0", "tau-bench/37/0", "tau-bench/47/0"}
)


def model_name(task_id: Any, trial: Any) -> str:
    """The model name that replays the conversation of ``task_id`` and ``trial``."""
    return f"tau-bench/{task_id}/{trial}"


def cost_usd(prompt_tokens: int, completion_tokens: int) -> float:
    """The example's price of a call (USD), from ``PRICE_PER_MILLION``."""
    return round(
        (
            prompt_tokens * PRICE_PER_MILLION["input"]
            + completion_tokens * PRICE_PER_MILLION["output"]
        )
        / 1_000_000,
        6,
    )


def _characters(messages: list[Any]) -> int:
    total = 0
    for message in messages:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            total += sum(
                len(str(part.get("text", ""))) for part in content if isinstance(part, dict)
            )
        for call in message.get("tool_calls") or []:
            total += len(str(call.get("function", {}).get("arguments", "")))
    return total


def load_turns(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The recorded assistant messages of every conversation in ``path`` (τ-bench's
    trajectories format), by model name.

    A recorded tool-call id may repeat within a conversation (36 do in the shared file), which
    no client can tell apart; each id gets the turn's number as a suffix (``call_x.6``)."""
    turns = {}
    for conversation in json.loads(Path(path).read_text()):
        name = model_name(conversation["task_id"], conversation["trial"])
        recorded = [m for m in conversation["traj"] if m.get("role") == "assistant"]
        turns[name] = [
            {
                **turn,
                "tool_calls": [
                    {**call, "id": f"{call['id']}.{j}"} for call in turn.get("tool_calls") or []
                ],
            }
            for j, turn in enumerate(recorded)
        ]
    return turns


def wrong_call(call: dict[str, Any]) -> dict[str, Any]:
    """``call`` (a recorded tool call) with its first text argument reversed
    (``"reservation_id": "M20IZO"`` becomes ``"OZI02M"``): the same action on the wrong
    object."""
    args = json.loads(call["function"]["arguments"])
    for name, value in args.items():
        if isinstance(value, str):
            args[name] = value[::-1]
            break
    return {**call, "function": {**call["function"], "arguments": json.dumps(args)}}


def alter_turns(turns: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """``turns`` with the first write call of each conversation of ``ALTERED`` made wrong
    (``wrong_call``)."""
    altered = dict(turns)
    for name in ALTERED & turns.keys():
        recorded = [dict(turn) for turn in turns[name]]
        for turn in recorded:
            calls = turn.get("tool_calls") or []
            if any(call["function"]["name"] in WRITE_TOOLS for call in calls):
                turn["tool_calls"] = [
                    wrong_call(call) if call["function"]["name"] in WRITE_TOOLS else call
                    for call in calls
                ]
                break
        altered[name] = recorded
    return altered


def _same_call_id(given: Any, recorded: str) -> bool:
    """Whether a request's tool-call id is the recorded turn's: its id as served
    (``call_x.6``) or as recorded (``call_x``, in a conversation cut from the recording)."""
    return given in (recorded, recorded.rpartition(".")[0])


def answered_turns(recorded: list[dict[str, Any]], messages: list[Any]) -> int:
    """How many recorded assistant turns the request's messages already hold: turn j counts
    when its text is the next assistant text of the request and its tool-call ids the next
    ones. Texts and calls are matched as two ordered streams, so a client that merges an
    answer and the next turn's tool call into one assistant message (as the Agents SDK's
    chat converter can) is still understood."""
    texts, calls = [], []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        if isinstance(message.get("content"), str) and message["content"]:
            texts.append(message["content"])
        calls += [c.get("id") for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    text_at = call_at = 0
    for j, turn in enumerate(recorded):
        ids = [c["id"] for c in turn.get("tool_calls") or []]
        if turn.get("content"):
            if text_at >= len(texts) or texts[text_at] != turn["content"]:
                return j
            text_at += 1
        if ids:
            given = calls[call_at : call_at + len(ids)]
            if len(given) != len(ids) or not all(map(_same_call_id, given, ids)):
                return j
            call_at += len(ids)
    return len(recorded)


@dataclass
class Answer:
    status: int
    body: dict[str, Any]


def complete(turns: dict[str, list[dict[str, Any]]], request: Any) -> Answer:
    """The answer to one chat-completions request body."""
    if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
        return _error(400, "the body must be an object with a messages list")
    if request.get("stream"):
        return _error(400, "streaming is not supported by the replay server")
    model = request.get("model")
    if model not in turns:
        return _error(404, f"no recorded conversation {model!r}", "model_not_found")
    messages = request["messages"]
    recorded = turns[model]
    k = answered_turns(recorded, messages)
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    if k >= len(recorded) and last.get("role") == "tool":
        # The recording ended on a tool call (a transfer to a human agent ends the
        # conversation): the agent's turn ends with an empty answer.
        turn: dict[str, Any] = {"content": ""}
    elif k >= len(recorded):
        return _error(400, f"{model} has {len(recorded)} assistant turns; turn {k + 1} asked")
    else:
        turn = recorded[k]
    message: dict[str, Any] = {"role": "assistant", "content": turn.get("content")}
    calls = turn.get("tool_calls") or []
    if calls:
        message["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                },
            }
            for call in calls
        ]
    prompt = math.ceil(_characters(messages) / 4)
    completion = math.ceil(_characters([message]) / 4)
    return Answer(
        200,
        {
            "id": f"chatcmpl-{model.replace('/', '-')}-{k}",
            "object": "chat.completion",
            "created": CREATED,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        },
    )


def _error(status: int, message: str, code: str = "invalid_request") -> Answer:
    return Answer(
        status, {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    )


def spawn(path: Path) -> tuple[subprocess.Popen[str], str]:
    """Start ``python -m examples.airline.model_server path --port 0`` in its own process (so
    answering never competes with the caller for its interpreter) and return it with its base
    URL."""
    process = subprocess.Popen(  # noqa: S603 - our own module, no shell
        [sys.executable, "-m", "examples.airline.model_server", str(path), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise RuntimeError(f"the replay model server did not start: {url!r}")
    return process, url


class ReplayServer:
    """A replay server on a background thread; ``url`` is its base (``http://host:port``)."""

    def __init__(
        self, path: Path, host: str = "127.0.0.1", port: int = 0, *, altered: bool = False
    ) -> None:
        turns = alter_turns(load_turns(path)) if altered else load_turns(path)
        # Every chat-completions request body received, in order (``GET /v1/requests``).
        self.requests: list[Any] = []
        received, lock = self.requests, threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def _send(self, answer: Answer) -> None:
                body = json.dumps(answer.body).encode()
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/requests":
                    with lock:
                        self._send(Answer(200, {"requests": list(received)}))
                    return
                if self.path.rstrip("/") != "/v1/models":
                    self._send(_error(404, f"no such path {self.path}", "not_found"))
                    return
                data = [
                    {"id": name, "object": "model", "created": CREATED, "owned_by": "tau-bench"}
                    for name in turns
                ]
                self._send(Answer(200, {"object": "list", "data": data}))

            def do_POST(self) -> None:
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(_error(404, f"no such path {self.path}", "not_found"))
                    return
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    request = json.loads(self.rfile.read(length) or b"null")
                except ValueError:
                    self._send(_error(400, "the body is not JSON"))
                    return
                with lock:
                    received.append(request)
                self._send(complete(turns, request))

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving."""
        self.httpd.shutdown()
        self.httpd.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, help="τ-bench-format trajectories JSON")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--altered", action="store_true", help="the altered version (ALTERED)")
    args = parser.parse_args()
    server = ReplayServer(args.file, args.host, args.port, altered=args.altered)
    # The first line says where it listens (``--port 0``: a free port).
    print(server.url, flush=True)
    server.thread.join()


if __name__ == "__main__":
    main()
