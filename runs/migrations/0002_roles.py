"""The two global role groups of the first releases (since replaced by project memberships:
projects 0002 moves their members into the default project and deletes them). Frozen here as
they were, so a fresh database migrates through the same history."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

ROLE_PERMISSIONS = {
    "operators": [
        ("runs", "add_run"),
        ("runs", "view_run"),
        ("runs", "cancel_run"),
        ("runs", "resume_run"),
        ("runs", "drive_run"),
        ("runs", "view_step"),
        ("approvals", "view_approvalrequest"),
        ("audit", "view_auditevent"),
    ],
    "reviewers": [
        ("runs", "view_run"),
        ("runs", "view_step"),
        ("approvals", "view_approvalrequest"),
        ("approvals", "decide_approvalrequest"),
        ("audit", "view_auditevent"),
    ],
}


def create_roles(apps, schema_editor):
    # Permissions are normally created after all migrations ran; the groups need them now.
    for label in ("runs", "approvals", "audit"):
        config = apps.get_app_config(label)
        config.models_module = True
        create_permissions(config, apps=apps, verbosity=0)
        config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, perms in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set(
            [
                Permission.objects.get(content_type__app_label=app, codename=codename)
                for app, codename in perms
            ]
        )


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0001_initial"),
        ("approvals", "0001_initial"),
        ("audit", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_roles, migrations.RunPython.noop)]
