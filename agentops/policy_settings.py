"""agentops's own settings, read from environment variables (``agentops.env``): approval,
notification, step, retention, compaction, gateway and control-room knobs, and Celery beat's
schedule of the periodic tasks they time. ``agentops.settings`` takes them all."""

from django.core.exceptions import ImproperlyConfigured

from agentops.env import env_int, env_list, env_str

AGENTOPS_APPROVAL_TTL_SECONDS = env_int("AGENTOPS_APPROVAL_TTL_SECONDS", 24 * 3600, minimum=1)
# Notifications of approval requests (``approvals.notifications``): how often beat reminds,
# escalates and re-sends lost notifications (seconds); attempts before a notification is
# failed, and the backoff between them (base doubled per attempt, capped; seconds); how long a
# worker's claim on one lasts before another may take it over (seconds); notifications re-sent
# per beat run; the site's address in links (e.g. https://agentops.example.com).
AGENTOPS_APPROVAL_NOTIFY_INTERVAL_SECONDS = env_int(
    "AGENTOPS_APPROVAL_NOTIFY_INTERVAL_SECONDS", 30, minimum=1
)
# How often beat deletes expired memory items and applies memory retention policies (seconds);
# reads skip an expired item at once, so this only bounds how long its row stays.
AGENTOPS_MEMORY_PURGE_INTERVAL_SECONDS = env_int(
    "AGENTOPS_MEMORY_PURGE_INTERVAL_SECONDS", 300, minimum=1
)
AGENTOPS_NOTIFY_MAX_ATTEMPTS = env_int("AGENTOPS_NOTIFY_MAX_ATTEMPTS", 5, minimum=1)
AGENTOPS_NOTIFY_RETRY_BASE_SECONDS = env_int("AGENTOPS_NOTIFY_RETRY_BASE_SECONDS", 30, minimum=0)
AGENTOPS_NOTIFY_RETRY_MAX_SECONDS = env_int("AGENTOPS_NOTIFY_RETRY_MAX_SECONDS", 3600, minimum=0)
AGENTOPS_NOTIFY_CLAIM_SECONDS = env_int("AGENTOPS_NOTIFY_CLAIM_SECONDS", 120, minimum=1)
AGENTOPS_NOTIFY_BATCH = env_int("AGENTOPS_NOTIFY_BATCH", 500, minimum=1)
AGENTOPS_PUBLIC_URL = env_str("AGENTOPS_PUBLIC_URL", "")
# Seconds between two checks that an open WebSocket's token, session and user still hold
# (``audit.consumers``): a revoked one stops receiving events within this time of the next.
AGENTOPS_WS_RECHECK_SECONDS = env_int("AGENTOPS_WS_RECHECK_SECONDS", 5, minimum=0)
AGENTOPS_DEFAULT_STEP_TIMEOUT_SECONDS = env_int(
    "AGENTOPS_DEFAULT_STEP_TIMEOUT_SECONDS", 60, minimum=1
)
AGENTOPS_DEFAULT_MAX_ATTEMPTS = env_int("AGENTOPS_DEFAULT_MAX_ATTEMPTS", 3, minimum=1)
AGENTOPS_RETRY_BASE_SECONDS = env_int("AGENTOPS_RETRY_BASE_SECONDS", 2, minimum=0)
AGENTOPS_RETRY_MAX_SECONDS = env_int("AGENTOPS_RETRY_MAX_SECONDS", 300, minimum=0)
AGENTOPS_DEFAULT_STEP_LIMIT = env_int("AGENTOPS_DEFAULT_STEP_LIMIT", 500, minimum=1)
# Compaction (runs.control.compaction): a run whose active context passes this many tokens
# (estimated: runs.models.conversation.estimate_tokens; 0: never) is compacted by the
# summarizer named here (a dotted path, runs.summarizers), whose default keeps the first
# message and the last AGENTOPS_CONTEXT_KEEP_LAST. 100,000: most of a 128k-token window.
AGENTOPS_CONTEXT_TOKEN_THRESHOLD = env_int("AGENTOPS_CONTEXT_TOKEN_THRESHOLD", 100_000, minimum=0)
AGENTOPS_CONTEXT_KEEP_LAST = env_int("AGENTOPS_CONTEXT_KEEP_LAST", 20, minimum=0)
AGENTOPS_SUMMARIZER = env_str("AGENTOPS_SUMMARIZER", "runs.summarizers.keep_first_and_last")
# Modules whose ``@state_migration`` functions (``runs.state_migrations``) a state schema may
# name; imported at start-up.
AGENTOPS_STATE_MIGRATION_MODULES = env_list("AGENTOPS_STATE_MIGRATION_MODULES", [])
# Modules that register a deployment's own tools and compensations (``runs.tools``); imported
# at start-up by every process (web and workers), so each knows the same tools.
AGENTOPS_TOOL_MODULES = env_list("AGENTOPS_TOOL_MODULES", [])
AGENTOPS_SWEEP_INTERVAL_SECONDS = env_int("AGENTOPS_SWEEP_INTERVAL_SECONDS", 30, minimum=1)
# A step's lease lasts its timeout plus this margin (seconds) for recording the outcome.
AGENTOPS_LEASE_MARGIN_SECONDS = env_int("AGENTOPS_LEASE_MARGIN_SECONDS", 30, minimum=1)
# A tool that overran its timeout and is still running this many seconds after its task ends
# has its worker pool process replaced (Python cannot stop the tool's thread).
AGENTOPS_RUNAWAY_GRACE_SECONDS = env_int("AGENTOPS_RUNAWAY_GRACE_SECONDS", 5, minimum=0)
# Hard time limit (seconds) of a worker task that executes steps: past it Celery kills the pool
# process, whatever the tool does. 0: derived from the longest step timeout when the worker
# starts (runs.tasks.hard_time_limit_seconds).
AGENTOPS_TASK_HARD_LIMIT_SECONDS = env_int("AGENTOPS_TASK_HARD_LIMIT_SECONDS", 0, minimum=0)
# Idempotency-Key: how long a key is remembered, and after how long an in-flight key whose
# request never answered (a crashed web process) may be taken over (seconds).
AGENTOPS_IDEMPOTENCY_TTL_SECONDS = env_int("AGENTOPS_IDEMPOTENCY_TTL_SECONDS", 24 * 3600, minimum=1)
AGENTOPS_IDEMPOTENCY_LOCK_SECONDS = env_int("AGENTOPS_IDEMPOTENCY_LOCK_SECONDS", 60, minimum=1)
# Retention: steps deleted per transaction (1000: about 100 ms a transaction here at the
# plain-SQL delete rate, benchmarks/README.md; 2000 held locks twice as long for no faster
# purge); how long audit events outlive their run (days); how often beat applies the retention
# policies (seconds).
AGENTOPS_RETENTION_BATCH_SIZE = env_int("AGENTOPS_RETENTION_BATCH_SIZE", 1000, minimum=1)
AGENTOPS_AUDIT_RETENTION_DAYS = env_int("AGENTOPS_AUDIT_RETENTION_DAYS", 400, minimum=1)
# How long a closed session (its items, compactions and state) is kept (days; 0: until its
# subject's erasure). Its runs follow the retention policies like any run.
AGENTOPS_SESSION_RETENTION_DAYS = env_int("AGENTOPS_SESSION_RETENTION_DAYS", 90, minimum=0)
AGENTOPS_RETENTION_INTERVAL_SECONDS = env_int(
    "AGENTOPS_RETENTION_INTERVAL_SECONDS", 3600, minimum=60
)
# A worker that finishes a step claims the run's next one itself (no commit and broker round
# trip in between) for up to this many seconds, then hands the run back to the queue (0: never).
AGENTOPS_CLAIM_NEXT_SECONDS = env_int("AGENTOPS_CLAIM_NEXT_SECONDS", 1, minimum=0)
# Queued steps older than this (seconds) are re-sent by the sweeper: their message may be lost.
# The MCP gateway (``gateway``): a call waiting for a reviewer sends its client a progress
# notification this often (seconds; the MCP client's own timeout must be longer), and looks at
# its step this often (seconds).
AGENTOPS_MCP_PROGRESS_SECONDS = env_int("AGENTOPS_MCP_PROGRESS_SECONDS", 5, minimum=1)
AGENTOPS_MCP_POLL_SECONDS = float(env_str("AGENTOPS_MCP_POLL_SECONDS", "0.2"))
# A session's run unused this long (seconds) is ended by beat: completed, or cancelled when a
# call is still open (the mcp SDK closes a session idle for 30 minutes).
AGENTOPS_MCP_SESSION_IDLE_SECONDS = env_int("AGENTOPS_MCP_SESSION_IDLE_SECONDS", 1800, minimum=60)
AGENTOPS_REQUEUE_AFTER_SECONDS = env_int("AGENTOPS_REQUEUE_AFTER_SECONDS", 60, minimum=1)
# The control room (``fleet``): the bearer token Prometheus sends to /metrics (empty: staff
# sessions only), how long workers have to answer each inspect call (seconds), how old their
# last answer may be before an open workers page has a worker ask them again, which is also
# how often that page refreshes (seconds), and how long the task history keeps a task's
# outcome (days).
AGENTOPS_METRICS_TOKEN = env_str("AGENTOPS_METRICS_TOKEN", "")
AGENTOPS_INSPECT_TIMEOUT_SECONDS = float(env_str("AGENTOPS_INSPECT_TIMEOUT_SECONDS", "1.0"))
AGENTOPS_WORKERS_REFRESH_SECONDS = env_int("AGENTOPS_WORKERS_REFRESH_SECONDS", 5, minimum=1)
AGENTOPS_TASK_HISTORY_DAYS = env_int("AGENTOPS_TASK_HISTORY_DAYS", 7, minimum=1)
# Which task outcomes the workers record: all, failures (failures and retries: one INSERT only
# when something went wrong), or off.
AGENTOPS_TASK_HISTORY = env_str("AGENTOPS_TASK_HISTORY", "all")
if AGENTOPS_TASK_HISTORY not in ("all", "failures", "off"):
    raise ImproperlyConfigured("AGENTOPS_TASK_HISTORY must be all, failures or off")

