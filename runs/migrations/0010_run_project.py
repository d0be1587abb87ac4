"""Every run belongs to a project: the existing ones to ``default`` (projects 0002)."""

import django.db.models.deletion
from django.db import migrations, models

import projects.models


def to_default(apps, schema_editor):
    Project = apps.get_model("projects", "Project")
    project, _ = Project.objects.get_or_create(slug="default", defaults={"name": "Default"})
    apps.get_model("runs", "Run").objects.filter(project__isnull=True).update(project=project)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0009_step_requested_by"),
        ("projects", "0002_default_project"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="project",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="runs",
                to="projects.project",
                help_text="Who may see and act on the run: the project's members (projects.access).",
            ),
        ),
        migrations.RunPython(to_default, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="run",
            name="project",
            field=models.ForeignKey(
                default=projects.models.default_project_id,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="runs",
                to="projects.project",
                help_text="Who may see and act on the run: the project's members (projects.access).",
            ),
        ),
    ]
