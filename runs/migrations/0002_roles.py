from django.contrib.auth.management import create_permissions
from django.db import migrations


def create_roles(apps, schema_editor):
    from agentops.roles import ensure_roles

    # Permissions are normally created after all migrations ran; the groups need them now.
    for label in ("runs", "approvals", "audit"):
        config = apps.get_app_config(label)
        config.models_module = True
        create_permissions(config, apps=apps, verbosity=0)
        config.models_module = None
    ensure_roles(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0001_initial"),
        ("approvals", "0001_initial"),
        ("audit", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_roles, migrations.RunPython.noop)]
