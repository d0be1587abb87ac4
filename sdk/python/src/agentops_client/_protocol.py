"""What the sync and async clients share: request shapes, retry rules, keys and how a client
step's state turns into what the agent gets. No I/O here."""

from __future__ import annotations

import hashlib
import json
import random
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from agentops_client.errors import Conflict, StepFailed, error_for
from agentops_client.models import REFUSED, Rejected, Step

API = "/api/v1"
# Marks a response the server replayed for a repeated Idempotency-Key (a past state).
REPLAYED = "_idempotent_replayed"
# The media types of a state patch: JSON Merge Patch (RFC 7396) and JSON Patch (RFC 6902).
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
# What the server says when a request with the same Idempotency-Key is still being processed.
IN_FLIGHT = "still being processed"


@dataclass(frozen=True)
class Retry:
    """Retries of a request that failed on the network, with a 5xx, or while its key was in
    flight: up to ``attempts`` tries, waiting ``base`` * 2**n seconds (at most ``cap``) with
    full jitter between them."""

    attempts: int = 6
    base: float = 0.2
    cap: float = 5.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after try number ``attempt`` (1-based)."""
        return random.uniform(0, min(self.cap, self.base * 2 ** (attempt - 1)))


def new_key() -> str:
    """A fresh Idempotency-Key."""
    return str(uuid.uuid4())


def state_etag(run_id: str, version: int) -> str:
    """The entity tag the server gives version ``version`` of run ``run_id``'s agent state
    (strong, quoted): what a write made against that version sends as ``If-Match``."""
    return f'"{run_id}:{version}"'


def args_digest(args: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``args`` (as the server computes it)."""
    text = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def call_key(run_id: str, counter: int, tool: str, args: dict[str, Any], call_id: str) -> str:
    """The Idempotency-Key of appending a call: the same for the same call of a restarted
    client, so it gets the step it appended before instead of a new one."""
    if call_id:
        return f"{run_id}:call:{call_id}"
    return f"{run_id}:call:{counter}:{tool}:{args_digest(args)}"


def retryable(status: int, body: Any) -> bool:
    """Whether a response is worth retrying with the same key: 5xx, or a 409 because the
    first request with the key is still being processed."""
    if status >= 500:
        return True
    return status == 409 and IN_FLIGHT in str(body)


def parse(status: int, text: str) -> Any:
    """The JSON of a response, raising its ``AgentOpsError`` when ``status`` refuses."""
    try:
        body = json.loads(text) if text else None
    except ValueError:
        body = text
    if status >= 400:
        raise error_for(status, body)
    return body


def check_json(value: Any, what: str) -> Any:
    """``value`` when it is JSON.

    Raises:
        TypeError: it is not (a set, an object, NaN...).
    """
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON: {exc}") from exc
    return value


def ws_url(base_url: str, run_id: str, token: str, after: int | None) -> str:
    """The run's event stream URL (``ws``/``wss`` for ``http``/``https``), replaying the
    events after event id ``after`` (none when None)."""
    parts = urlsplit(base_url)
    scheme = "wss" if parts.scheme == "https" else "ws"
    path = parts.path.rstrip("/") + f"/ws/runs/{run_id}/"
    params: dict[str, Any] = {"token": token}
    if after is not None:
        params["after"] = after
    query = urlencode(params)
    return urlunsplit((scheme, parts.netloc, path, query, ""))


def concerns(event: dict[str, Any], step_id: int | None) -> bool:
    """Whether an audit event may change what a waiter waits for: any event of the run
    itself, or of step ``step_id`` (all steps when None)."""
    kind = event.get("object_type")
    if kind == "run":
        return True
    if kind == "step":
        return step_id is None or str(event.get("object_id")) == str(step_id)
    return False


@dataclass(frozen=True)
class Outcome:
    """What happens with a client step once it is settled: ``run`` the tool locally,
    ``result`` (already on record), or ``rejected``."""

    kind: str
    value: Any = None


def outcome_of(step: Step) -> Outcome:
    """What to do with a settled step.

    Raises:
        StepFailed: the step failed, was cancelled or skipped.
    """
    if step.status == "ready":
        return Outcome("run")
    if step.status == "succeeded":
        return Outcome("result", step.result)
    if step.status in REFUSED:
        return Outcome("rejected", Rejected.from_error(step.error))
    raise StepFailed(step)


def error_report(exc: BaseException) -> dict[str, Any]:
    """The report of a local function that raised."""
    return {"error": {"type": type(exc).__name__, "message": str(exc)[:10000], "retryable": False}}


def already_reported(exc: Conflict) -> bool:
    """Whether a 409 on a report says the step was settled meanwhile (read it again)."""
    return "is already" in exc.detail or "not ready" in exc.detail
