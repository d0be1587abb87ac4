"""Settings, read from the environment (see README for every variable).

``DATABASE_URL`` (default: an SQLite file under ``var/``, for a quick local start only; tests and
production use PostgreSQL), ``REDIS_URL`` (Celery broker and channel layer; without it the
channel layer is in-memory and live updates only reach clients of the same process),
``SECRET_KEY``, ``DEBUG``, ``ALLOWED_HOSTS``.
"""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from agentops.csp import DEFAULT_POLICY as DEFAULT_CSP
from agentops.env import env_bool, env_int, env_list, env_networks, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("AGENTOPS_VAR_DIR", str(BASE_DIR / "var")))

# Off unless asked for: a debug page shows settings and URL patterns to anyone.
DEBUG = env_bool("DEBUG", False)
_DEV_SECRET = "dev-only-insecure-secret-key-change-me-in-production-0123456789"  # noqa: S105
SECRET_KEY = env_str("SECRET_KEY", _DEV_SECRET if DEBUG else "")
if not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
# The key of the audit log's HMACs (``audit.chain``): kept outside the database, so whoever can
# write the database cannot recompute the hashes of events they rewrote. Changing it needs a
# rehash of every chain (``audit.chain.rehash_chains``), or the log no longer verifies.
_DEV_AUDIT_KEY = "dev-only-insecure-audit-key-change-me-in-production-0123456789"
AGENTOPS_AUDIT_KEY = env_str("AGENTOPS_AUDIT_KEY", _DEV_AUDIT_KEY if DEBUG else "")
if not AGENTOPS_AUDIT_KEY:
    raise ImproperlyConfigured("AGENTOPS_AUDIT_KEY must be set when DEBUG is off")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "knox",
    "axes",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "channels",
    "projects",
    "gateway",
    "audit",
    "artifacts",
    "memory",
    "runs",
    "approvals",
    "fleet",
    "evals",
]

# WhiteNoise comes last, not second as its documentation suggests: it is sync-only, and under
# ASGI Django runs every middleware below a sync-only one in async mode, where each of Django's
# own middleware hops to a thread and back for its request and response hooks (16 thread hops
# a request). Last, it keeps the whole chain sync (3 hops): half again as many requests per
# second from one daphne process. Static files then pass the cheap middleware above it.
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # The request's user is the actor of audit events recorded by signal receivers.
    "audit.middleware.AuditActorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "agentops.csp.ContentSecurityPolicyMiddleware",
    # django-axes: refuses sign-in attempts after too many failures (last, as it documents).
    "axes.middleware.AxesMiddleware",
]

