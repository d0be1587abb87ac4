"""Only the retention role may delete audit rows; nobody may truncate them; heads only move
forward.

- The role ``agentops_retention`` (NOLOGIN) is created when missing and the migrating role may
  create roles; it gets SELECT and DELETE on the audit tables, and the migrating role (the
  application's) becomes a member so retention can ``SET LOCAL ROLE`` to it. Where the
  migrating role may not, a DBA must run the statements that the warning prints.
- The purge flag ``agentops.audit_purge`` (which any role may set) is honoured only when the
  current role is a member of ``agentops_retention``.
- TRUNCATE of ``audit_auditevent`` and ``audit_auditchainhead`` is refused by statement-level
  triggers, under the same exception.
- ``audit_auditchainhead``: UPDATE only moving a head forward (more events and a later last
  event: what the writer's upsert does), DELETE only for retention.

The trigger functions pin their ``search_path``: a role calling them cannot shadow the
functions and operators they use with its own. A table owner or superuser can still disable
triggers: the keyed hashes and signed heads are the defence there.
"""

import logging

from django.db import DatabaseError, migrations, transaction

log = logging.getLogger(__name__)

ROLE = "agentops_retention"
TABLES = "audit_auditevent, audit_auditchainhead"

PURGE_ALLOWED = f"""
    current_setting('agentops.audit_purge', true) = 'on'
    AND EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}')
    AND pg_has_role(current_user, '{ROLE}', 'MEMBER')
"""

CREATE = f"""
CREATE OR REPLACE FUNCTION audit_auditevent_append_only() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'TRUNCATE') AND {PURGE_ALLOWED} THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION USING
        MESSAGE = 'audit events are append-only: ' || TG_OP || ' refused',
        ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER audit_auditevent_no_truncate
    BEFORE TRUNCATE ON audit_auditevent
    FOR EACH STATEMENT EXECUTE FUNCTION audit_auditevent_append_only();

CREATE OR REPLACE FUNCTION audit_auditchainhead_forward_only() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'TRUNCATE') AND {PURGE_ALLOWED} THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION USING
        MESSAGE = 'audit chain heads only move forward: ' || TG_OP || ' refused',
        ERRCODE = 'insufficient_privilege';
END;
$$;

-- The writer's upsert moves a head forward in every audited transaction: the WHEN clause lets
-- it through without calling the function, which then only refuses.
CREATE TRIGGER audit_auditchainhead_forward_only
    BEFORE UPDATE ON audit_auditchainhead
    FOR EACH ROW
    WHEN (NOT (NEW.chain = OLD.chain AND NEW.events > OLD.events
               AND NEW.last_event_id > OLD.last_event_id))
    EXECUTE FUNCTION audit_auditchainhead_forward_only();

CREATE TRIGGER audit_auditchainhead_purge_only
    BEFORE DELETE ON audit_auditchainhead
    FOR EACH ROW EXECUTE FUNCTION audit_auditchainhead_forward_only();

CREATE TRIGGER audit_auditchainhead_no_truncate
    BEFORE TRUNCATE ON audit_auditchainhead
    FOR EACH STATEMENT EXECUTE FUNCTION audit_auditchainhead_forward_only();
"""

DROP = """
DROP TRIGGER IF EXISTS audit_auditchainhead_no_truncate ON audit_auditchainhead;
DROP TRIGGER IF EXISTS audit_auditchainhead_purge_only ON audit_auditchainhead;
DROP TRIGGER IF EXISTS audit_auditchainhead_forward_only ON audit_auditchainhead;
DROP FUNCTION IF EXISTS audit_auditchainhead_forward_only();
DROP TRIGGER IF EXISTS audit_auditevent_no_truncate ON audit_auditevent;
CREATE OR REPLACE FUNCTION audit_auditevent_append_only() RETURNS trigger AS $$
BEGIN
    IF current_setting('agentops.audit_purge', true) = 'on' AND TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION USING
        MESSAGE = 'audit events are append-only: ' || TG_OP || ' refused',
        ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""


def _retention_role(connection):
    """Create the role, grant it the audit tables and make the migrating role a member, as far
    as the migrating role may; warn with what a DBA must run for the rest."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT rolsuper OR rolcreaterole, current_user FROM pg_roles "
            "WHERE rolname = current_user"
        )
        may_create, me = cursor.fetchone()
        cursor.execute("SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = %s)", [ROLE])
        exists = cursor.fetchone()[0]
        if not exists and may_create:
            cursor.execute(f"CREATE ROLE {ROLE} NOLOGIN")
            exists = True
        if exists:
            cursor.execute(f"GRANT SELECT, DELETE ON {TABLES} TO {ROLE}")
            cursor.execute("SELECT pg_has_role(current_user, %s, 'MEMBER')", [ROLE])
            member = cursor.fetchone()[0]
            if not member and may_create:
                try:
                    with transaction.atomic(using=connection.alias):
                        cursor.execute(f"GRANT {ROLE} TO {connection.ops.quote_name(me)}")
                    member = True
                except DatabaseError:  # no ADMIN OPTION on a role that a DBA created
                    member = False
            if member:
                return
    log.warning(
        "audit retention cannot purge until a DBA runs: CREATE ROLE %s NOLOGIN; "
        'GRANT SELECT, DELETE ON %s TO %s; GRANT %s TO "%s";',
        ROLE,
        TABLES,
        ROLE,
        ROLE,
        me,
    )


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        _retention_role(schema_editor.connection)
        schema_editor.execute(CREATE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("audit", "0004_chain_heads")]

    operations = [migrations.RunPython(forwards, backwards)]
