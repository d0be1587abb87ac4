"""A run's conversation becomes rows: each message of every stored ``Run.conversation`` list
becomes a ``Message`` at its position (tokens estimated) and the run's ``message_count`` and
``context_tokens`` are set. Going back rebuilds the lists. Its own migration (its own
transaction): PostgreSQL alters no table with row changes pending in the same one."""

from django.db import migrations

from runs.models.conversation import estimate_tokens, message_columns

BATCH = 500


def conversations_to_rows(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    Message = apps.get_model("runs", "Message")
    stored = Run.objects.exclude(conversation=[]).only("id", "conversation")
    for run in stored.iterator(chunk_size=BATCH):
        stored_list = run.conversation if isinstance(run.conversation, list) else []
        messages = [m for m in stored_list if isinstance(m, dict)]
        rows = [
            Message(
                run_id=run.pk,
                position=position,
                tokens=estimate_tokens(message),
                **message_columns({"role": "", **message}),
            )
            for position, message in enumerate(messages)
        ]
        Message.objects.bulk_create(rows, batch_size=BATCH)
        Run.objects.filter(pk=run.pk).update(
            message_count=len(rows), context_tokens=sum(row.tokens for row in rows)
        )


def rows_to_conversations(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    Message = apps.get_model("runs", "Message")
    for run_id in Message.objects.values_list("run_id", flat=True).distinct().iterator():
        conversation = []
        for row in Message.objects.filter(run_id=run_id).order_by("position"):
            message = {"role": row.role}
            if row.content is not None:
                message["content"] = row.content
            if row.tool_calls is not None:
                message["tool_calls"] = row.tool_calls
            if row.tool_call_id:
                message["tool_call_id"] = row.tool_call_id
            if row.name:
                message["name"] = row.name
            message.update(row.extra)
            conversation.append(message)
        Run.objects.filter(pk=run_id).update(conversation=conversation)




class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0023_messages_and_compactions'),
    ]

    operations = [migrations.RunPython(conversations_to_rows, rows_to_conversations)]
