"""An OpenAI-compatible chat-completions server that answers with the recorded assistant
turns of τ-bench conversations, so an unmodified OpenAI client or OpenAI Agents SDK agent
replays a conversation deterministically while its tools really run.

``POST /v1/chat/completions``: ``model`` names the conversation, ``tau-bench/<task_id>/<trial>``;
the answer is its k-th recorded assistant message, k being the number of assistant messages
already in the request. The recorded tool-call ids, names and argument strings are kept.
``GET /v1/models`` lists the conversations.

Usage figures are synthetic (the recordings carry none), documented here so they can be
checked: ``prompt_tokens = ceil(characters of the request's message contents and tool-call
arguments / 4)``, ``completion_tokens = ceil(characters of the answer's content and
arguments / 4)``. ``PRICE_PER_MILLION`` gives the example's price (USD per million tokens;
synthetic, not any vendor's).

Errors: 404 unknown model or path; 400 a malformed body, ``stream: true`` (not supported) or
no recorded turn left.

Run it alone: ``python -m examples.airline.model_server FILE [--host H] [--port N]``.
"""

from __future__ import annotations

import argparse
import json
import math
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PRICE_PER_MILLION = {"input": 2.50, "output": 10.00}
CREATED = 1715785200  # 2024-05-15 15:00 UTC: the conversations' "current time", fixed.


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
    trajectories format), by model name."""
    turns = {}
    for conversation in json.loads(Path(path).read_text()):
        name = model_name(conversation["task_id"], conversation["trial"])
        turns[name] = [m for m in conversation["traj"] if m.get("role") == "assistant"]
    return turns


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
    k = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
    recorded = turns[model]
    if k >= len(recorded):
        return _error(400, f"{model} has {len(recorded)} assistant turns; turn {k + 1} asked")
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


class ReplayServer:
    """A replay server on a background thread; ``url`` is its base (``http://host:port``)."""

    def __init__(self, path: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        turns = load_turns(path)

        class Handler(BaseHTTPRequestHandler):
            def _send(self, answer: Answer) -> None:
                body = json.dumps(answer.body).encode()
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
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
    args = parser.parse_args()
    server = ReplayServer(args.file, args.host, args.port)
    print(f"replaying {args.file} at {server.url}/v1", flush=True)
    server.thread.join()


if __name__ == "__main__":
    main()
