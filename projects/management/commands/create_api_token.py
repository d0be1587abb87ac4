"""``manage.py create_api_token USERNAME [--project SLUG] [--name NAME] [--ttl SECONDS]``:
create an API token and print it (once: only its digest is stored)."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentops.errors import InvalidInput
from projects.models import DEFAULT_PROJECT_SLUG, Project
from projects.services import token_create


class Command(BaseCommand):
    help = (
        "Create an API token of USERNAME confined to a project and print it, for the header "
        "'Authorization: Token <token>'. It is not stored and cannot be shown again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--project", default=DEFAULT_PROJECT_SLUG, help="project slug")
        parser.add_argument("--name", default="", help="what the token is for")
        parser.add_argument(
            "--ttl",
            type=int,
            default=None,
            help="seconds until it expires (default: AGENTOPS_TOKEN_TTL_SECONDS)",
        )

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        user_model = get_user_model()
        try:
            user = user_model.objects.get_by_natural_key(username)
        except user_model.DoesNotExist:
            raise CommandError(f"no user named {username!r}") from None
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        try:
            _, text = token_create(
                user=user, project=project, name=options["name"], ttl_seconds=options["ttl"]
            )
        except InvalidInput as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(text)
