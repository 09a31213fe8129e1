"""Settings, read from the environment (12-factor).

``PORTAL_ENV`` picks the mode: ``development`` (the default: SQLite, a broker that
needs no server, the sandbox cluster's kubeconfig) or ``production`` (every secret and
server must be given; ``check --deploy`` is clean). Bad values stop the process at
start with a message naming the variable, rather than misbehaving later.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("PORTAL_VAR_DIR", BASE_DIR / "var"))


def env_str(name: str, default: str | None = None) -> str:
    value = os.environ.get(name) or default
    if value is None or value == "":
        raise ImproperlyConfigured(f"{name} must be set (PORTAL_ENV={PORTAL_ENV})")
    return value


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {raw!r}")


def env_int(name: str, default: int, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {value}")
    return value


def env_list(name: str, default: str) -> list[str]:
    # Empty counts as unset, as for every other variable: a chart that renders `value: ""`
    # must not turn "the default registries" into "no registries".
    return [item.strip() for item in (os.environ.get(name) or default).split(",") if item.strip()]


def env_float(name: str, default: float, minimum: float = 0.0, maximum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, not {raw!r}") from None
    # float() accepts "nan" and "inf"; neither is a threshold or a timeout anyone means.
    if value != value or value in (float("inf"), float("-inf")):
        raise ImproperlyConfigured(f"{name} must be a finite number, not {raw!r}")
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum:g}, not {value:g}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum:g}, not {value:g}")
    return value


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = (os.environ.get(name) or default).strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return value


def env_urls(name: str, default: str = "") -> list[str]:
    """Comma-separated http(s) URLs; a typo such as a missing scheme fails at start, not at the first scrape."""
    urls = env_list(name, default)
    for url in urls:
        if not re.fullmatch(r"https?://[^\s/?#]+[^\s]*", url):
            raise ImproperlyConfigured(f"{name} must be comma-separated http:// or https:// URLs, not {url!r}")
    return urls


PORTAL_ENV = os.environ.get("PORTAL_ENV", "development")
if PORTAL_ENV not in ("development", "production"):
    raise ImproperlyConfigured(f"PORTAL_ENV must be development or production, not {PORTAL_ENV!r}")
PRODUCTION = PORTAL_ENV == "production"
if not PRODUCTION:
    # The development SQLite database, broker and sandbox state live here.
    VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", default=not PRODUCTION)
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("DEBUG must be off when PORTAL_ENV=production")

# Development has a fixed, public key; it signs nothing that matters outside a laptop.
SECRET_KEY = env_str("SECRET_KEY") if PRODUCTION else os.environ.get("SECRET_KEY", "dev-only-insecure-key")
if PRODUCTION and (len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5):
    raise ImproperlyConfigured("SECRET_KEY must be at least 50 characters with at least 5 distinct ones")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "" if PRODUCTION else "localhost,127.0.0.1,[::1],testserver")
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS must list the portal's host names")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "portal",
    "quotas",
    "jobs",
    "usage",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "portal.middleware.ContentSecurityPolicyMiddleware",
    # Innermost, so its 400 still gets every header the middleware above adds.
    "portal.middleware.RefuseNulCharacters",
    "portal.middleware.RefuseDeepJson",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

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
                "portal.context_processors.shell",
            ],
        },
    },
]

_default_db = "" if PRODUCTION else f"sqlite:///{VAR_DIR / 'portal.sqlite3'}"
try:
    DATABASES = {"default": dj_database_url.parse(env_str("DATABASE_URL", _default_db), conn_max_age=60)}
except ValueError as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {exc}") from None
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Several processes (web, worker, beat) share the file in development.
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = (
    [
        {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
        {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
        {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
        {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
    ]
    if PRODUCTION
    else []
)

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles" if PRODUCTION else VAR_DIR / "static"))
if not PRODUCTION:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# The portal serves its own assets (air-gapped clusters have no CDN); outside
# production they come straight from the app folders, without collectstatic.
WHITENOISE_USE_FINDERS = not PRODUCTION
WHITENOISE_AUTOREFRESH = DEBUG
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if PRODUCTION
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}

# --- Security (production) ---------------------------------------------------
if PRODUCTION:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

# --- REST API -----------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "portal.api.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "portal.schema.PortalAutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # DRF's three, with JSON nesting limited (portal/jsonbody.py says why).
    "DEFAULT_PARSER_CLASSES": [
        "portal.parsers.DepthLimitedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "EXCEPTION_HANDLER": "portal.api.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU Platform Portal API",
    "DESCRIPTION": "Request notebooks, training runs and inference endpoints on GPUs, within your team's quota.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Several models have a "kind" or "state"; name each enum after its owner.
    "ENUM_NAME_OVERRIDES": {
        "WorkloadKindEnum": "jobs.models.Kind",
        "WorkloadStateEnum": "jobs.models.State",
        "OfferingKindEnum": "portal.models.Offering.KINDS",
    },
}

# --- Celery ---------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
_default_broker = REDIS_URL or ("" if PRODUCTION else f"sqla+sqlite:///{VAR_DIR / 'celery-broker.sqlite3'}")
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", _default_broker)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_TIME_LIMIT = 300
CELERY_TASK_SOFT_TIME_LIMIT = 240
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# --- The cluster ------------------------------------------------------------------
# "in-cluster" uses the pod's service account; anything else is a kubeconfig path.
KUBE_CONFIG = os.environ.get("PORTAL_KUBECONFIG", "" if PRODUCTION else str(VAR_DIR / "sandbox" / "kubeconfig"))
if PRODUCTION and not KUBE_CONFIG:
    raise ImproperlyConfigured("PORTAL_KUBECONFIG must be a kubeconfig path or 'in-cluster'")
KUBE_CONTEXT = os.environ.get("PORTAL_KUBE_CONTEXT", "")
KUBE_REQUEST_TIMEOUT = env_int("PORTAL_KUBE_TIMEOUT_SECONDS", 10, minimum=1)
# Pages read the cluster with short timeouts (connect, read in seconds): a slow cluster
# shows "not answering" quickly instead of holding every panel for KUBE_REQUEST_TIMEOUT.
KUBE_CONNECT_TIMEOUT = env_int("PORTAL_KUBE_CONNECT_TIMEOUT", 2, minimum=1)
KUBE_READ_TIMEOUT = env_int("PORTAL_KUBE_READ_TIMEOUT", 3, minimum=1)
CLUSTER_PROFILE = Path(os.environ.get("PORTAL_CLUSTER_PROFILE", BASE_DIR / "deploy" / "cluster-profiles" / "demo.yaml"))
# Images users may run; an entry is a registry host or a host/path prefix.
ALLOWED_IMAGE_REGISTRIES = env_list(
    "PORTAL_ALLOWED_REGISTRIES",
    "nvcr.io,docker.io/pytorch,docker.io/library,docker.io/kserve,"
    "docker.io/kubeflownotebookswg,ghcr.io/kubeflow,quay.io/jupyter",
)
# The notebook images offered in the request form's image picker; the first is the form's
# default. Kubeflow's notebook-server images serve Jupyter under NB_PREFIX as the Notebook
# controller's URL needs; other Jupyter images get base_url arguments from the builder.
# A list given here must be all from allowed registries (checked at start-up: jobs.checks);
# of the default list, the form offers those the allowed registries admit.
NOTEBOOK_IMAGES_GIVEN = bool(os.environ.get("PORTAL_NOTEBOOK_IMAGES", "").strip())
NOTEBOOK_IMAGES = env_list(
    "PORTAL_NOTEBOOK_IMAGES",
    "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-pytorch-cuda-full:v1.10.0,"
    "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-pytorch-full:v1.10.0,"
    "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-tensorflow-cuda-full:v1.10.0,"
    "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-scipy:v1.10.0,"
    "quay.io/jupyter/pytorch-notebook:2024-12-02",
)
# The reconcile: how often it runs, when a queued workload's task counts as lost, and
# how long a finished workload's objects stay (so its logs and events can be read).
RECONCILE_INTERVAL_SECONDS = env_int("PORTAL_RECONCILE_INTERVAL_SECONDS", 10, minimum=1)
LOST_TASK_AFTER_SECONDS = env_int("PORTAL_LOST_TASK_AFTER_SECONDS", 60, minimum=1)
FINISHED_OBJECT_RETENTION_SECONDS = env_int("PORTAL_FINISHED_RETENTION_SECONDS", 3600, minimum=0)
# Where users open a running notebook: Kubeflow serves each one under this path.
NOTEBOOK_URL_TEMPLATE = (
    os.environ.get("PORTAL_NOTEBOOK_URL_TEMPLATE") or "http://kubeflow.local/notebook/{namespace}/{name}/"
)
if not re.fullmatch(r"https?://\S+", NOTEBOOK_URL_TEMPLATE) or set(re.findall(r"\{[^}]*\}", NOTEBOOK_URL_TEMPLATE)) - {
    "{namespace}",
    "{name}",
}:
    raise ImproperlyConfigured(
        "PORTAL_NOTEBOOK_URL_TEMPLATE must be an http(s) URL using only {namespace} and {name}, "
        f"not {NOTEBOOK_URL_TEMPLATE!r}"
    )
# Called at admission with the team: True sends burst requests to approval (budget policy).
# Empty turns the budget policy off.
BURST_BUDGET_CHECK = os.environ.get("PORTAL_BURST_BUDGET_CHECK", "usage.budgets.over_budget").strip()
if BURST_BUDGET_CHECK and not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+", BURST_BUDGET_CHECK):
    raise ImproperlyConfigured(
        f"PORTAL_BURST_BUDGET_CHECK must be a dotted path to a function (or empty), not {BURST_BUDGET_CHECK!r}"
    )
# Team namespaces are <prefix><team slug>: the prefix must keep that a DNS label.
TEAM_NAMESPACE_PREFIX = os.environ.get("PORTAL_TEAM_NAMESPACE_PREFIX") or "team-"
if not re.fullmatch(r"[a-z]([-a-z0-9]{0,19})", TEAM_NAMESPACE_PREFIX):
    raise ImproperlyConfigured(
        "PORTAL_TEAM_NAMESPACE_PREFIX must be up to 20 lowercase letters, digits or '-', starting with a letter, "
        f"not {TEAM_NAMESPACE_PREFIX!r}"
    )

# --- GPU usage: where samples come from, idle culling, retention -----------------------
# The names match the environment variables, as usage/ reads them (settings.PORTAL_*).
# "scrape": dcgm-exporter /metrics endpoints listed in PORTAL_DCGM_URLS (outside
# production, empty means the sandbox's own /metrics, found from the kubeconfig);
# "prometheus": query PORTAL_PROMETHEUS_URL for the DCGM series it scrapes.
PORTAL_METRICS_SOURCE = env_choice("PORTAL_METRICS_SOURCE", "scrape", ("scrape", "prometheus"))
PORTAL_DCGM_URLS = env_urls("PORTAL_DCGM_URLS")
PORTAL_DCGM_TOKEN = os.environ.get("PORTAL_DCGM_TOKEN", "")
PORTAL_PROMETHEUS_URL = (env_urls("PORTAL_PROMETHEUS_URL") or [""])[0]
if len(env_list("PORTAL_PROMETHEUS_URL", "")) > 1:
    raise ImproperlyConfigured("PORTAL_PROMETHEUS_URL must be one URL, not a list")
if PORTAL_METRICS_SOURCE == "prometheus" and not PORTAL_PROMETHEUS_URL:
    raise ImproperlyConfigured("PORTAL_PROMETHEUS_URL must be set when PORTAL_METRICS_SOURCE=prometheus")
# Extra PromQL label matchers for the DCGM series, e.g. cluster="gpu-1".
PORTAL_PROMETHEUS_MATCHERS = os.environ.get("PORTAL_PROMETHEUS_MATCHERS", "")
PORTAL_PROMETHEUS_TOKEN = os.environ.get("PORTAL_PROMETHEUS_TOKEN", "")
PORTAL_METRICS_WINDOW_SECONDS = env_int("PORTAL_METRICS_WINDOW_SECONDS", 60, minimum=1)
PORTAL_METRICS_TIMEOUT_SECONDS = env_float("PORTAL_METRICS_TIMEOUT_SECONDS", 10.0, minimum=0.1)
# The bearer token Prometheus sends to scrape the portal's own /metrics (unset: open in
# development, refused in production).
PORTAL_METRICS_TOKEN = os.environ.get("PORTAL_METRICS_TOKEN", "")
# The platform's idle-notebook rule (teams may set their own): a notebook whose GPU
# activity stays under the threshold for PORTAL_IDLE_MINUTES is warned, and stopped
# PORTAL_IDLE_GRACE_MINUTES later.
PORTAL_IDLE_ENABLED = env_bool("PORTAL_IDLE_ENABLED", True)
PORTAL_IDLE_THRESHOLD_PERCENT = env_float("PORTAL_IDLE_THRESHOLD_PERCENT", 5.0, minimum=0, maximum=100)
PORTAL_IDLE_MINUTES = env_int("PORTAL_IDLE_MINUTES", 60, minimum=1)
PORTAL_IDLE_GRACE_MINUTES = env_int("PORTAL_IDLE_GRACE_MINUTES", 30, minimum=0)
# Per-minute rows feed charts and idle detection (hours back); hourly rows feed spend reports.
PORTAL_USAGE_MINUTE_RETENTION_DAYS = env_int("PORTAL_USAGE_MINUTE_RETENTION_DAYS", 14, minimum=1)
PORTAL_USAGE_HOUR_RETENTION_DAYS = env_int("PORTAL_USAGE_HOUR_RETENTION_DAYS", 90, minimum=1)

# Demo logins exist only on a laptop; seed_demo refuses to run in production.
DEMO_PASSWORD = "" if PRODUCTION else os.environ.get("PORTAL_DEMO_PASSWORD", "gpu-demo-2026")

EMAIL_BACKEND = os.environ.get(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend" if PRODUCTION else "django.core.mail.backends.console.EmailBackend",
)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "gpu-portal@localhost")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

# --- SSO (OpenID Connect) -----------------------------------------------------------
# Off unless OIDC_ISSUER is set; then the login page offers "Sign in with SSO" next to
# local accounts. Endpoints come from the issuer's discovery document (fetched on first
# use, not here) unless given below. Group claims map to team memberships and roles,
# re-synchronised at each login (portal/oidc.py; README "Single sign-on").
OIDC_ISSUER = os.environ.get("OIDC_ISSUER", "").strip().rstrip("/")
OIDC_ENABLED = bool(OIDC_ISSUER)
OIDC_RP_CLIENT_ID = os.environ.get("OIDC_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = os.environ.get("OIDC_CLIENT_SECRET", "")
if OIDC_ENABLED and not (OIDC_RP_CLIENT_ID and OIDC_RP_CLIENT_SECRET):
    raise ImproperlyConfigured("OIDC_CLIENT_ID and OIDC_CLIENT_SECRET must be set when OIDC_ISSUER is")
if OIDC_ENABLED and PRODUCTION and not OIDC_ISSUER.startswith("https://"):
    raise ImproperlyConfigured(f"OIDC_ISSUER must be an https:// URL in production, not {OIDC_ISSUER!r}")
OIDC_OP_AUTHORIZATION_ENDPOINT = os.environ.get("OIDC_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = os.environ.get("OIDC_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = os.environ.get("OIDC_USERINFO_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = os.environ.get("OIDC_JWKS_ENDPOINT", "")
OIDC_RP_SIGN_ALGO = os.environ.get("OIDC_SIGN_ALGO") or "RS256"
if OIDC_RP_SIGN_ALGO[:2] not in ("RS", "ES", "PS"):
    # HS* would verify ID tokens with the client secret: anyone holding it could mint them.
    raise ImproperlyConfigured(f"OIDC_SIGN_ALGO must be an RS/ES/PS algorithm, not {OIDC_RP_SIGN_ALGO!r}")
OIDC_RP_SCOPES = os.environ.get("OIDC_SCOPES") or "openid email profile"
OIDC_USE_PKCE = True
OIDC_TIMEOUT = env_int("OIDC_TIMEOUT_SECONDS", 10, minimum=1)
OIDC_USERNAME_CLAIM = os.environ.get("OIDC_USERNAME_CLAIM") or "preferred_username"
OIDC_GROUPS_CLAIM = os.environ.get("OIDC_GROUPS_CLAIM") or "groups"
# A group name pattern with {team} (a team slug) and optionally {role} ("member" or
# "admin"), e.g. "gpu-{team}-{role}"; and/or an explicit JSON map
# {"<group>": ["<team slug>", "member" | "team_admin"]}, which wins for a group both match.
OIDC_TEAM_GROUP_PATTERN = os.environ.get("OIDC_TEAM_GROUP_PATTERN", "")
if OIDC_TEAM_GROUP_PATTERN and (
    "{team}" not in OIDC_TEAM_GROUP_PATTERN
    or set(re.findall(r"\{[^}]*\}", OIDC_TEAM_GROUP_PATTERN)) - {"{team}", "{role}"}
    or OIDC_TEAM_GROUP_PATTERN.count("{team}") != 1
    or OIDC_TEAM_GROUP_PATTERN.count("{role}") > 1
):
    raise ImproperlyConfigured(
        f"OIDC_TEAM_GROUP_PATTERN must contain {{team}} once and {{role}} at most once, not {OIDC_TEAM_GROUP_PATTERN!r}"
    )
try:
    OIDC_GROUP_MAP = json.loads(os.environ.get("OIDC_GROUP_MAP") or "{}")
except ValueError as exc:
    raise ImproperlyConfigured(f"OIDC_GROUP_MAP is not JSON: {exc}") from None
if not isinstance(OIDC_GROUP_MAP, dict) or not all(
    isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and v[1] in ("member", "team_admin")
    for v in OIDC_GROUP_MAP.values()
):
    raise ImproperlyConfigured('OIDC_GROUP_MAP must be a JSON object {"group": ["team-slug", "member|team_admin"]}')
# Members of this group are platform admins (staff) while they are in it.
OIDC_ADMIN_GROUP = os.environ.get("OIDC_ADMIN_GROUP", "")
# A local account (one with a password) whose username an SSO login claims is refused
# unless this is on: otherwise whoever controls that name at the identity provider
# would take the local account over, including a break-glass admin.
OIDC_LINK_LOCAL_USERS = env_bool("OIDC_LINK_LOCAL_USERS", False)
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_authentication_callback"
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
if OIDC_ENABLED:
    AUTHENTICATION_BACKENDS.append("portal.oidc.SSOBackend")
# The login page shows the SSO button only when it is configured.
TEMPLATES[0]["OPTIONS"]["context_processors"].append("portal.oidc.sso")
TEMPLATES[0]["OPTIONS"]["context_processors"].append("jobs.cluster_status.banner")

# --- Rate limits ----------------------------------------------------------------------
# The cache holds the API rate counters, shared by every web process through Redis.
# Keys are prefixed; never call cache.clear() in production: on Redis it empties the
# whole database, the Celery broker's queues included when they share REDIS_URL.
CACHES = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "portal",
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}
# Requests per API token (or per user for session calls) and window: N/second,
# N/minute, N/hour or N/day; "off" disables the limit. Over it: 429 with Retry-After.
API_RATE = (os.environ.get("PORTAL_API_RATE") or "600/min").strip().lower()
if API_RATE != "off" and not re.fullmatch(r"[1-9][0-9]*/(s|sec|second|m|min|minute|h|hour|d|day)", API_RATE):
    raise ImproperlyConfigured(f"PORTAL_API_RATE must look like 600/min (or be off), not {API_RATE!r}")
if API_RATE != "off":
    REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"] = ["portal.throttling.ApiRateThrottle"]
    REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] = {"api": API_RATE}

# --- Failed logins ----------------------------------------------------------------------
# Password logins (the login page and the admin's) per username and per client address
# within a window; over either budget, login is refused for the rest of the window (429
# with Retry-After). 0 switches a budget off. portal/login_throttle.py says why each way.
LOGIN_MAX_FAILURES = env_int("PORTAL_LOGIN_MAX_FAILURES", 5)
LOGIN_MAX_FAILURES_PER_IP = env_int("PORTAL_LOGIN_MAX_FAILURES_PER_IP", 20)
LOGIN_LOCKOUT_SECONDS = env_int("PORTAL_LOGIN_LOCKOUT_SECONDS", 900, minimum=1)
# Reverse proxies in front of the portal that append to X-Forwarded-For (an ingress: 1).
# 0 uses the connection's address and ignores the header, which any client can forge.
LOGIN_TRUSTED_PROXIES = env_int("PORTAL_LOGIN_TRUSTED_PROXIES", 0)
