"""What drives a run, as its client reports it (issue 36, part 1): the agent's name and
version, the system prompt (kept once per distinct text, ``SystemPrompt``) with the name and
version label the client gives it, the model and its parameters. Reported when the run is
created (``runs.control.create.run_create``) or with a model turn
(``runs.control.conversation.run_messages_append``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentops.errors import InvalidInput
from runs.models import Run, SystemPrompt
from runs.models.prompts import MAX_NAME, MAX_PROMPT_CHARS, MAX_VERSION, prompt_digest

# The keys of a report, as the API takes them (top level of a run's creation or a turn).
IDENTITY_KEYS = ("agent_name", "agent_version", "prompt", "model", "model_parameters")
PROMPT_KEYS = {"content", "name", "version"}
# The largest ``model_parameters`` kept: its compact JSON, in characters.
MAX_PARAMETERS_JSON = 4096


@dataclass(frozen=True)
class PromptReport:
    """A system prompt as reported: its ``content`` and the client's ``name`` and
    ``version`` label (empty: none given)."""

    content: str
    name: str = ""
    version: str = ""


@dataclass(frozen=True)
class Identity:
    """A checked report (``parse_identity``); None: not reported (the run keeps its own)."""

    agent_name: str | None = None
    agent_version: str | None = None
    prompt: PromptReport | None = None
    model: str | None = None
    model_parameters: dict[str, Any] | None = None


def _text(raw: Any, field: str, limit: int, *, empty: bool = False) -> str:
    if (
        not isinstance(raw, str)
        or len(raw) > limit
        or (not empty and not raw.strip())
        or "\x00" in raw
    ):
        raise InvalidInput(
            f"{field} must be a string of {0 if empty else 1} to {limit} characters, without NUL",
            field=field,
        )
    return raw


def _prompt(raw: Any) -> PromptReport:
    if not isinstance(raw, dict) or set(raw) - PROMPT_KEYS or "content" not in raw:
        raise InvalidInput(
            'prompt must be {"content": ..., "name": ..., "version": ...} (name and version '
            "optional)",
            field="prompt",
        )
    return PromptReport(
        content=_text(raw["content"], "prompt.content", MAX_PROMPT_CHARS),
        name=_text(raw.get("name", ""), "prompt.name", MAX_NAME, empty=True),
        version=_text(raw.get("version", ""), "prompt.version", MAX_VERSION, empty=True),
    )


def _parameters(raw: Any) -> dict[str, Any]:
    try:
        text = json.dumps(raw, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):
        text = ""
    if not isinstance(raw, dict) or not text or len(text) > MAX_PARAMETERS_JSON:
        raise InvalidInput(
            f"model_parameters must be a JSON object of at most {MAX_PARAMETERS_JSON} "
            "characters (finite numbers)",
            field="model_parameters",
        )
    if "\\u0000" in text:
        raise InvalidInput("model_parameters must not hold NUL", field="model_parameters")
    return raw


def parse_identity(fields: dict[str, Any]) -> Identity:
    """Check the ``IDENTITY_KEYS`` present in ``fields``: ``agent_name`` (1-200 characters),
    ``agent_version`` (1-100), ``prompt`` (``{"content": 1-200,000 characters, "name":
    0-200, "version": 0-100}``), ``model`` (1-200), ``model_parameters`` (a JSON object, at
    most ``MAX_PARAMETERS_JSON`` characters); no text may hold NUL (PostgreSQL refuses it).

    Raises:
        InvalidInput: a value not of that shape, naming its field.
    """
    return Identity(
        agent_name=(
            _text(fields["agent_name"], "agent_name", MAX_NAME) if "agent_name" in fields else None
        ),
        agent_version=(
            _text(fields["agent_version"], "agent_version", MAX_VERSION)
            if "agent_version" in fields
            else None
        ),
        prompt=_prompt(fields["prompt"]) if "prompt" in fields else None,
        model=_text(fields["model"], "model", 200) if "model" in fields else None,
        model_parameters=(
            _parameters(fields["model_parameters"]) if "model_parameters" in fields else None
        ),
    )


def system_prompt(project_id: int, content: str) -> SystemPrompt:
    """The project's ``SystemPrompt`` of ``content``, inserted when it is new. Two requests
    inserting the same text at once both get the one row (``ON CONFLICT DO NOTHING`` on the
    unique project and digest, then a read)."""
    digest = prompt_digest(content)
    SystemPrompt.objects.bulk_create(
        [SystemPrompt(project_id=project_id, sha256=digest, content=content)],
        ignore_conflicts=True,
    )
    return SystemPrompt.objects.get(project_id=project_id, sha256=digest)


def identity_apply(run: Run, identity: Identity) -> dict[str, Any]:
    """Set what ``identity`` reports on ``run`` (locked, or not inserted yet; the caller saves
    it). Returns what changed, for the audit event: field → new value (the prompt as
    ``{"sha256", "name", "version"}``)."""
    changes: dict[str, Any] = {}
    if identity.prompt is not None:
        # Every run names its project before it is inserted (runs.control.create).
        assert run.project_id is not None
        prompt = system_prompt(run.project_id, identity.prompt.content)
        reported = (prompt.pk, identity.prompt.name, identity.prompt.version)
        if (run.prompt_id, run.prompt_name, run.prompt_version) != reported:
            run.prompt = prompt
            run.prompt_name, run.prompt_version = identity.prompt.name, identity.prompt.version
            changes["prompt"] = {
                "sha256": prompt.sha256,
                "name": identity.prompt.name,
                "version": identity.prompt.version,
            }
    values = {
        "agent_name": identity.agent_name,
        "agent_version": identity.agent_version,
        "model": identity.model,
        "model_parameters": identity.model_parameters,
    }
    for name, value in values.items():
        if value is not None and getattr(run, name) != value:
            setattr(run, name, value)
            changes[name] = value
    return changes


def model_call_identity(run: Run, identity: Identity) -> dict[str, Any]:
    """The ``prompt`` and ``parameters`` of a ``ModelCall`` of ``run`` made now: what the turn
    reported, else what the run holds (``identity_apply`` already applied)."""
    return {
        "prompt_id": run.prompt_id,
        "parameters": (
            identity.model_parameters
            if identity.model_parameters is not None
            else run.model_parameters
        ),
    }


__all__ = [
    "IDENTITY_KEYS",
    "Identity",
    "PromptReport",
    "identity_apply",
    "model_call_identity",
    "parse_identity",
    "system_prompt",
]
