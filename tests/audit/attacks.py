"""What an attacker with direct database access does to the audit log, and the verifier."""

from __future__ import annotations

from io import StringIO
from typing import Any

from django.core.management import CommandError, call_command
from django.db import connection, transaction


def tamper(sql: str, params: list[Any]) -> None:
    """Run ``sql`` with triggers off, as the tables' owner or a superuser with direct
    database access could."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute(sql, params)


def verify_audit(*args: str) -> str:
    """``manage.py verify_audit`` with ``args``; returns its output (raises ``CommandError``
    when a chain is broken)."""
    out = StringIO()
    call_command("verify_audit", *args, stdout=out)
    return out.getvalue()


def verify_output(*args: str) -> tuple[bool, str]:
    """``manage.py verify_audit`` with ``args``: (whether it failed, what it printed)."""
    out = StringIO()
    try:
        call_command("verify_audit", *args, stdout=out)
    except CommandError:
        return True, out.getvalue()
    return False, out.getvalue()
