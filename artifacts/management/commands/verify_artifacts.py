"""``manage.py verify_artifacts``: read every artifact's file and report the missing and the
altered (size or SHA-256 not the recorded ones); exit status 1 when any is found."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from artifacts.models import Artifact
from artifacts.selectors import artifact_findings


class Command(BaseCommand):
    help = "Check every artifact's file against its recorded size and SHA-256."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", help="only the artifacts of this project (slug)")
        parser.add_argument("--run", help="only the artifacts of this run (id)")

    def handle(self, *args: Any, **options: Any) -> None:
        artifacts = Artifact.objects.all()
        if options["project"]:
            artifacts = artifacts.filter(project__slug=options["project"])
        if options["run"]:
            artifacts = artifacts.filter(run_id=options["run"])
        found = 0
        for finding in artifact_findings(artifacts):
            found += 1
            artifact = finding.artifact
            self.stdout.write(
                f"{finding.problem.upper()} {artifact.pk} run {artifact.run_id} "
                f"{artifact.name!r} ({artifact.storage_name}): {finding.detail}"
            )
        checked = artifacts.count()
        if found:
            raise CommandError(f"{found} of {checked} artifacts are missing or altered")
        self.stdout.write(f"{checked} artifacts verified")
