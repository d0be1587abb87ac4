# The column goes in a migration of its own: on PostgreSQL, the rows 0003 updated leave
# deferred foreign-key checks pending, and a table with pending checks cannot be altered in the
# same transaction.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0003_gates'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='approvalrequest',
            name='required_approvals',
        ),
    ]
