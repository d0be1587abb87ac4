"""A client run's model turns: the conversation messages its client reports (``Message`` rows,
one INSERT per turn), and the usage of each model call (tokens, cost, latency), added to the
run's totals."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from agentops.actors import Actor
from agentops.errors import InvalidInput
from audit.services import audited_atomic
from runs.control.compaction import compact_run_on_commit, context_over_threshold
from runs.control.identity import identity_apply, model_call_identity, parse_identity
from runs.control.lifecycle import lock_client_run
from runs.control.sessions import session_messages_locked
from runs.executor.limits import budget_stops_run_locked
from runs.models import Message, ModelCall, Run
from runs.models.conversation import estimate_tokens
from runs.selectors import last_step_index
from runs.store.writes import insert_new
from runs.transitions import (
    lock_session,
    record_event,
    record_session_event,
    save_run,
    save_session,
)

# OpenAI chat-format roles and message keys a run keeps.
ROLES = {"system", "developer", "user", "assistant", "tool"}
MESSAGE_KEYS = {"role", "content", "name", "tool_calls", "tool_call_id", "refusal"}
MAX_MESSAGES = 200
USAGE_KEYS = {"model", "input_tokens", "output_tokens", "cost_usd", "latency_ms"}
# Upper bounds that keep a report's figures in their columns (and out of absurdity).
MAX_TOKENS = 10**12
MAX_COST_USD = Decimal("1000000")
MAX_LATENCY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class Usage:
    """What one model call (or one tool call) used: ``model`` name, ``input_tokens`` and
    ``output_tokens`` (tokens), ``cost_usd`` (USD), ``latency_ms`` (ms)."""

    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: Decimal = Decimal(0)
    latency_ms: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def as_json(self) -> dict[str, Any]:
        """The usage as a JSON object (cost as a number)."""
        return {
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": float(self.cost_usd),
            "latency_ms": self.latency_ms,
        }


def _count(raw: dict[str, Any], key: str, where: str, limit: int) -> int:
    value = raw.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise InvalidInput(f"{where}.{key} must be an integer from 0 to {limit}", field=where)
    return value


def parse_usage(raw: Any, *, where: str = "usage", model_required: bool = True) -> Usage:
    """Check a reported usage object: ``{"model": str, "input_tokens": int,
    "output_tokens": int, "cost_usd": number, "latency_ms": int}`` (all but ``model`` may be
    left out, meaning 0).

    Raises:
        InvalidInput: not such an object (unknown keys, negative or huge numbers, NaN).
    """
    if not isinstance(raw, dict):
        raise InvalidInput(f"{where} must be an object", field=where)
    unknown = set(raw) - USAGE_KEYS
    if unknown:
        raise InvalidInput(f"{where} has unknown keys: {sorted(unknown)}", field=where)
    model = raw.get("model", "")
    if not isinstance(model, str) or len(model) > 200 or (model_required and not model):
        raise InvalidInput(f"{where}.model must be a model name (1-200 characters)", field=where)
    cost = raw.get("cost_usd", 0)
    if isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost):
        raise InvalidInput(f"{where}.cost_usd must be a number", field=where)
    amount = Decimal(str(cost))
    if not 0 <= amount <= MAX_COST_USD:
        raise InvalidInput(f"{where}.cost_usd must be from 0 to {MAX_COST_USD}", field=where)
    return Usage(
        model=model,
        input_tokens=_count(raw, "input_tokens", where, MAX_TOKENS),
        output_tokens=_count(raw, "output_tokens", where, MAX_TOKENS),
        cost_usd=amount.quantize(Decimal("0.000001")),
        latency_ms=_count(raw, "latency_ms", where, MAX_LATENCY_MS),
    )


def parse_messages(raw: Any) -> list[dict[str, Any]]:
    """Check OpenAI chat-format messages: a list of 1 to ``MAX_MESSAGES`` objects with a known
    ``role`` and only the keys ``MESSAGE_KEYS``.

    Raises:
        InvalidInput: not such a list.
    """
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_MESSAGES:
        raise InvalidInput(f"messages must be a list of 1 to {MAX_MESSAGES}", field="messages")
    for i, message in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise InvalidInput(f"{where} must be an object", field=where)
        if message.get("role") not in ROLES:
            raise InvalidInput(f"{where}.role must be one of {sorted(ROLES)}", field=where)
        unknown = set(message) - MESSAGE_KEYS
        if unknown:
            raise InvalidInput(f"{where} has unknown keys: {sorted(unknown)}", field=where)
        content = message.get("content")
        if content is not None and not isinstance(content, str | list):
            raise InvalidInput(f"{where}.content must be a string, a list or null", field=where)
        if "tool_calls" in message and not isinstance(message["tool_calls"], list):
            raise InvalidInput(f"{where}.tool_calls must be a list", field=where)
    return raw


def add_usage_locked(run: Run, usage: Usage) -> None:
    """Add ``usage`` to a locked run's totals (the caller saves the run)."""
    run.usage_tokens += usage.tokens
    run.cost_usd = Decimal(run.cost_usd) + usage.cost_usd


