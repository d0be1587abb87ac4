"""``manage.py verify_audit [--run UUID]``: recompute the audit log's hash chains.

Prints one line per broken chain (its first bad event and why) and a total; exits non-zero
when any chain is broken, so it can run from cron or CI.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.selectors import chain_verify, chains


class Command(BaseCommand):
    help = "Verify the hash chains of the audit log (all of them, or one run's)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--run", default=None, help="verify only this run's chain (UUID)")

    def handle(self, *args: Any, **options: Any) -> None:
        run_id = None
        if options["run"] is not None:
            try:
                run_id = uuid.UUID(options["run"])
            except ValueError:
                raise CommandError(f"--run: {options['run']!r} is not a UUID") from None
        reports = [chain_verify(chain) for chain in chains(run_id=run_id)]
        if run_id is not None and not reports[0].events:
            raise CommandError(f"no audit events for run {run_id}")
        broken = [report for report in reports if not report.ok]
        for report in broken:
            self.stdout.write(
                f"BROKEN {report.chain}: at event {report.broken_at}: {report.reason}"
            )
        events = sum(report.events for report in reports)
        self.stdout.write(
            f"verified {len(reports)} chains ({events} events checked): {len(broken)} broken"
        )
        if broken:
            raise CommandError(f"{len(broken)} of {len(reports)} audit chains are broken")
