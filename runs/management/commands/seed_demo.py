"""``manage.py seed_demo``: demo users (with fresh passwords, printed) and a few demo runs."""

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

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


class Command(BaseCommand):
    help = "Create the demo operator, reviewer and admin (printing new passwords) and demo runs."

    def handle(self, *args: Any, **options: Any) -> None:
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
            self.stdout.write(f"user {username:<9} password {password}")
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
