"""A run's conversation: one row per message (``Message``) and the compactions that replace
older messages by a summary in the active context (``Compaction``); the services that write
them are in ``runs.control.conversation`` and ``runs.control.compaction``."""

from __future__ import annotations

import json
import math
from typing import Any

from django.db import models

# OpenAI's rules of thumb ("What are tokens and how to count them?", help.openai.com: a token
# is about 4 characters of English text; the cookbook's "How to count tokens with tiktoken":
# 3 tokens of framing per chat message).
CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 3


def estimate_tokens(message: dict[str, Any]) -> int:
    """The estimated size in tokens of a chat-format ``message`` (or of a summary given as
    ``{"content": text}``) in a model's context: ``TOKENS_PER_MESSAGE`` plus one per
    ``CHARS_PER_TOKEN`` characters of its keys but ``role`` written as JSON. Clients do not
    report per-message tokens; an estimate that needs no tokenizer of every model is what
    the compaction threshold is compared with."""
    body = {key: value for key, value in message.items() if key != "role"}
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return TOKENS_PER_MESSAGE + math.ceil(len(text) / CHARS_PER_TOKEN)


_JSON_COLUMNS = ("content", "tool_calls")
# The longest role the ``role`` column holds (characters).
ROLE_CHARS = 16
_TEXT_COLUMNS = ("tool_call_id", "name")


def message_columns(message: dict[str, Any]) -> dict[str, Any]:
    """The ``Message`` columns holding the chat-format ``message`` or Responses-API item:
    ``role`` when a string of 1 to ``ROLE_CHARS`` characters; ``content`` and ``tool_calls``
    unless null; ``tool_call_id`` and ``name`` when non-empty strings; ``extra``, every other
    key (and those left out above) verbatim. Also used by the migration that moved stored
    conversations into rows."""
    columns: dict[str, Any] = {"extra": {}}
    for key, value in message.items():
        if key in _JSON_COLUMNS:
            held = value is not None
        elif key in _TEXT_COLUMNS:
            held = isinstance(value, str) and value != ""
        else:
            # A Responses-API item (a function call, its output, a reasoning item) has no
            # role; a role that is no short string is kept verbatim in ``extra``.
            held = key == "role" and isinstance(value, str) and 0 < len(value) <= ROLE_CHARS
        if held:
            columns[key] = value
        else:
            columns["extra"][key] = value
    return columns


