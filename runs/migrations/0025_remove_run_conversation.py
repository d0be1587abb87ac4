"""Drop ``Run.conversation``: its messages are ``Message`` rows now (0024 moved them)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0024_conversations_to_rows'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='run',
            name='conversation',
        ),
    ]
