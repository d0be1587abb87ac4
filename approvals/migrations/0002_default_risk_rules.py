from django.db import migrations


def seed(apps, schema_editor):
    from approvals.risk import default_rules

    RiskRule = apps.get_model("approvals", "RiskRule")
    for rule in default_rules():
        RiskRule.objects.get_or_create(pattern=rule["pattern"], defaults=rule)


class Migration(migrations.Migration):
    dependencies = [("approvals", "0001_initial")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