# django-axes first (it counts failed sign-ins and locks out), then project roles for the
# product's permissions (``projects.backends``), then Django's own backend for passwords and
# the admin's model permissions. A permission is granted when any backend grants it, so the
# order changes no answer; asked first, the roles (one query, kept on the user) answer a page's
# checks before Django's backend reads the user's and groups' model permissions (two queries).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "projects.backends.ProjectRoleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# A username from one address is locked out after this many failed sign-ins in a row, for
# this many hours (django-axes); a successful sign-in resets the count.
AXES_FAILURE_LIMIT = env_int("AGENTOPS_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env_int("AGENTOPS_LOGIN_LOCKOUT_SECONDS", 900, minimum=1) / 3600
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# The address of a sign-in, behind the trusted proxies too (``agentops.addresses``).
AXES_CLIENT_IP_CALLABLE = "agentops.addresses.request_address"
AXES_VERBOSE = False

# API tokens: django-rest-knox, with the project-scoped model of ``projects``. Only a SHA-512
# digest is stored; the token is shown once when created.
KNOX_TOKEN_MODEL = "projects.ApiToken"  # noqa: S105 (a model name)
# knox's own token table is not wanted (its model is swapped for ours) and its migrations would
# create it anyway.
MIGRATION_MODULES = {"knox": None}
AGENTOPS_TOKEN_TTL_SECONDS = env_int("AGENTOPS_TOKEN_TTL_SECONDS", 90 * 24 * 3600, minimum=0)
REST_KNOX = {
    "TOKEN_MODEL": KNOX_TOKEN_MODEL,
    "AUTH_HEADER_PREFIX": "Token",
    "AUTO_REFRESH": False,
}
# Bad tokens of one prefix a client address may send within a minute before that prefix gets
# 429s from it for the rest of the minute (``agentops.bad_tokens``).
AGENTOPS_BAD_TOKENS_PER_MINUTE = env_int("AGENTOPS_BAD_TOKENS_PER_MINUTE", 20, minimum=1)
# The reverse proxies in front of the site (addresses or CIDR networks): from them, and only
# from them, X-Forwarded-For names the client (``agentops.addresses``).
AGENTOPS_TRUSTED_PROXIES = env_networks("AGENTOPS_TRUSTED_PROXIES")
# The Content-Security-Policy of every response (``agentops.csp``).
AGENTOPS_CSP = env_str("AGENTOPS_CSP", DEFAULT_CSP)

ROOT_URLCONF = "web.urls"
ASGI_APPLICATION = "web.asgi.application"

# The project's pages (templates/) render with Jinja2, several times faster than Django's
# template language for the same markup (agentops/jinja2.py); Django admin and DRF's browsable
# API keep rendering their apps' own Django templates.
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.jinja2.Jinja2",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": False,
        "OPTIONS": {
            "environment": "agentops.jinja2.environment",
            # The navigation's count of pending approvals (counted only when a page shows it).
            "context_processors": ["approvals.context_processors.pending_approvals"],
        },
    },
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # Overrides of third-party pages (admin, Swagger UI), for accessibility.
        "DIRS": [BASE_DIR / "templates" / "django"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'agentops.sqlite3'}")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    _db_options = DATABASES["default"].setdefault("OPTIONS", {})
    if env_bool("DATABASE_PREPARED_STATEMENTS", True):
        # Server-side parameter binding lets psycopg prepare a statement on its fifth use on a
        # connection and then skip PostgreSQL's parse and plan (about a third of a small
        # statement's time here). Turn off behind a transaction-mode pooler that cannot keep
        # prepared statements (PgBouncer before 1.21).
        _db_options.update(server_side_binding=True, prepare_threshold=5)
    # Django's backend with the pool check below and psycopg's C loader for timestamps
    # (``agentops.postgresql``).
    DATABASES["default"]["ENGINE"] = "agentops.postgresql"
    if env_bool("AGENTOPS_DB_POOL", False):
        # For web processes. Under ASGI each request runs in a thread of its own, so persistent
        # connections pile up, one per finished thread, until garbage collection; Django's
        # documentation says to turn them off under ASGI and use the backend's pool
        # (psycopg_pool) instead. Celery workers keep one persistent connection each
        # (CONN_MAX_AGE): a pool opened before the prefork pool forks would not survive it.
        DATABASES["default"]["CONN_MAX_AGE"] = 0
        _db_options["pool"] = {
            "min_size": 2,
            "max_size": env_int("AGENTOPS_DB_POOL_SIZE", 20, minimum=1),
            "timeout": 10,
        }
        # The backend checks each connection it hands out: one the server closed (a restart,
        # a failover, pg_terminate_backend) is replaced before a request gets it, not served
        # as a 500 (``agentops.dbpool``).
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Tests create many users; a deliberately slow password hash would dominate their time.
if env_bool("AGENTOPS_FAST_PASSWORD_HASHING", False):
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
# WhiteNoise serves static files from any server (daphne included); in development it reads
# them straight from the app folders, in production from `collectstatic`'s output.
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG
# E-mail (notifications of approval requests): Django's backends; SMTP with
# EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend and the EMAIL_HOST* variables.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "agentops@localhost")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "run-list"
LOGOUT_REDIRECT_URL = "login"

SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 3600, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = not DEBUG
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

REDIS_URL = env_str("REDIS_URL", "")

# The cache holds request and failed-token counts and ``agentops.versions``: shared through
# Redis (an empty cache while it cannot be reached: ``agentops.cache``), or per process.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "agentops.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": env_str("AGENTOPS_CACHE_PREFIX", "agentops"),
            # Seconds a Redis that does not answer may cost a request (then the cache does
            # without it for a moment); redis-py would wait for the system's TCP timeout.
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }

