"""``manage.py purge_retention [--dry-run] [--batch-size N]``: apply the retention policies."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentops.actors import Actor
from agentops.errors import Conflict
from runs import purges
from runs.retention import retention_purge


class Command(BaseCommand):
    help = (
        "Delete or redact finished runs past their retention policy's TTL, and audit chains "
        "past AGENTOPS_AUDIT_RETENTION_DAYS; --dry-run only counts. A real purge is recorded "
        "as a retention purge (listed in admin) and refused while another one runs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="count, change nothing")
        parser.add_argument("--batch-size", type=int, default=None, help="steps per transaction")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch_size"] is not None and options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        actor = Actor.system("retention")
        dry_run = options["dry_run"]
        if dry_run:
            report = retention_purge(actor=actor, dry_run=True)
        else:
            try:
                purge = purges.purge_start(actor=actor)
            except Conflict as exc:
                raise CommandError(str(exc)) from None
            done = purges.purge_execute(
                purge_id=purge.pk, actor=actor, batch_size=options["batch_size"]
            )
            if done is None or done.status != "succeeded":
                raise CommandError(f"purge {purge.pk} failed: {done and done.error}")
            report = {
                "runs": done.runs,
                "steps": done.steps,
                "redacted_runs": done.redacted_runs,
                "audit_events": done.audit_events,
                "batches": done.batches,
            }
        verb = "would delete" if dry_run else "deleted"
        self.stdout.write(
            f"{verb} {report['runs']} runs with {report['steps']} steps, "
            f"{'would redact' if dry_run else 'redacted'} {report['redacted_runs']} "
            f"runs, {verb} {report['audit_events']} audit events ({report['batches']} batches)"
        )