def message_rows(
    run: Run, messages: list[dict[str, Any]], *, step_index: int | None
) -> list[Message]:
    """Unsaved ``Message`` rows of checked chat-format ``messages`` for ``run``, at its next
    positions (``Run.message_count`` onwards), with their estimated tokens and
    ``step_index`` (the run's last step index, None before its first step)."""
    return [
        Message.from_openai(
            message,
            run=run,
            position=run.message_count + offset,
            tokens=estimate_tokens(message),
            step_index=step_index,
        )
        for offset, message in enumerate(messages)
    ]


def messages_insert_locked(
    run: Run, messages: list[dict[str, Any]], *, actor: Actor
) -> list[Message]:
    """Append checked chat-format ``messages`` to a locked run (``message_rows``), by
    ``actor``, in one INSERT; the run's ``message_count`` and ``context_tokens`` grow (the
    caller saves the run). What it costs does not depend on the conversation's length: the
    next position is the run's counter, read under its lock, not the end of a list."""
    added = message_rows(run, messages, step_index=last_step_index(run.pk))
    if run.session_id is not None:
        # Lock order: the run (held by the caller), then its session.
        session = lock_session(run.session_id)
        if session.is_open:
            first = session.message_count
            session_messages_locked(session, added, run=run)
            save_session(session)
            record_session_event(
                actor,
                session,
                "run_messages_added",
                run=str(run.pk),
                items=len(added),
                first_position=first,
            )
    insert_new(added)
    run.message_count += len(added)
    run.context_tokens += sum(message.tokens for message in added)
    return added


def run_messages_append(
    *,
    actor: Actor,
    run_id: uuid.UUID,
    messages: Any,
    usage: Any = None,
    identity: dict[str, Any] | None = None,
) -> Run:
    """Append a client's model turn to its run: ``messages`` (OpenAI chat format) go to the end
    of the conversation (``messages_insert_locked``), and ``usage`` (``parse_usage``), when
    given, is recorded as a ``ModelCall`` and added to the run's token and cost totals.
    ``identity`` (``runs.control.identity.parse_identity``) is what drove the turn: the agent
    name and version, the system prompt it was sent, the model's parameters (``model``
    defaults to the usage's); it becomes the run's (``Run.agent_name`` ...) and the model
    call's (``ModelCall.prompt``, ``parameters``). One audit event,
    ``run.messages_appended``, with the count, the first new position, their estimated
    tokens, the usage and what the identity changed. Totals that cross the run's budget fail
    it when its budget policy is to fail (``runs.executor.limits``). An active context past
    ``AGENTOPS_CONTEXT_TOKEN_THRESHOLD`` tokens is compacted after commit
    (``runs.control.compaction``).

    Raises:
        Run.DoesNotExist: unknown run.
        InvalidInput: malformed messages or usage; not a client run.
        Conflict: the run is finished, or its client already completed it.
    """
    checked = parse_messages(messages)
    reported = parse_usage(usage) if usage is not None else None
    fields = dict(identity or {})
    if reported is not None and reported.model:
        fields.setdefault("model", reported.model)
    driven_by = parse_identity(fields)
    with audited_atomic():
        run = lock_client_run(run_id, "report model turns")
        first = run.message_count
        changes = identity_apply(run, driven_by)
        added = messages_insert_locked(run, checked, actor=actor)
        if reported is not None:
            add_usage_locked(run, reported)
            insert_new(
                [
                    ModelCall(
                        run=run,
                        model=reported.model,
                        input_tokens=reported.input_tokens,
                        output_tokens=reported.output_tokens,
                        cost_usd=reported.cost_usd,
                        latency_ms=reported.latency_ms,
                        first_message=first,
                        messages=len(checked),
                        **model_call_identity(run, driven_by),
                    )
                ],
                read_keys=True,
            )
        save_run(run)
        record_event(
            actor,
            run,
            "messages_appended",
            messages=len(checked),
            first_position=first,
            tokens=sum(message.tokens for message in added),
            usage=reported.as_json() if reported is not None else None,
            **({"identity": changes} if changes else {}),
        )
        budget_stops_run_locked(run, actor)
        if context_over_threshold(run):
            compact_run_on_commit(run.pk)
    return run
