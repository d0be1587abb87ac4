"""A run's conversation as rows: ``Message`` and ``Compaction``, and the run's counters
(0024 moves the stored lists into rows, 0025 drops ``Run.conversation``)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0022_state_versions'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='context_tokens',
            field=models.PositiveBigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='run',
            name='message_count',
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.CreateModel(
            name='Compaction',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('first', models.PositiveIntegerField()),
                ('last', models.PositiveIntegerField()),
                ('summary', models.TextField()),
                ('summary_tokens', models.PositiveIntegerField(default=0)),
                ('tokens_before', models.PositiveBigIntegerField(default=0)),
                ('tokens_after', models.PositiveBigIntegerField(default=0)),
                ('summarizer', models.CharField(max_length=200)),
                ('summarizer_version', models.CharField(blank=True, max_length=50)),
                ('step_index', models.PositiveIntegerField(blank=True, null=True)),
                ('actor', models.CharField(blank=True, max_length=200)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='compactions', to='runs.run')),
            ],
            options={
                'ordering': ['run', 'id'],
            },
        ),
        migrations.CreateModel(
            name='Message',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('position', models.PositiveIntegerField()),
                ('role', models.CharField(max_length=16)),
                ('content', models.JSONField(blank=True, null=True)),
                ('tool_calls', models.JSONField(blank=True, null=True)),
                ('tool_call_id', models.TextField(blank=True)),
                ('name', models.TextField(blank=True)),
                ('extra', models.JSONField(blank=True, default=dict)),
                ('tokens', models.PositiveIntegerField(default=0)),
                ('step_index', models.PositiveIntegerField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('run', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='messages', to='runs.run')),
            ],
            options={
                'ordering': ['run', 'position'],
                'constraints': [models.UniqueConstraint(fields=('run', 'position'), name='message_run_position_uniq')],
            },
        ),
    ]
