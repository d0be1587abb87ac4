"""``manage.py verify_audit [--run UUID]``: verify the audit log's hash chains and signed heads.

Prints one line per problem (``BROKEN <chain>: ...``: a rewritten or deleted event, the newest
events or a whole chain deleted, events without a head, a forged head) and a total; exits
non-zero when any chain is broken, so it can run from cron or CI.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.selectors import audit_verify


class Command(BaseCommand):
    help = "Verify the hash chains and chain heads of the audit log (all, or one run's)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--run", default=None, help="verify only this run's chain (UUID)")

    def handle(self, *args: Any, **options: Any) -> None:
        run_id = None
        if options["run"] is not None:
            try:
                run_id = uuid.UUID(options["run"])
            except ValueError:
                raise CommandError(f"--run: {options['run']!r} is not a UUID") from None
        reports = audit_verify(run_id=run_id)
        if run_id is not None and reports[0].ok and not reports[0].events:
            purged = " (purged by retention)" if reports[0].purged else ""
            raise CommandError(f"no audit events for run {run_id}{purged}")
        broken = [report for report in reports if not report.ok]
        for report in broken:
            at = f" at event {report.broken_at}:" if report.broken_at is not None else ""
            self.stdout.write(f"BROKEN {report.chain}:{at} {report.reason}")
        events = sum(report.events for report in reports)
        self.stdout.write(
            f"verified {len(reports)} chains ({events} events checked): {len(broken)} broken"
        )
        if broken:
            raise CommandError(f"{len(broken)} of {len(reports)} audit chains are broken")
