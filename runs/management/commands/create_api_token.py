"""``manage.py create_api_token USERNAME``: print the user's API token, creating it if missing."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rest_framework.authtoken.models import Token


class Command(BaseCommand):
    help = (
        "Print USERNAME's API token (creating it if missing), for the header "
        "'Authorization: Token <key>'."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        user_model = get_user_model()
        try:
            user = user_model.objects.get_by_natural_key(username)
        except user_model.DoesNotExist:
            raise CommandError(f"no user named {username!r}") from None
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(token.key)
