"""``manage.py purge_retention [--dry-run] [--batch-size N]``: apply the retention policies."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentops.actors import Actor
from runs.retention import retention_purge


class Command(BaseCommand):
    help = (
        "Delete or redact finished runs past their retention policy's TTL, and audit chains "
        "past AGENTOPS_AUDIT_RETENTION_DAYS; --dry-run only counts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="count, change nothing")
        parser.add_argument("--batch-size", type=int, default=None, help="steps per transaction")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch_size"] is not None and options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        report = retention_purge(
            actor=Actor.system("retention"),
            dry_run=options["dry_run"],
            batch_size=options["batch_size"],
        )
        verb = "would delete" if options["dry_run"] else "deleted"
        self.stdout.write(
            f"{verb} {report['runs']} runs with {report['steps']} steps, "
            f"{'would redact' if options['dry_run'] else 'redacted'} {report['redacted_runs']} "
            f"runs, {verb} {report['audit_events']} audit events "
            f"({report['batches']} batches, longest {report['longest_batch_ms']:.0f} ms, "
            f"{report['seconds']:.2f} s)"
        )
