from django.db import migrations


def seed(apps, schema_editor):
    from approvals.risk import default_rules

    RiskRule = apps.get_model("approvals", "RiskRule")
    # The fields the rule had at this migration (later ones set theirs in their own).
    known = {field.name for field in RiskRule._meta.get_fields()}
    for rule in default_rules():
        kept = {name: value for name, value in rule.items() if name in known}
        RiskRule.objects.get_or_create(pattern=rule["pattern"], defaults=kept)


class Migration(migrations.Migration):
    dependencies = [("approvals", "0001_initial")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
