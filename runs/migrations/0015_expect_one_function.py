"""``agentops_expect_one(changed, check)``: the check of a guarded write in a pipelined batch
(``agentops.pipeline``). It fails the statement (SQLSTATE ``AO001``, the check's number in the
error's detail) when the write changed no row or several, so the transaction cannot commit it
even when its COMMIT is already on the wire. PostgreSQL only: SQLite runs each write at once
and checks its row count."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION agentops_expect_one(changed bigint, check_number integer)
RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    IF changed <> 1 THEN
        RAISE EXCEPTION USING
            MESSAGE = 'guarded write changed ' || changed || ' rows, not 1',
            ERRCODE = 'AO001',
            DETAIL = check_number::text;
    END IF;
    RETURN changed;
END
$$
"""

DROP = "DROP FUNCTION IF EXISTS agentops_expect_one(bigint, integer)"


def create(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("runs", "0014_step_tool_error")]

    operations = [migrations.RunPython(create, drop)]
