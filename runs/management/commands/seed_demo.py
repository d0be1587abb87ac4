"""``manage.py seed_demo [--credentials FILE] [--url URL]``: demo users (with fresh passwords,
printed, or written to FILE) and a few demo runs."""

import os
import secrets
import shlex
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from agentops.actors import Actor
from projects.roles import Role
from projects.services import membership_set, project_default
from runs.control.create import run_create
from runs.models import Run

DEMO_TRANSCRIPT = [
    {"role": "system", "content": "You are an airline support agent."},
    {"role": "user", "content": "Please cancel my reservation ZFA04Y, my trip is off."},
    {
        "role": "assistant",
        "content": "Let me look the reservation up first.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "get_reservation_details",
                    "arguments": '{"reservation_id": "ZFA04Y"}',
                },
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "name": "get_reservation_details",
        "content": '{"reservation_id": "ZFA04Y", "status": "confirmed", "insurance": "yes"}',
    },
    {
        "role": "assistant",
        "content": "The booking has travel insurance, so it can be cancelled with a full refund.",
        "tool_calls": [
            {
                "id": "call_2",
                "type": "function",
                "function": {
                    "name": "cancel_reservation",
                    "arguments": '{"reservation_id": "ZFA04Y"}',
                },
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call_2",
        "name": "cancel_reservation",
        "content": '{"reservation_id": "ZFA04Y", "status": "cancelled"}',
    },
    {"role": "assistant", "content": "Your reservation ZFA04Y is cancelled and refunded."},
]


# What a new shell needs to reach the same database and Redis as the demo (``scripts/start``
# sets them); a deployment's ``SECRET_KEY`` and ``AGENTOPS_AUDIT_KEY``, needed when ``DEBUG``
# is off, are secrets for its own environment, never written here.
SHELL_VARIABLES = ("DEBUG", "DATABASE_URL", "REDIS_URL")


def manage_command(*args: str) -> str:
    """The shell line that runs ``manage.py ARGS`` as this process does from a new shell in
    any directory: in the project directory, with this interpreter and this process's values
    of ``SHELL_VARIABLES`` (those it has)."""
    assignments = [
        f"{name}={shlex.quote(os.environ[name])}" for name in SHELL_VARIABLES if name in os.environ
    ]
    command = shlex.join([sys.executable, "manage.py", *args])
    return " ".join([f"cd {shlex.quote(str(settings.BASE_DIR))} &&", *assignments, command])


def write_credentials(path: Path, *, passwords: dict[str, str], url: str) -> None:
    """Write the demo's passwords (``{username: password}``), its addresses at ``url`` (e.g.
    ``http://127.0.0.1:8000``) and the line that creates an API token to ``path``, readable
    by its owner only (mode 0600, also when the file was there before).

    Raises:
        OSError: the file cannot be written.
    """
    lines = [
        f"agentops: {url}/  (admin: {url}/admin/)",
        *(f"user {name:<9} password {password}" for name, password in passwords.items()),
        "an API token of the operator (e.g. for the MCP gateway), from any shell:",
        f"  {manage_command('create_api_token', 'operator')}",
    ]
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    # os.open's mode applies to a new file only: an older one may have been readable by all.
    os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write("\n".join(lines) + "\n")


class Command(BaseCommand):
    help = "Create the demo operator, reviewer and admin (printing new passwords) and demo runs."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--credentials",
            type=Path,
            help="write the passwords, addresses and token command to this file (mode 0600) "
            "instead of printing the passwords",
        )
        parser.add_argument(
            "--url", default="http://127.0.0.1:8000", help="the site's address, for that file"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        credentials: Path | None = options["credentials"]
        passwords = {}
        users = {}
        for username, role, superuser in [
            ("operator", Role.OPERATOR, False),
            ("reviewer", Role.REVIEWER, False),
            ("admin", None, True),
        ]:
            password = secrets.token_urlsafe(12)
            user, _ = get_user_model().objects.get_or_create(
                username=username, defaults={"email": f"{username}@example.com"}
            )
            user.set_password(password)
            user.is_staff = user.is_superuser = superuser
            user.save()
            if role:
                membership_set(project=project_default(), user=user, role=role)
            users[username] = user
            passwords[username] = password
            if credentials is None:
                self.stdout.write(f"user {username:<9} password {password}")
        if credentials is not None:
            write_credentials(credentials, passwords=passwords, url=options["url"].rstrip("/"))
            self.stdout.write(f"passwords written to {credentials}")
        if Run.objects.exists():
            self.stdout.write("demo runs already exist; none added")
            return
        actor = Actor.for_user(users["operator"])
        run_create(
            actor=actor,
            agent="plan",
            goal="Add up an invoice",
            steps=[
                {
                    "tool": "calculate",
                    "args": {"expression": "129.5 + 40 * 2"},
                    "rationale": "Total of one item and two services",
                },
                {"tool": "echo", "args": {"value": "total computed"}},
            ],
        )
        run_create(
            actor=actor,
            agent="plan",
            goal="Email the customer their refund",
            steps=[
                {
                    "tool": "calculate",
                    "args": {"expression": "300 - 45"},
                    "rationale": "Refund is the fare minus the change fee",
                },
                {
                    "tool": "send_email",
                    "rationale": "The customer asked for written confirmation",
                    "args": {
                        "to": ["customer@example.com"],
                        "subject": "Your refund",
                        "body": "We refunded 255 USD to your card.",
                    },
                },
            ],
        )
        run_create(
            actor=actor,
            agent="plan",
            goal="Call a flaky service",
            steps=[
                {
                    "tool": "flaky",
                    "args": {"failures": 2},
                    "rationale": "Shows retries with backoff",
                },
            ],
        )
        run_create(
            actor=actor,
            agent="transcript",
            goal="Replay: cancel reservation ZFA04Y",
            transcript=DEMO_TRANSCRIPT,
        )
        self.stdout.write("demo runs created: 4 (two will wait for a reviewer)")
