"""The ``default`` project, and the two global role groups turned into its memberships.

Members of the ``operators`` group become operators of the default project, members of
``reviewers`` reviewers, members of both admins; the groups are then deleted, so no global
permission outlives the move. Plain-text DRF tokens (``authtoken_token``, from before hashed
tokens) are dropped: their holders need new tokens (``manage.py create_api_token``).
"""

from django.db import migrations

GROUP_ROLES = {"operators": "operator", "reviewers": "reviewer"}


def forwards(apps, schema_editor):
    Project = apps.get_model("projects", "Project")
    Membership = apps.get_model("projects", "Membership")
    Group = apps.get_model("auth", "Group")
    project, _ = Project.objects.get_or_create(slug="default", defaults={"name": "Default"})
    roles: dict[int, set[str]] = {}
    for group in Group.objects.filter(name__in=GROUP_ROLES):
        for user_id in group.user_set.values_list("pk", flat=True):
            roles.setdefault(user_id, set()).add(GROUP_ROLES[group.name])
    for user_id, held in roles.items():
        role = held.pop() if len(held) == 1 else "admin"
        Membership.objects.get_or_create(project=project, user_id=user_id, defaults={"role": role})
    Group.objects.filter(name__in=GROUP_ROLES).delete()
    schema_editor.execute("DROP TABLE IF EXISTS authtoken_token")


class Migration(migrations.Migration):
    dependencies = [
        ("projects", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("runs", "0002_roles"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
