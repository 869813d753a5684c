"""AuditWeb settings: everything that differs between machines comes from the environment.

Each variable is read once, here, through a strict helper that raises
ImproperlyConfigured on a bad value. `.env.example` lists them all.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str | None = None) -> str:
    value = os.environ.get(name)
    if value is None or value == "":
        if default is None:
            raise ImproperlyConfigured(f"Set the environment variable {name}.")
        return default
    return value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if value == "":
        return default
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {value!r}.")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {value!r}.") from None


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)
# Only a DEBUG instance may run on a throw-away key; a real deployment must set one.
SECRET_KEY = env_str("SECRET_KEY", "insecure-development-key-only-for-debug" if DEBUG else None)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "http://localhost,http://127.0.0.1")

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/auditweb"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
    )
}
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured("DATABASE_URL must name a PostgreSQL database (postgres://...).")
# Pages and API calls may read, never run for minutes: a runaway filter is cut off.
DATABASES["default"].setdefault("OPTIONS", {})["options"] = (
    f"-c statement_timeout={env_int('DATABASE_STATEMENT_TIMEOUT_MS', 0)}"
)

REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "django_filters",
    "django_htmx",
    "template_partials",
    "axes",
    "ingest",
    "investigations",
]

MIDDLEWARE = [
    # First: a container's probe of /healthz is answered before the host check and HTTPS redirect.
    "auditweb.health.HealthCheckMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "investigations.middleware.RefuseNulMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "investigations.middleware.ContentSecurityPolicyMiddleware",
    "investigations.middleware.TimezoneMiddleware",
    # Last, as django-axes asks: it turns a refused (locked-out) login into its lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "auditweb.urls"
WSGI_APPLICATION = "auditweb.wsgi.application"
ASGI_APPLICATION = "auditweb.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "investigations.roles.role_context",
            ],
        },
    }
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Behind a reverse proxy: take the client's address from the last X-Forwarded-For entry (the
# one the proxy added) for the audit trail and login throttling. Only when a proxy sets it.
TRUST_X_FORWARDED_FOR = env_bool("TRUST_X_FORWARDED_FOR", False)
# Failed logins are throttled by django-axes: after LOGIN_FAILURE_LIMIT wrong passwords for one
# name from one address, that name is refused from there (even with the right password) for
# LOGIN_LOCKOUT_MINUTES. Other addresses, and other names, are not affected.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_CLIENT_IP_CALLABLE = "investigations.trail.client_ip"
AXES_DISABLE_ACCESS_LOG = True  # successful logins are in AuditWeb's own audit trail
AXES_VERBOSE = False  # its log lines (one per login) say nothing the audit trail does not
# A login lasts this many hours (8 by default: a working day), from the login, not renewed by use.
SESSION_COOKIE_AGE = env_int("SESSION_HOURS", 8) * 3600
SESSION_EXPIRE_AT_BROWSER_CLOSE = True
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedStaticFilesStorage"
    },
}
# Serve static files from the finders when collectstatic has not run (tests, runserver).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Served over TLS (HTTPS=true, directly or behind a TLS-terminating proxy): plain HTTP is
# redirected, browsers are told to use only HTTPS (HSTS), cookies travel only encrypted.
HTTPS = env_bool("HTTPS", False)
SECURE_SSL_REDIRECT = HTTPS
SECURE_HSTS_SECONDS = env_int("HSTS_SECONDS", 31_536_000) if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("HSTS_PRELOAD", True)
# Behind a proxy that sets X-Forwarded-Proto (and removes the client's own): a request the
# proxy received over TLS counts as secure. Without such a proxy a client could claim it.
if env_bool("TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", HTTPS)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "investigations.api.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Each view says its role (investigations.roles.role_permission); one that does not refuses all.
    "DEFAULT_PERMISSION_CLASSES": ["investigations.roles.NoRoleDeclared"],
    "DEFAULT_SCHEMA_CLASS": "investigations.api.schema.ErrorAwareAutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "AuditWeb API",
    "DESCRIPTION": "Normalized MySQL/MariaDB audit events for investigators and SIEMs.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and its docs pages are for viewers and up, like the API they describe.
    "SERVE_PERMISSIONS": ["investigations.roles.ViewerPermission"],
    # Swagger UI from AuditWeb's own static files (static/vendor.sh fetches them), never a CDN.
    "SWAGGER_UI_DIST": "/static/vendor",
    "SWAGGER_UI_FAVICON_HREF": "/static/favicon.svg",
    # Choice sets that share a field name with another model's (status, format) get their own names.
    "ENUM_NAME_OVERRIDES": {
        "CaseStatusEnum": "investigations.models.Case.Status",
        "ReportStatusEnum": "investigations.models.Report.Status",
        "ReportFormatEnum": "investigations.models.Report.Format",
        "SourceKindEnum": "ingest.models.Source.Kind",
        "SourceFormatEnum": "ingest.parsers.format_choices",
        "AlertKindEnum": "ingest.models.Alert.Kind",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "investigations.api.schema.allow_empty_filters",
    ],
}


def _redis_py_url(url: str) -> str:
    """Celery's `redis+socket:///path?virtual_host=N` as redis-py's `unix:///path?db=N`."""
    if not url.startswith("redis+socket://"):
        return url
    path, _, query = url.removeprefix("redis+socket://").partition("?")
    db = next((v for k, _, v in (p.partition("=") for p in query.split("&")) if k == "virtual_host"), "0")
    return f"unix://{path}?db={db}"


# Decoded binlog rows (investigations.query.rows_cache): Redis, shared by the web workers.
# Binlog files never change once written, so entries are never stale: they only expire.
# Short socket timeouts: with Redis down a page decodes its rows again, it does not wait.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "binlog_rows": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": _redis_py_url(REDIS_URL),
        "KEY_PREFIX": "auditweb-rows",
        "TIMEOUT": env_int("BINLOG_ROWS_CACHE_SECONDS", 3600),
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 2},
    },
}

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# No task runs without end: after the soft limit a task is told to stop (an ingest ends its run
# as failed, with what it committed kept; the next poll resumes from there), after the hard
# limit its process is killed. A worker process (prefork pool) is replaced once it used more
# than the memory ceiling (KiB, checked after each task).
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 3600)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 3900)
CELERY_WORKER_MAX_MEMORY_PER_CHILD = env_int("CELERY_WORKER_MAX_MEMORY_PER_CHILD", 4 * 1024 * 1024)
if CELERY_TASK_TIME_LIMIT <= CELERY_TASK_SOFT_TIME_LIMIT:
    raise ImproperlyConfigured("CELERY_TASK_TIME_LIMIT must be longer than CELERY_TASK_SOFT_TIME_LIMIT.")
# The queue tasks go to; workers of one deployment share it (tests use their own).
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "celery")
# Seconds between beat's looks at the sources: those whose interval has passed are polled, and
# followed files that changed (by stat alone) or whose quiet last record is due are polled now.
INGEST_POLL_SECONDS = env_int("INGEST_POLL_SECONDS", 1)
# A followed file that has not grown for this many seconds and ends with a newline has its last
# record stored: servers write each record whole, so nothing more can belong to it (0: at once).
INGEST_SETTLE_SECONDS = env_int("INGEST_SETTLE_SECONDS", 2)
# Seconds between beat's looks at the sources' health (alerts when it changes).
HEALTH_CHECK_SECONDS = env_int("HEALTH_CHECK_SECONDS", 30)
# The shortest silence that makes a followed source suspect, however often it delivered (at
# least twice its poll interval; its quiet time is the longest, after which it is dead).
HEALTH_MIN_SUSPECT_SECONDS = env_int("HEALTH_MIN_SUSPECT_SECONDS", 60)
CELERY_BEAT_SCHEDULE = {
    # Monthly partitions of the event table exist before events for them arrive.
    "create-event-partitions": {"task": "ingest.tasks.create_event_partitions", "schedule": 6 * 3600},
    # Sources whose interval has passed are queued for an incremental ingest.
    # A tick a busy worker could not take in time is dropped: the next one does the same.
    "poll-sources": {
        "task": "ingest.tasks.poll_sources",
        "schedule": INGEST_POLL_SECONDS,
        "options": {"expires": INGEST_POLL_SECONDS},
    },
    # Sources whose health changed (silent, vanished, refused...) raise an alert for the SIEM.
    "check-health": {"task": "ingest.tasks.check_health", "schedule": HEALTH_CHECK_SECONDS},
}

# Events per COPY batch (one transaction each): bigger is faster, smaller loses less on a crash.
INGEST_BATCH_SIZE = env_int("INGEST_BATCH_SIZE", 20000)
# Longest line of a log file read whole; a longer one keeps its head and its last 4 KiB, its
# length and its SHA-256 (ingest.reading), and the rest of the file goes on.
INGEST_MAX_LINE_BYTES = env_int("INGEST_MAX_LINE_BYTES", 16 * 1024 * 1024)
if INGEST_MAX_LINE_BYTES < 64 * 1024:
    raise ImproperlyConfigured("INGEST_MAX_LINE_BYTES must be at least 65536 (64 KiB)")
# Most of one record's raw bytes (and characters of its SQL) a page or an API answer shows;
# the rest is named ("the first N of M bytes") and the whole is a download (/events/<id>/raw/).
SHOWN_MAX_BYTES = env_int("SHOWN_MAX_BYTES", 64 * 1024)
if SHOWN_MAX_BYTES < 1024:
    raise ImproperlyConfigured("SHOWN_MAX_BYTES must be at least 1024")
# A poll of a binlog source reads at most this many bytes and seconds; the next poll goes on.
BINLOG_POLL_BYTES = env_int("BINLOG_POLL_BYTES", 256 * 1024 * 1024)
BINLOG_POLL_SECONDS = env_int("BINLOG_POLL_SECONDS", 60)
# The largest event a replica pull takes (held in memory while it is written to the spool).
BINLOG_MAX_EVENT_BYTES = env_int("BINLOG_MAX_EVENT_BYTES", 256 * 1024 * 1024)
# Where a binlog-replica source writes the binlog files it pulls (one folder per source, the
# files named as the server names them); rows are decoded from there on demand, so keep it.
BINLOG_SPOOL_DIR = Path(env_str("BINLOG_SPOOL_DIR", str(BASE_DIR / ".devdata" / "binlog-spool")))
# Parse a file in a second process while this one writes to PostgreSQL (Linux: os.fork).
INGEST_PARALLEL = env_bool("INGEST_PARALLEL", hasattr(os, "fork"))
# A source with at least this many bytes to read is shared out between the workers in ranges of
# about INGEST_CHUNK_BYTES (ingest.split). Off (0) by default: it pays only where the workers
# have more cores than one worker keeps busy (two each); see README, "Scaling out".
INGEST_SPLIT_BYTES = env_int("INGEST_SPLIT_BYTES", 0)
INGEST_CHUNK_BYTES = env_int("INGEST_CHUNK_BYTES", 64 * 1024 * 1024)
# A range queued this long ago and not started is queued again (its message may have been lost).
INGEST_CHUNK_REDISPATCH_SECONDS = env_int("INGEST_CHUNK_REDISPATCH_SECONDS", 600)
# File sources may read only below these folders (comma-separated): a path, a glob and every file
# it matches are resolved (symbolic links followed) and must stay inside one (ingest.checkpoints).
LOG_ROOTS = [Path(root).resolve() for root in env_list("AUDITWEB_LOG_ROOTS", "/var/log")]
# Uploaded log files: streamed here as they arrive (never held in memory), kept as evidence.
UPLOAD_DIR = Path(env_str("UPLOAD_DIR", str(BASE_DIR / ".devdata" / "uploads")))
# Case reports (PDF, CSV, JSON) are written here and served only through a role-checked view.
REPORT_DIR = Path(env_str("REPORT_DIR", str(BASE_DIR / ".devdata" / "reports")))
# Files uploaded stream to a temporary file in UPLOAD_DIR (so keeping one is a rename),
# hashed on the way; none is ever held in memory.
FILE_UPLOAD_HANDLERS = ["ingest.uploads.HashingUploadHandler"]
# The largest log file an upload may bring (checked while it streams; default 20 GiB). A proxy
# in front needs a body limit at least this large (nginx: client_max_body_size).
MAX_UPLOAD_BYTES = env_int("MAX_UPLOAD_BYTES", 20 * 1024**3)
# "New case from this search" pins at most this many matching events (a larger search is refused,
# with its count); more than CASE_FROM_SEARCH_IN_REQUEST are pinned by a worker, not the request.
CASE_FROM_SEARCH_MAX = env_int("CASE_FROM_SEARCH_MAX", 10_000)
CASE_FROM_SEARCH_IN_REQUEST = env_int("CASE_FROM_SEARCH_IN_REQUEST", 500)
# How many months of event partitions to keep created ahead of today.
EVENT_PARTITIONS_AHEAD = env_int("EVENT_PARTITIONS_AHEAD", 3)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