# Celery: the broker only carries wake-ups (ids); PostgreSQL decides what runs. acks_late with
# reject_on_worker_lost re-delivers a task whose worker died, prefetch 1 keeps one task per
# process in flight, and the visibility timeout must exceed the longest step timeout.
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", not REDIS_URL)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 7200)}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Celery's Django fix-up closes the database connection before and after every task unless
# this is set, which costs a new connection per step. Connections are kept instead and closed
# by Django's own rule (errors or CONN_MAX_AGE) after each task: see agentops/celery.py.
CELERY_DB_REUSE_MAX = env_int("CELERY_DB_REUSE_MAX", 10_000, minimum=1)
CELERY_TIMEZONE = "UTC"
# Each pool process gets the restart sentinel billiard ends it by between two tasks: a process
# left with a runaway tool (one that overran its timeout and still runs) sets its own, so the
# pool replaces it (runs.tasks.StepTask).
CELERY_WORKER_POOL_RESTARTS = True
# Recovery and retention have a queue of their own, which every worker consumes besides the
# default one (a worker started without -Q consumes every queue below; Celery's Redis transport
# takes from them in turn): the sweeper must not wait behind a backlog of steps, which a
# worker claiming a run's next steps itself (AGENTOPS_CLAIM_NEXT_SECONDS) drains more slowly.
MAINTENANCE_QUEUE = "agentops.maintenance"
# Trace exports (fleet.export_run_trace) have one too: one waiting on a collector that is down
# never holds up a step or the sweeper.
TRACES_QUEUE = "agentops.traces"
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_QUEUES = (
    Queue("celery", routing_key="celery"),
    Queue(MAINTENANCE_QUEUE, routing_key=MAINTENANCE_QUEUE),
    Queue(TRACES_QUEUE, routing_key=TRACES_QUEUE),
)
CELERY_TASK_ROUTES = {
    "runs.sweep": {"queue": MAINTENANCE_QUEUE},
    "runs.retention_purge": {"queue": MAINTENANCE_QUEUE},
    "runs.retention_purge_execute": {"queue": MAINTENANCE_QUEUE},
    "gateway.end_idle_sessions": {"queue": MAINTENANCE_QUEUE},
    "approvals.notify_due": {"queue": MAINTENANCE_QUEUE},
    "fleet.purge_task_history": {"queue": MAINTENANCE_QUEUE},
    "fleet.refresh_workers_report": {"queue": MAINTENANCE_QUEUE},
    "memory.purge": {"queue": MAINTENANCE_QUEUE},
    "fleet.export_run_trace": {"queue": TRACES_QUEUE},
}

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # redis-py's default read timeout (5 s) equals channels-redis's blocking pop
                # (5 s): an idle WebSocket's consumer then died of a "Timeout reading" now
                # and then. The socket may wait well past the pop.
                "hosts": [{"address": REDIS_URL, "socket_timeout": 30}],
                "prefix": env_str("CHANNELS_PREFIX", "agentops"),
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "agentops.tokens.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Requests per client: signed-in users by user, others by address (``agentops.addresses``),
    # counted in the cache. Generous: they stop floods, not agents.
    "DEFAULT_THROTTLE_CLASSES": [
        "agentops.throttles.AnonRateThrottle",
        "agentops.throttles.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env_str("AGENTOPS_THROTTLE_ANON", "120/min"),
        "user": env_str("AGENTOPS_THROTTLE_USER", "200/s"),
    },
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "agentops.api.exception_handler",
    # JSON only: every body passes StrictJSONParser's checks (forms and multipart would not).
    "DEFAULT_PARSER_CLASSES": ["agentops.parsers.StrictJSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "agentops API",
    "DESCRIPTION": "Runs, steps, approvals and audit events of AI-agent runs.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the project's static files (drf-spectacular-sidecar), never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Without deep links an operation's path is text, not a link nested in its toggle button
    # (axe-core: nested-interactive).
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
    # Runs, steps, attempts and approvals each have a "status" with its own choices: name them.
    # Request bodies get their own components, with what only input has (a CharField that may
    # not be blank has minLength 1).
    "COMPONENT_SPLIT_REQUEST": True,
    # Every operation documents the refusals all views share (401, 403, 400, 404, ...).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "agentops.openapi.document_shared_refusals",
    ],
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "runs.statuses.run_status_choices",
        "StepStatusEnum": "runs.statuses.step_status_choices",
        "AttemptStatusEnum": "runs.statuses.AttemptStatus",
        "ApprovalStatusEnum": "approvals.models.ApprovalStatus",
    },
}