# OpenTelemetry export of runs as traces (``fleet.traces``): on when an OTLP endpoint is set
# with OpenTelemetry's standard variables (the exporter reads them and the others it knows:
# headers, timeout, compression, certificates) and OTEL_SDK_DISABLED is not true; off
# otherwise. A failed export is retried AGENTOPS_OTEL_EXPORT_RETRIES times, the delay from
# AGENTOPS_OTEL_RETRY_BASE_SECONDS doubling per retry up to AGENTOPS_OTEL_RETRY_MAX_SECONDS:
# a collector down for less than their sum (the retry window; about 85 minutes by default)
# loses no span.
AGENTOPS_OTEL_EXPORT = (
    bool(
        env_str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
        or env_str("OTEL_EXPORTER_OTLP_ENDPOINT", "")
    )
    and env_str("OTEL_SDK_DISABLED", "false").strip().lower() != "true"
)
AGENTOPS_OTEL_EXPORT_RETRIES = env_int("AGENTOPS_OTEL_EXPORT_RETRIES", 20, minimum=0)
AGENTOPS_OTEL_RETRY_BASE_SECONDS = env_int("AGENTOPS_OTEL_RETRY_BASE_SECONDS", 5, minimum=0)
AGENTOPS_OTEL_RETRY_MAX_SECONDS = env_int("AGENTOPS_OTEL_RETRY_MAX_SECONDS", 300, minimum=0)

CELERY_BEAT_SCHEDULE = {
    "sweep": {"task": "runs.sweep", "schedule": float(AGENTOPS_SWEEP_INTERVAL_SECONDS)},
    "retention": {
        "task": "runs.retention_purge",
        "schedule": float(AGENTOPS_RETENTION_INTERVAL_SECONDS),
    },
    "mcp-idle-sessions": {"task": "gateway.end_idle_sessions", "schedule": 60.0},
    "approval-notifications": {
        "task": "approvals.notify_due",
        "schedule": float(AGENTOPS_APPROVAL_NOTIFY_INTERVAL_SECONDS),
    },
    "task-history-retention": {"task": "fleet.purge_task_history", "schedule": 3600.0},
    # Expired memory items (reads already skip them) and memory retention policies.
    "memory-purge": {
        "task": "memory.purge",
        "schedule": float(AGENTOPS_MEMORY_PURGE_INTERVAL_SECONDS),
    },
}
