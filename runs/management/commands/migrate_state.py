"""``manage.py migrate_state SCHEMA [--project SLUG] [--to VERSION] [--batch-size N]
[--dry-run]``: upgrade the stored agent states of the runs on a state schema."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentops.actors import Actor
from agentops.errors import InvalidInput
from projects.models import Project
from runs.control.state_schemas import MigrationBatch, state_migrate, state_migrate_preview
from runs.models import StateSchema


class Command(BaseCommand):
    help = (
        "Upgrade the current agent state of every run on state schema SCHEMA whose state is "
        "stored under an older version to --to (default: the newest), --batch-size runs a "
        "transaction, each run a new state version and an audit event. Safe to run again "
        "after a crash: runs already upgraded are skipped. --dry-run counts the runs per "
        "schema version and shows one run's changes, writing nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("schema", help="the state schema's name")
        parser.add_argument("--project", help="the project's slug (default: every project)")
        parser.add_argument("--to", type=int, default=None, help="the target version")
        parser.add_argument("--batch-size", type=int, default=100, help="runs per transaction")
        parser.add_argument("--dry-run", action="store_true", help="count and show, write nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["schema"]
        projects = Project.objects.filter(state_schemas__name=name).distinct().order_by("slug")
        if options["project"]:
            projects = projects.filter(slug=options["project"])
        if not projects:
            raise CommandError(f"no project has a state schema {name!r}")
        failures = 0
        for project in projects:
            try:
                if options["dry_run"]:
                    self._preview(project, name, options["to"])
                else:
                    failures += self._migrate(project, name, options["to"], options["batch_size"])
            except InvalidInput as exc:
                raise CommandError(f"{project.slug}: {exc}") from None
        if failures:
            raise CommandError(f"{failures} runs could not be migrated (listed above)")

    def _preview(self, project: Project, name: str, to: int | None) -> None:
        preview = state_migrate_preview(project_id=project.pk, name=name, to_version=to)
        counts = ", ".join(f"v{v}: {n}" for v, n in preview.runs_by_version.items()) or "none"
        self.stdout.write(
            f"{project.slug}: schema {name} -> v{preview.to_version}; runs by the schema "
            f"version of their current state: {counts} (dry run: nothing written)"
        )
        if preview.sample_run is None:
            return
        self.stdout.write(f"sample run {preview.sample_run}:")
        if preview.sample_failure:
            self.stdout.write(f"  would fail: {preview.sample_failure}")
        for change in preview.sample_changes:
            self.stdout.write(
                f"  {change.kind} {change.path}: {change.before!r} -> {change.after!r}"
            )

    def _migrate(self, project: Project, name: str, to: int | None, batch_size: int) -> int:
        def report(batch: MigrationBatch) -> None:
            self.stdout.write(f"{project.slug}: batch: {len(batch.migrated)} runs migrated")
            for run_id, why in batch.failed.items():
                self.stdout.write(f"{project.slug}: run {run_id} not migrated: {why}")

        migrated, failed = state_migrate(
            project_id=project.pk,
            name=name,
            to_version=to,
            batch_size=batch_size,
            actor=Actor.system("migrate_state"),
            on_batch=report,
        )
        newest = StateSchema.objects.filter(project=project, name=name).order_by("-version")
        target = to or newest.values_list("version", flat=True).first()
        self.stdout.write(f"{project.slug}: {migrated} runs migrated to {name} v{target}")
        return len(failed)