# agentops's own settings (its policy knobs and beat schedule).
from agentops.policy_settings import *  # noqa: E402, F403

# Artifacts (``artifacts``): files agents and tools produce. Stored in the "artifacts" storage:
# a directory (AGENTOPS_ARTIFACT_DIR, default var/artifacts) or, with
# AGENTOPS_ARTIFACT_STORAGE=s3, any S3-compatible service through django-storages (bucket,
# endpoint, region, keys and addressing style below; the bucket stays private: downloads go
# through agentops). An upload is refused (413) past AGENTOPS_ARTIFACT_MAX_BYTES bytes (a
# project's ArtifactLimit replaces it there); a step result whose JSON passes
# AGENTOPS_ARTIFACT_RESULT_THRESHOLD_BYTES (256 KiB; 0: never) is kept as an artifact and the
# step holds a reference to it.
AGENTOPS_ARTIFACT_STORAGE = env_str("AGENTOPS_ARTIFACT_STORAGE", "filesystem")
AGENTOPS_ARTIFACT_MAX_BYTES = env_int("AGENTOPS_ARTIFACT_MAX_BYTES", 2 * 1024**3, minimum=1)
AGENTOPS_ARTIFACT_RESULT_THRESHOLD_BYTES = env_int(
    "AGENTOPS_ARTIFACT_RESULT_THRESHOLD_BYTES", 256 * 1024, minimum=0
)
if AGENTOPS_ARTIFACT_STORAGE == "filesystem":
    _ARTIFACT_STORAGE = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {
            "location": env_str("AGENTOPS_ARTIFACT_DIR", str(VAR_DIR / "artifacts")),
            # Never served by URL: downloads pass agentops' permission checks.
            "base_url": "/nowhere/",
            "file_permissions_mode": 0o640,
            "directory_permissions_mode": 0o750,
        },
    }
elif AGENTOPS_ARTIFACT_STORAGE == "s3":
    # Imported only when S3 is chosen: boto3 is large.
    from boto3.s3.transfer import TransferConfig

    _S3_BUCKET = env_str("AGENTOPS_S3_BUCKET", "")
    if not _S3_BUCKET:
        raise ImproperlyConfigured(
            "AGENTOPS_S3_BUCKET must be set with AGENTOPS_ARTIFACT_STORAGE=s3"
        )
    _ARTIFACT_STORAGE = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": _S3_BUCKET,
            "endpoint_url": env_str("AGENTOPS_S3_ENDPOINT_URL", "") or None,
            "region_name": env_str("AGENTOPS_S3_REGION", "") or None,
            "access_key": env_str("AGENTOPS_S3_ACCESS_KEY_ID", "") or None,
            "secret_key": env_str("AGENTOPS_S3_SECRET_ACCESS_KEY", "") or None,
            "addressing_style": env_str("AGENTOPS_S3_ADDRESSING_STYLE", "") or None,
            "default_acl": None,
            "file_overwrite": False,
            "querystring_auth": True,
            # Bytes of a file opened through the storage kept in memory before spooling to
            # disk (django-storages' default, 0, keeps all of it in memory).
            "max_memory_size": 8 * 1024 * 1024,
            # An upload's multipart parts held in memory at once: 2 of 8 MiB (boto3's default,
            # 10 threads, holds up to 80 MiB per upload).
            "transfer_config": TransferConfig(max_concurrency=2, multipart_chunksize=8 * 1024**2),
        },
    }
else:
    raise ImproperlyConfigured("AGENTOPS_ARTIFACT_STORAGE must be filesystem or s3")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "artifacts": _ARTIFACT_STORAGE,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
