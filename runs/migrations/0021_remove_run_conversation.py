"""Drop ``Run.conversation``: its messages are ``Message`` rows now (0020 moved them)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0020_messages_and_compactions'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='run',
            name='conversation',
        ),
    ]
