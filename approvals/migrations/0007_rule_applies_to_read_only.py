from django.db import migrations, models

# The seeded name patterns for writes (approvals.risk.HIGH_PATTERNS when they were seeded),
# which guess at a tool's risk from its name: they no longer classify a tool that declares
# itself read-only. A seeded rule an admin has since changed (another risk) is left as it is.
SEEDED_WRITE_PATTERNS = [
    "book_*",
    "cancel_*",
    "update_*",
    "send_*",
    "delete_*",
    "create_*",
    "modify_*",
    "transfer_*",
    "return_*",
    "exchange_*",
]


def seeded_rules_skip_read_only(apps, schema_editor):
    RiskRule = apps.get_model("approvals", "RiskRule")
    RiskRule.objects.filter(
        pattern__in=SEEDED_WRITE_PATTERNS, risk="high", condition=""
    ).update(applies_to_read_only=False)


class Migration(migrations.Migration):
    dependencies = [("approvals", "0006_decision_respond")]

    operations = [
        migrations.AddField(
            model_name="riskrule",
            name="applies_to_read_only",
            field=models.BooleanField(
                default=True,
                help_text="Also classify calls of tools that declare themselves read-only (an "
                "MCP server's readOnlyHint, or a registered tool without side effects). The "
                "seeded name patterns for writes do not: a read-only tool is low risk unless "
                "a rule says otherwise.",
            ),
        ),
        migrations.RunPython(seeded_rules_skip_read_only, migrations.RunPython.noop),
    ]
