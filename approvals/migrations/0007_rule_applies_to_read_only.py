from django.db import migrations, models

class Migration(migrations.Migration):
    dependencies = [("approvals", "0006_decision_respond")]

    operations = [
        migrations.AddField(
            model_name="riskrule",
            name="applies_to_read_only",
            field=models.BooleanField(
                default=True,
                help_text="Also classify calls of tools that declare themselves read-only (an "
                "MCP server's readOnlyHint, or a registered tool without side effects). Untick "
                "it where you trust those hints: the tools are then low risk unless another "
                "rule says otherwise.",
            ),
        ),
    ]
