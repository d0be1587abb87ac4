"""The benchmarks' users and bulk data: ``bench_users`` (an operator and a reviewer with API
tokens, password ``BENCH_USER_PASSWORD``) and ``load_runs`` (plan runs of echo steps
inserted straight with SQL), in the database of Django's default connection.
"""

from __future__ import annotations

from typing import Any

BENCH_USER_PASSWORD = "bench-password-not-secret"  # noqa: S105


def bench_users() -> dict[str, Any]:
    """An operator and a reviewer of the default project, each with a new API token.

    Returns ``{"operator": user, "reviewer": user, "operator_token": key,
    "reviewer_token": key}``.
    """
    from django.contrib.auth import get_user_model

    from projects.services import membership_set, project_default, token_create

    users: dict[str, Any] = {}
    project = project_default()
    for name in ("operator", "reviewer"):
        user, created = get_user_model().objects.get_or_create(username=f"bench-{name}")
        if created:
            user.set_password(BENCH_USER_PASSWORD)
            user.save()
        membership_set(project=project, user=user, role=name)
        users[name] = user
        users[f"{name}_token"] = token_create(user=user, project=project, name="benchmark")[1]
    return users


_LOAD_RUNS = """
INSERT INTO runs_run (id, project_id, goal, agent, input, metadata, state, status,
    gate, version, client_done, step_limit, on_budget_exceeded, budget_grants, usage_tokens,
    cost_usd, duration_ms, created_at, updated_at, started_at, finished_at)
SELECT md5(%(tag)s || g)::uuid, %(project)s, 'bench run ' || g, 'plan', '{}', %(metadata)s,
    '{}',
    %(status)s, '', 1, false, 500, 'fail', 0, 0, 0, 0,
    %(at)s - (%(runs)s - g) * interval '1 second', %(at)s, %(at)s, %(finished)s
FROM generate_series(1, %(runs)s) AS g
"""

_LOAD_STEPS = """
INSERT INTO runs_step (run_id, index, tool, args, args_hash, executor, args_schema,
    idempotency_key, risk, gate, gate_params, rationale, tool_call_id, status, attempts,
    max_attempts, timeout_seconds, lease_owner, result, usage, created_at, updated_at,
    started_at, finished_at)
SELECT md5(%(tag)s || g)::uuid, i, 'echo', {args}, md5('{{"value":1}}'), 'server', '{{}}',
    md5(%(tag)s || g)::uuid::text || ':' || i || ':echo', 'low', '', '{{}}', '', '',
    %(step_status)s, 1, 3, 60, '', {result}, '{{}}', %(at)s, %(at)s, %(at)s, %(finished)s
FROM generate_series(1, %(runs)s) AS g, generate_series(0, %(steps)s - 1) AS i
"""


def load_runs(
    *,
    tag: str,
    runs: int,
    steps_per_run: int,
    status: str = "succeeded",
    age_days: float = 0,
    metadata: str = "{}",
    args_sql: str = "'{\"value\": 1}'",
    result_sql: str = "'1'",
) -> list[str]:
    """Insert ``runs`` plan runs of ``steps_per_run`` succeeded echo steps straight with SQL.

    Fast bulk data for the read and purge benchmarks (no audit events, checkpoints or attempts:
    those are not what the pages or the purge read most). Run ids are derived from ``tag``, so
    two loads with different tags never collide; the runs finished ``age_days`` days ago, one
    second apart. ``args_sql`` and ``result_sql`` are SQL expressions (fixed text of the
    benchmark, never input) of each step's arguments and result, over the run number ``g``
    (1..runs) and the step index ``i``. Returns the run ids (UUID text), oldest first.
    """
    from django.db import connection, transaction

    from projects.models import default_project_id

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT now() - %s * interval '1 day'", [age_days])
        at = cursor.fetchone()[0]
        params = {
            "tag": tag,
            "project": default_project_id(),
            "runs": runs,
            "steps": steps_per_run,
            "status": status,
            "step_status": "succeeded" if status == "succeeded" else "pending",
            "at": at,
            "finished": at if status == "succeeded" else None,
            "metadata": metadata,
        }
        cursor.execute(_LOAD_RUNS, params)
        cursor.execute(_LOAD_STEPS.format(args=args_sql, result=result_sql), params)
        cursor.execute(
            "SELECT md5(%s || g)::uuid::text FROM generate_series(1, %s) AS g", [tag, runs]
        )
        ids = [row[0] for row in cursor.fetchall()]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_run")
        cursor.execute("ANALYZE runs_step")
    return ids
