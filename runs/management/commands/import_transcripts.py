"""``manage.py import_transcripts FILE [--limit N] [--user USERNAME]``: replay recorded
conversations as transcript runs.

FILE is JSON in the τ-bench shape: a list of objects with ``traj`` (an OpenAI chat message
list) and optionally ``task_id``, ``trial`` and ``reward``; or a single message list. Each
conversation becomes one transcript run (``runs.control.create.run_create``), started at once: its
tool calls become steps, writes wait for a reviewer. A conversation that does not parse is
reported with its index and skipped; the others are still imported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentops.actors import Actor
from agentops.errors import InvalidInput
from runs.control.create import run_create

GOAL_TEXT_CHARS = 200
SHOWN_RUN_IDS = 3


def _load_conversations(path: Path) -> list[Any]:
    """The file's conversations: items of a τ-bench list, or the one message list it holds.

    Raises:
        CommandError: the file is missing, not JSON, or neither shape.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CommandError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise CommandError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, list) or not data:
        raise CommandError(
            f"{path}: expected a non-empty JSON list of conversations (objects with 'traj') "
            "or of chat messages (objects with 'role')"
        )
    first = data[0]
    if isinstance(first, dict) and "role" in first:
        return [{"traj": data}]
    return data


def _goal(conversation: dict[str, Any]) -> str:
    """The first user message, trimmed, prefixed with the task id and trial when known."""
    traj = conversation["traj"] if isinstance(conversation["traj"], list) else []
    text = next(
        (
            " ".join(m["content"].split())
            for m in traj
            if isinstance(m, dict)
            and m.get("role") == "user"
            and isinstance(m.get("content"), str)
            and m["content"].strip()
        ),
        "",
    )
    if len(text) > GOAL_TEXT_CHARS:
        text = text[: GOAL_TEXT_CHARS - 1].rstrip() + "…"
    task_id, trial = conversation.get("task_id"), conversation.get("trial")
    if task_id is None:
        return text or "Replay of a recorded conversation"
    label = f"Task {task_id}" + (f", trial {trial}" if trial is not None else "")
    return f"{label}: {text}" if text else label


class Command(BaseCommand):
    help = (
        "Create and start transcript runs from recorded conversations (τ-bench shape: a JSON "
        "list of objects with 'traj', or a single chat message list)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="JSON file of conversations")
        parser.add_argument(
            "--limit", type=int, default=None, help="import only the first N conversations"
        )
        parser.add_argument("--user", default=None, help="username recorded as the runs' requester")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        limit: int | None = options["limit"]
        if limit is not None and limit < 1:
            raise CommandError("--limit must be at least 1")
        actor = self._actor(options["user"])
        conversations = _load_conversations(path)[:limit]
        run_ids: list[str] = []
        failed = 0
        for index, conversation in enumerate(conversations):
            if not isinstance(conversation, dict) or "traj" not in conversation:
                failed += 1
                self.stderr.write(f"conversation {index}: not an object with 'traj'; skipped")
                continue
            try:
                run = run_create(
                    actor=actor,
                    agent="transcript",
                    goal=_goal(conversation),
                    transcript=conversation["traj"],
                    metadata={
                        "source": path.name,
                        "task_id": conversation.get("task_id"),
                        "trial": conversation.get("trial"),
                        "reward": conversation.get("reward"),
                    },
                )
            except InvalidInput as exc:
                failed += 1
                self.stderr.write(f"conversation {index}: {exc.message}; skipped")
                continue
            run_ids.append(str(run.pk))
            if options["verbosity"] >= 2:
                self.stdout.write(f"conversation {index}: run {run.pk}")
        shown = ", ".join(run_ids[:SHOWN_RUN_IDS])
        if len(run_ids) > SHOWN_RUN_IDS:
            shown += f", … (+{len(run_ids) - SHOWN_RUN_IDS} more)"
        self.stdout.write(
            f"imported {len(run_ids)} of {len(conversations)} conversations from {path.name}"
            f" ({failed} failed)" + (f"; runs: {shown}" if run_ids else "")
        )
        if not run_ids:
            raise CommandError(f"no conversation of {path} could be imported")

    def _actor(self, username: str | None) -> Actor:
        """The requester named by ``--user``, or the system importer.

        Raises:
            CommandError: no user with that username.
        """
        if username is None:
            return Actor.system("import")
        user_model = get_user_model()
        try:
            user = user_model.objects.get(**{user_model.USERNAME_FIELD: username})
        except user_model.DoesNotExist:
            raise CommandError(f"no user named {username!r}") from None
        return Actor.for_user(user)