class Message(models.Model):
    """One message of a run's or a session's conversation (OpenAI chat format, or any
    Responses-API input item of the OpenAI Agents SDK), at ``position`` (0, 1, ... in the
    order appended; unique per run).

    A message of a run in a session (``Run.session``) belongs to the session too, at
    ``session_position`` (0, 1, ... in the order appended to the session; unique per
    session); a message added to a session directly (between runs) has no ``run`` and its
    ``position`` is its ``session_position``. ``removed_at`` is when a session's client took
    it out of the session's active conversation (``pop_item``, ``clear_session`` of the
    Agents SDK's ``Session`` protocol): the row is kept, the run's own conversation is not
    changed.

    ``role``, ``content`` (a string or a list of parts), ``tool_calls``, ``tool_call_id`` and
    ``name`` hold those keys; ``extra`` every other key of the message as it came, so
    ``as_openai()`` gives back the message unchanged (a key left out stays left out: a
    column that is null or blank means the key was absent; an item without a role comes
    back without one). ``tokens`` (tokens) is its size in
    the model's context as estimated when it was appended (``estimate_tokens``).
    ``step_index`` is the index of the run's last step when it was appended (null: no step
    yet), so a fork before step N keeps the messages appended before step N existed. The
    next position comes from ``Run.message_count``, taken under the run's row lock: an append
    is one INSERT whatever the conversation's length.
    """

    # No index of its own: the unique (run, position) index serves lookups by run.
    run = models.ForeignKey(
        "runs.Run",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="messages",
        db_index=False,
    )
    position = models.PositiveIntegerField()
    # No index of its own: the partial unique (session, session_position) index serves it.
    session = models.ForeignKey(
        "runs.AgentSession",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="messages",
        db_index=False,
    )
    session_position = models.PositiveIntegerField(null=True, blank=True)
    removed_at = models.DateTimeField(null=True, blank=True)
    role = models.CharField(max_length=16)
    content = models.JSONField(null=True, blank=True)
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.TextField(blank=True)
    name = models.TextField(blank=True)
    extra = models.JSONField(default=dict, blank=True)
    tokens = models.PositiveIntegerField(default=0)
    step_index = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "position"]
        # The unique index is the one every read uses: a run's messages in order, its last N
        # (``ORDER BY position DESC LIMIT N``), a range of positions.
        constraints = [
            models.UniqueConstraint(fields=["run", "position"], name="message_run_position_uniq"),
            models.UniqueConstraint(
                fields=["session", "session_position"],
                condition=models.Q(session__isnull=False),
                name="message_session_position_uniq",
            ),
            models.CheckConstraint(
                condition=models.Q(run__isnull=False)
                | models.Q(session__isnull=False, session_position__isnull=False),
                name="message_run_or_session",
            ),
        ]

    def __str__(self) -> str:
        if self.run_id is None:
            return f"message {self.session_position} ({self.role}) of session {self.session_id}"
        return f"message {self.position} ({self.role}) of run {self.run_id}"

    @classmethod
    def from_openai(cls, message: dict[str, Any], **fields: Any) -> Message:
        """An unsaved message holding the chat-format ``message`` (a dict with a ``role``);
        ``fields`` sets the others (``run``, ``position``, ``tokens``, ``step_index``)."""
        return cls(**message_columns(message), **fields)

    def as_openai(self) -> dict[str, Any]:
        """The message as it was appended (OpenAI chat format, or the Responses-API item)."""
        message: dict[str, Any] = {"role": self.role} if self.role else {}
        if self.content is not None:
            message["content"] = self.content
        if self.tool_calls is not None:
            message["tool_calls"] = self.tool_calls
        if self.tool_call_id:
            message["tool_call_id"] = self.tool_call_id
        if self.name:
            message["name"] = self.name
        message.update(self.extra)
        return message


class Compaction(models.Model):
    """Messages ``first``..``last`` (positions, inclusive) of a run, or of a session
    (session positions; ``session`` set and ``run`` empty), replaced in its active context
    by ``summary``. The messages themselves are kept.

    ``tokens_before`` and ``tokens_after`` (tokens) are the active context's size before and
    after; ``summary_tokens`` the summary's own (estimated like a message's). ``summarizer``
    is ``client`` when the client wrote the summary, else the dotted path of the server's
    summarizer (``AGENTOPS_SUMMARIZER``) and ``summarizer_version`` its ``version``.
    ``step_index`` is the run's last step index when it was made (null: no step yet), so a
    fork from before it gets the original messages back. The actor's id and name are copied
    (``actor``), as audit rows do, so the record survives the user's deletion. A compaction
    that covers earlier ones supersedes them (``runs.context_selectors.active_context``).
    ``removed_at`` is when a session's client took its summary (and the messages it stands
    for) out of the session's active conversation (``runs.control.sessions``).
    """

    run = models.ForeignKey(
        "runs.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="compactions"
    )
    session = models.ForeignKey(
        "runs.AgentSession",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="compactions",
    )
    first = models.PositiveIntegerField()
    last = models.PositiveIntegerField()
    summary = models.TextField()
    summary_tokens = models.PositiveIntegerField(default=0)
    tokens_before = models.PositiveBigIntegerField(default=0)
    tokens_after = models.PositiveBigIntegerField(default=0)
    summarizer = models.CharField(max_length=200)
    summarizer_version = models.CharField(max_length=50, blank=True)
    step_index = models.PositiveIntegerField(null=True, blank=True)
    actor = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    removed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(run__isnull=False, session__isnull=True)
                | models.Q(run__isnull=True, session__isnull=False),
                name="compaction_run_xor_session",
            )
        ]

    def __str__(self) -> str:
        owner = f"run {self.run_id}" if self.run_id else f"session {self.session_id}"
        return f"compaction {self.first}..{self.last} of {owner}"
