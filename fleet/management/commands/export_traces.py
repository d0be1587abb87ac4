"""``manage.py export_traces RUN_ID [RUN_ID ...]``: export runs' traces to the OTLP collector
OpenTelemetry's environment variables name (``fleet.traces.run_trace_export``), now, in this
process: for a run whose export was dropped (the broker was down when it ended) or gave up
(the collector was down past the retry window). The same ids make a repeat harmless. Exits
non-zero when a run is unknown or the collector did not take its spans."""

from __future__ import annotations

import uuid

from django.core.management.base import BaseCommand, CommandError, CommandParser

from fleet.traces import ExportFailed, run_trace_export


class Command(BaseCommand):
    help = "Export runs' traces to the OTLP collector (OTEL_EXPORTER_OTLP_ENDPOINT)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_ids", nargs="+", type=uuid.UUID, metavar="RUN_ID")

    def handle(self, *args: object, run_ids: list[uuid.UUID], **options: object) -> None:
        problems = []
        for run_id in run_ids:
            try:
                sent = run_trace_export(run_id=run_id)
            except ExportFailed as exc:
                problems.append(str(exc))
                continue
            if sent == 0:
                problems.append(f"no run {run_id}")
            else:
                self.stdout.write(f"run {run_id}: {sent} spans exported")
        if problems:
            raise CommandError("; ".join(problems))
