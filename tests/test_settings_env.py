"""Settings come from real environment variables, parsed strictly, and every PORTAL_* one is
documented and reachable from the Helm chart.

Each case starts a fresh interpreter with exactly the environment under test (settings
are read once, at import, so an in-process override would test nothing).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT
from tests.deploy.chart import MINIMAL, PRODUCTION, documents, env_of, find

DUMP_SETTINGS = """
import json, os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
import django
from django.conf import settings
settings.DEBUG  # load them
print(json.dumps({k: v for k, v in vars(settings._wrapped).items() if k.isupper()}, default=str))
"""

PRODUCTION_BASE = {
    "PORTAL_ENV": "production",
    "SECRET_KEY": "x" * 20 + "abcdefghijklmnopqrstuvwxyz0123456789",
    "ALLOWED_HOSTS": "portal.example.com",
    "DATABASE_URL": "postgres://portal@db.example.com/portal",
    "CELERY_BROKER_URL": "redis://redis.example.com:6379/0",
    "PORTAL_KUBECONFIG": "in-cluster",
}

# PORTAL_* variables the chart deliberately does not set, and why.
NOT_IN_CHART = {
    "PORTAL_VAR_DIR": "development files (SQLite, broker, sandbox state); production writes none",
    "PORTAL_DEMO_PASSWORD": "production has no demo logins",
    "PORTAL_KUBE_CONTEXT": "the chart runs the portal in-cluster, where a kubeconfig context does not exist",
}


def run_python(code: str, env: dict[str, str], tmp_path) -> subprocess.CompletedProcess:
    full_env = {"PATH": "/usr/bin:/bin", "PORTAL_VAR_DIR": str(tmp_path / "var"), **env}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=full_env, capture_output=True, text=True, timeout=60
    )


def settings_from(env: dict[str, str], tmp_path) -> dict:
    result = run_python(DUMP_SETTINGS, env, tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    "env, expected",
    [
        (
            {"PORTAL_METRICS_SOURCE": "Prometheus", "PORTAL_PROMETHEUS_URL": "http://prometheus.monitoring:9090"},
            {"PORTAL_METRICS_SOURCE": "prometheus", "PORTAL_PROMETHEUS_URL": "http://prometheus.monitoring:9090"},
        ),
        (
            {"PORTAL_DCGM_URLS": "http://n1:9400/metrics, https://n2:9400/metrics"},
            {"PORTAL_DCGM_URLS": ["http://n1:9400/metrics", "https://n2:9400/metrics"]},
        ),
        ({"PORTAL_DCGM_TOKEN": "dcgm-t"}, {"PORTAL_DCGM_TOKEN": "dcgm-t"}),
        ({"PORTAL_PROMETHEUS_TOKEN": "prom-t"}, {"PORTAL_PROMETHEUS_TOKEN": "prom-t"}),
        ({"PORTAL_PROMETHEUS_MATCHERS": 'cluster="gpu-1"'}, {"PORTAL_PROMETHEUS_MATCHERS": 'cluster="gpu-1"'}),
        ({"PORTAL_METRICS_WINDOW_SECONDS": "120"}, {"PORTAL_METRICS_WINDOW_SECONDS": 120}),
        ({"PORTAL_METRICS_TIMEOUT_SECONDS": "2.5"}, {"PORTAL_METRICS_TIMEOUT_SECONDS": 2.5}),
        ({"PORTAL_METRICS_TOKEN": "scrape-me"}, {"PORTAL_METRICS_TOKEN": "scrape-me"}),
        ({"PORTAL_IDLE_ENABLED": "off"}, {"PORTAL_IDLE_ENABLED": False}),
        ({"PORTAL_IDLE_THRESHOLD_PERCENT": "7.5"}, {"PORTAL_IDLE_THRESHOLD_PERCENT": 7.5}),
        ({"PORTAL_IDLE_MINUTES": "45"}, {"PORTAL_IDLE_MINUTES": 45}),
        ({"PORTAL_IDLE_GRACE_MINUTES": "0"}, {"PORTAL_IDLE_GRACE_MINUTES": 0}),
        ({"PORTAL_USAGE_MINUTE_RETENTION_DAYS": "7"}, {"PORTAL_USAGE_MINUTE_RETENTION_DAYS": 7}),
        ({"PORTAL_USAGE_HOUR_RETENTION_DAYS": "400"}, {"PORTAL_USAGE_HOUR_RETENTION_DAYS": 400}),
        ({"PORTAL_TEAM_NAMESPACE_PREFIX": "ml-"}, {"TEAM_NAMESPACE_PREFIX": "ml-"}),
        (
            {"PORTAL_NOTEBOOK_URL_TEMPLATE": "https://kf.example.com/notebook/{namespace}/{name}/"},
            {"NOTEBOOK_URL_TEMPLATE": "https://kf.example.com/notebook/{namespace}/{name}/"},
        ),
        ({"PORTAL_BURST_BUDGET_CHECK": ""}, {"BURST_BUDGET_CHECK": ""}),
        ({"PORTAL_ALLOWED_REGISTRIES": ""}, {"ALLOWED_IMAGE_REGISTRIES": ["nvcr.io", "docker.io/pytorch"]}),
    ],
    ids=lambda v: ",".join(v) if isinstance(v, dict) else None,
)
def test_each_setting_is_read_from_its_environment_variable(env, expected, tmp_path):
    values = settings_from(env, tmp_path)
    for name, value in expected.items():
        if name == "ALLOWED_IMAGE_REGISTRIES":  # empty means the default list, not "no registries"
            assert values[name][:2] == value
        else:
            assert values[name] == value, name


def test_unset_variables_give_the_documented_defaults(tmp_path):
    values = settings_from({}, tmp_path)
    assert {k: v for k, v in values.items() if k.startswith("PORTAL_") and k != "PORTAL_ENV"} == {
        "PORTAL_METRICS_SOURCE": "scrape",
        "PORTAL_DCGM_URLS": [],
        "PORTAL_DCGM_TOKEN": "",
        "PORTAL_PROMETHEUS_URL": "",
        "PORTAL_PROMETHEUS_MATCHERS": "",
        "PORTAL_PROMETHEUS_TOKEN": "",
        "PORTAL_METRICS_WINDOW_SECONDS": 60,
        "PORTAL_METRICS_TIMEOUT_SECONDS": 10.0,
        "PORTAL_METRICS_TOKEN": "",
        "PORTAL_IDLE_ENABLED": True,
        "PORTAL_IDLE_THRESHOLD_PERCENT": 5.0,
        "PORTAL_IDLE_MINUTES": 60,
        "PORTAL_IDLE_GRACE_MINUTES": 30,
        "PORTAL_USAGE_MINUTE_RETENTION_DAYS": 14,
        "PORTAL_USAGE_HOUR_RETENTION_DAYS": 90,
    }


@pytest.mark.parametrize(
    "env, message",
    [
        ({"PORTAL_METRICS_SOURCE": "statsd"}, "PORTAL_METRICS_SOURCE must be one of scrape, prometheus, not 'statsd'"),
        (
            {"PORTAL_METRICS_SOURCE": "prometheus"},
            "PORTAL_PROMETHEUS_URL must be set when PORTAL_METRICS_SOURCE=prometheus",
        ),
        (
            {"PORTAL_PROMETHEUS_URL": "prometheus.monitoring:9090"},
            "PORTAL_PROMETHEUS_URL must be comma-separated http:// or https:// URLs, not 'prometheus.monitoring:9090'",
        ),
        ({"PORTAL_PROMETHEUS_URL": "http://a:9090,http://b:9090"}, "PORTAL_PROMETHEUS_URL must be one URL"),
        (
            {"PORTAL_DCGM_URLS": "http://n1:9400/metrics,n2:9400/metrics"},
            "PORTAL_DCGM_URLS must be comma-separated http:// or https:// URLs, not 'n2:9400/metrics'",
        ),
        ({"PORTAL_METRICS_WINDOW_SECONDS": "1m"}, "PORTAL_METRICS_WINDOW_SECONDS must be a whole number, not '1m'"),
        ({"PORTAL_METRICS_TIMEOUT_SECONDS": "0"}, "PORTAL_METRICS_TIMEOUT_SECONDS must be at least 0.1, not 0"),
        ({"PORTAL_IDLE_ENABLED": "maybe"}, "PORTAL_IDLE_ENABLED must be true or false, not 'maybe'"),
        ({"PORTAL_IDLE_THRESHOLD_PERCENT": "five"}, "PORTAL_IDLE_THRESHOLD_PERCENT must be a number, not 'five'"),
        ({"PORTAL_IDLE_THRESHOLD_PERCENT": "nan"}, "PORTAL_IDLE_THRESHOLD_PERCENT must be a finite number"),
        ({"PORTAL_IDLE_THRESHOLD_PERCENT": "150"}, "PORTAL_IDLE_THRESHOLD_PERCENT must be at most 100, not 150"),
        ({"PORTAL_IDLE_MINUTES": "0"}, "PORTAL_IDLE_MINUTES must be at least 1, not 0"),
        ({"PORTAL_IDLE_GRACE_MINUTES": "-5"}, "PORTAL_IDLE_GRACE_MINUTES must be at least 0, not -5"),
        ({"PORTAL_USAGE_MINUTE_RETENTION_DAYS": "a week"}, "PORTAL_USAGE_MINUTE_RETENTION_DAYS must be a whole"),
        ({"PORTAL_USAGE_HOUR_RETENTION_DAYS": "0"}, "PORTAL_USAGE_HOUR_RETENTION_DAYS must be at least 1, not 0"),
        ({"PORTAL_RECONCILE_INTERVAL_SECONDS": "0"}, "PORTAL_RECONCILE_INTERVAL_SECONDS must be at least 1, not 0"),
        ({"PORTAL_TEAM_NAMESPACE_PREFIX": "Team_"}, "PORTAL_TEAM_NAMESPACE_PREFIX must be up to 20 lowercase"),
        (
            {"PORTAL_NOTEBOOK_URL_TEMPLATE": "https://kf.example.com/{user}/"},
            "PORTAL_NOTEBOOK_URL_TEMPLATE must be an http(s) URL using only {namespace} and {name}",
        ),
        ({"PORTAL_BURST_BUDGET_CHECK": "over budget"}, "PORTAL_BURST_BUDGET_CHECK must be a dotted path"),
    ],
    ids=lambda v: ",".join(f"{k}={val}" for k, val in v.items()) if isinstance(v, dict) else None,
)
def test_a_bad_value_stops_the_process_naming_the_variable_and_the_reason(env, message, tmp_path):
    result = run_python(DUMP_SETTINGS, env, tmp_path)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert message in result.stderr


def test_importing_the_portal_package_does_not_load_the_settings(tmp_path):
    # The sandbox and the benchmarks import portal modules, then point DATABASE_URL at
    # their own database: settings read at import would keep the first one.
    code = (
        "import portal, portal.celery, portal.cluster_profile; from django.conf import settings; "
        "print(settings.configured)"
    )
    result = run_python(code, {}, tmp_path)
    assert result.stdout.strip() == "False", result.stderr


def test_the_beat_schedule_reconciles_at_the_configured_interval(tmp_path):
    code = 'from portal.celery import app; print(app.conf.beat_schedule["reconcile-workloads"]["schedule"])'
    result = run_python(code, {"PORTAL_RECONCILE_INTERVAL_SECONDS": "25"}, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "25.0"
    result = run_python(code, {"PORTAL_RECONCILE_INTERVAL_SECONDS": "soon"}, tmp_path)
    assert "PORTAL_RECONCILE_INTERVAL_SECONDS must be a whole number, not 'soon'" in result.stderr


# --- every PORTAL_* variable: read in settings.py, in the chart, in the README -----------


def portal_names_in_code() -> set[str]:
    """PORTAL_* names the apps read: in string literals (env reads, getattr, messages, docs)
    and as ``settings.PORTAL_*`` attributes. Python constants such as labels.PORTAL_DOMAIN
    are names, not strings, and so are not counted."""
    names: set[str] = set()
    for app in ("portal", "jobs", "quotas", "usage"):
        for path in (REPO_ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    names.update(re.findall(r"\bPORTAL_[A-Z0-9_]*[A-Z0-9]\b", node.value))
                elif (
                    isinstance(node, ast.Attribute)
                    and node.attr.startswith("PORTAL_")
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "settings"
                ):
                    names.add(node.attr)
    return names


def names_read_by_settings() -> set[str]:
    source = (REPO_ROOT / "portal" / "settings.py").read_text()
    return set(re.findall(r"""(?:environ\.get|env_\w+)\(\s*["'](PORTAL_[A-Z0-9_]+)["']""", source))


def test_the_scan_finds_the_names_the_usage_app_reads():
    # Guards the scanner itself: these are read only as settings attributes in usage/.
    assert {"PORTAL_IDLE_MINUTES", "PORTAL_DCGM_URLS", "PORTAL_METRICS_TOKEN"} <= portal_names_in_code()
    assert "PORTAL_DOMAIN" not in portal_names_in_code()


def test_every_portal_variable_read_in_code_is_read_from_the_environment_in_settings():
    missing = portal_names_in_code() - names_read_by_settings()
    assert not missing, f"read in code but never from the environment in portal/settings.py: {sorted(missing)}"


def test_every_portal_variable_reaches_the_pods_through_the_chart():
    values = {
        **PRODUCTION,
        "config": {
            # Set only when given: unset, the portal offers its own list.
            "notebookImages": "nvcr.io/nvidia/pytorch:24.12-py3",
            "metrics": {
                "source": "prometheus",
                "prometheusUrl": "http://prometheus-operated.monitoring:9090",
                "dcgmToken": {"existingSecret": "gpu-metrics"},
                "prometheusToken": {"existingSecret": "gpu-metrics"},
                "portalMetricsToken": {"existingSecret": "gpu-metrics"},
            },
        },
    }
    docs = documents(values)
    env_names = {
        name
        for doc in docs
        if doc["kind"] == "Deployment"
        for name in env_of(doc["spec"]["template"]["spec"]["containers"][0])
    }
    wanted = (portal_names_in_code() | names_read_by_settings()) - set(NOT_IN_CHART)
    assert not wanted - env_names, f"not set by the chart: {sorted(wanted - env_names)}"
    env = env_of(find(docs, "Deployment", "-worker")["spec"]["template"]["spec"]["containers"][0])
    assert env["PORTAL_METRICS_TOKEN"] == {"secretKeyRef": {"name": "gpu-metrics", "key": "PORTAL_METRICS_TOKEN"}}
    assert env["PORTAL_PROMETHEUS_URL"] == "http://prometheus-operated.monitoring:9090"


def test_the_chart_refuses_prometheus_as_the_source_without_its_url():
    from deploy.render_chart import TemplateError

    with pytest.raises(TemplateError, match=r"config\.metrics\.prometheusUrl is required"):
        documents({**MINIMAL, "config": {"metrics": {"source": "prometheus"}}})


def test_the_charts_default_values_are_the_portals_own_defaults(tmp_path):
    """values.yaml repeats the defaults so operators see them; this keeps the copies equal."""
    fixed_by_chart = {"PORTAL_ENV", "PORTAL_KUBECONFIG", "PORTAL_CLUSTER_PROFILE"}
    env = env_of(find(documents(MINIMAL), "Deployment", "-web")["spec"]["template"]["spec"]["containers"][0])
    # Behind the chart's ingress there is one proxy; counting none would make every login
    # come from the ingress's address, so one guesser would lock everybody out.
    assert env.pop("PORTAL_LOGIN_TRUSTED_PROXIES") == "1"
    from_values = {
        k: v for k, v in env.items() if k.startswith("PORTAL_") and k not in fixed_by_chart and isinstance(v, str)
    }
    assert len(from_values) >= 20
    assert settings_from({**PRODUCTION_BASE, **from_values}, tmp_path) == settings_from(PRODUCTION_BASE, tmp_path)


def test_every_portal_variable_is_in_the_readme_configuration_table():
    readme = (REPO_ROOT / "README.md").read_text()
    table = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`(PORTAL_[A-Z0-9_]+)`", table))
    missing = (portal_names_in_code() | names_read_by_settings()) - documented
    assert not missing, f"missing from README's configuration table: {sorted(missing)}"
