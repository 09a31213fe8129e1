"""Where GPU samples come from: dcgm-exporter, scraped directly or through Prometheus.

Both sources return the same thing, a list of ``GpuSample`` (one per device series:
a GPU, a MIG instance, or one pod's share of a time-sliced GPU), so nothing after this
module knows which one ran.

- ``ScrapeSource`` reads dcgm-exporter ``/metrics`` endpoints (the sandbox cluster, or
  clusters without Prometheus) and parses them with ``prometheus_client.parser``. A
  scrape is one instant: each sample is one reading.
- ``PrometheusSource`` asks Prometheus' HTTP API for ``*_over_time`` instant queries
  over the last window (a minute), so one tick summarises every scrape of that minute
  and a missed tick loses nothing within the window.

Metrics: ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` for activity (``DCGM_FI_DEV_GPU_UTIL`` is
used only where the profiling metric is absent, because it reports nothing on MIG
instances), ``DCGM_FI_DEV_FB_USED``/``FB_FREE`` for memory, ``DCGM_FI_DEV_POWER_USAGE``
for energy. Label spellings differ between exporter versions and scrape setups, so
``Hostname``/``hostname``, ``UUID``/``uuid``, ``pod``/``pod_name`` and Prometheus'
``exported_pod`` (when the scrape's own pod label won the clash) are all accepted.

Settings are read only in ``from_settings``; the classes take plain values.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

log = logging.getLogger(__name__)

ACTIVITY = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent; fallback for GPUs without profiling metrics
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
POWER = "DCGM_FI_DEV_POWER_USAGE"
METRICS = (ACTIVITY, GPU_UTIL, FB_USED, FB_FREE, POWER)


class SourceError(Exception):
    """A metrics endpoint could not be read; the tick records nothing rather than zeros."""


@dataclass(frozen=True)
class GpuSample:
    time: datetime
    uuid: str
    gpu: str = ""
    mig_profile: str = ""
    gpu_instance: str = ""
    model_name: str = ""
    hostname: str = ""
    namespace: str = ""
    pod: str = ""
    container: str = ""
    activity: float = 0.0  # 0..1
    fb_used_mib: float = 0.0
    fb_free_mib: float = 0.0
    power_w: float = 0.0
    samples: int = 1  # raw readings behind this sample (Prometheus: scrapes in the window)

    @property
    def device(self) -> str:
        """The device series' id: the GPU UUID, plus the GPU instance for a MIG slice."""
        return f"{self.uuid}/{self.gpu_instance}" if self.gpu_instance else self.uuid

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.device, self.namespace, self.pod)


class Source(Protocol):
    name: str

    def collect(self, now: datetime | None = None) -> list[GpuSample]: ...


# --- labels -------------------------------------------------------------------------------


def _first(labels: Mapping[str, str], *names: str) -> str:
    for name in names:
        value = labels.get(name)
        if value:
            return value
    return ""


def _identity(labels: Mapping[str, str]) -> dict[str, str]:
    return {
        "uuid": _first(labels, "UUID", "uuid", "gpu_uuid"),
        "gpu": _first(labels, "gpu"),
        "mig_profile": _first(labels, "GPU_I_PROFILE"),
        "gpu_instance": _first(labels, "GPU_I_ID"),
        "model_name": _first(labels, "modelName", "model_name"),
        "hostname": _first(labels, "Hostname", "hostname", "node", "kubernetes_node"),
        # exported_*: Prometheus renamed the exporter's label because the scrape target's
        # own pod label (the exporter's pod) clashed with it, so exported_* is the workload.
        "namespace": _first(labels, "exported_namespace", "namespace", "pod_namespace"),
        "pod": _first(labels, "exported_pod", "pod", "pod_name"),
        "container": _first(labels, "exported_container", "container", "container_name"),
    }


def merge_readings(readings: Iterable[tuple[str, Mapping[str, str], float]], now: datetime) -> list[GpuSample]:
    """(metric, labels, value) readings → one ``GpuSample`` per device series.

    A series without a UUID cannot be told apart from others and is dropped.
    ``DCGM_FI_DEV_GPU_UTIL`` fills activity only for a series with no profiling metric.
    """
    fields: dict[tuple[str, str, str, str], dict] = {}
    for metric, labels, value in readings:
        ident = _identity(labels)
        if not ident["uuid"] or value != value:  # NaN
            continue
        key = (ident["uuid"], ident["gpu_instance"], ident["namespace"], ident["pod"])
        row = fields.setdefault(key, {"ident": ident, "values": {}})
        row["values"][metric] = value
    samples = []
    for row in fields.values():
        values = row["values"]
        if ACTIVITY in values:
            activity = values[ACTIVITY]
        elif GPU_UTIL in values:
            activity = values[GPU_UTIL] / 100.0
        else:
            continue  # memory alone says nothing about use
        samples.append(
            GpuSample(
                time=now,
                activity=min(max(activity, 0.0), 1.0),
                fb_used_mib=values.get(FB_USED, 0.0),
                fb_free_mib=values.get(FB_FREE, 0.0),
                power_w=values.get(POWER, 0.0),
                samples=int(values.get("samples", 1) or 1),
                **row["ident"],
            )
        )
    samples.sort(key=lambda s: s.key)
    return samples


# --- scraping dcgm-exporter directly ---------------------------------------------------------


def _http_get(url: str, timeout: float, headers: Mapping[str, str] | None = None) -> bytes:
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (configured URLs)
            return response.read()
    except (OSError, ValueError) as exc:
        raise SourceError(f"{url}: {exc}") from exc


def parse_exposition(text: str, now: datetime) -> list[GpuSample]:
    """dcgm-exporter's text exposition → samples."""
    readings = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in METRICS:
                readings.append((sample.name, sample.labels, float(sample.value)))
    return merge_readings(readings, now)


@dataclass(frozen=True)
class ScrapeSource:
    urls: Sequence[str]
    timeout: float = 5.0
    bearer_token: str = ""
    name: str = "scrape"

    def collect(self, now: datetime | None = None) -> list[GpuSample]:
        now = now or timezone.now()
        headers = {"Authorization": f"Bearer {self.bearer_token}"} if self.bearer_token else {}
        samples: list[GpuSample] = []
        for url in self.urls:
            samples.extend(parse_exposition(_http_get(url, self.timeout, headers).decode(), now))
        return samples


# --- Prometheus' HTTP API ----------------------------------------------------------------------


@dataclass(frozen=True)
class PrometheusSource:
    url: str
    window_seconds: int = 60
    timeout: float = 10.0
    # Extra PromQL label matchers for every query, e.g. 'job="dcgm-exporter"'.
    matchers: str = ""
    bearer_token: str = ""
    name: str = "prometheus"

    def queries(self) -> dict[str, str]:
        """Our field → one instant query. ``*_over_time`` keeps the series' labels."""
        w = f"[{self.window_seconds}s]"
        sel = f"{{{self.matchers}}}" if self.matchers else ""
        return {
            ACTIVITY: f"avg_over_time({ACTIVITY}{sel}{w})",
            GPU_UTIL: f"avg_over_time({GPU_UTIL}{sel}{w})",
            FB_USED: f"max_over_time({FB_USED}{sel}{w})",
            FB_FREE: f"min_over_time({FB_FREE}{sel}{w})",
            POWER: f"avg_over_time({POWER}{sel}{w})",
            "samples": f"count_over_time({ACTIVITY}{sel}{w})",
        }

    def query(self, promql: str, at: datetime) -> list[dict]:
        params = urllib.parse.urlencode({"query": promql, "time": f"{at.timestamp():.3f}"})
        headers = {"Authorization": f"Bearer {self.bearer_token}"} if self.bearer_token else {}
        body = _http_get(f"{self.url.rstrip('/')}/api/v1/query?{params}", self.timeout, headers)
        try:
            payload = json.loads(body)
        except ValueError as exc:
            raise SourceError(f"{self.url}: not a Prometheus API response") from exc
        if payload.get("status") != "success":
            raise SourceError(f"{self.url}: {payload.get('errorType')}: {payload.get('error')}")
        data = payload.get("data") or {}
        if data.get("resultType") != "vector":
            raise SourceError(f"{self.url}: expected a vector for {promql!r}, got {data.get('resultType')}")
        return data.get("result") or []

    def collect(self, now: datetime | None = None) -> list[GpuSample]:
        now = now or timezone.now()
        readings = []
        for metric, promql in self.queries().items():
            for series in self.query(promql, now):
                readings.append((metric, series.get("metric") or {}, float(series["value"][1])))
        return merge_readings(readings, now)


# --- settings -----------------------------------------------------------------------------------


def sandbox_metrics_url(kubeconfig_path: str) -> tuple[str, str] | None:
    """The sandbox's metrics URL (its kubeconfig's server URL + ``/metrics``) and token."""
    try:
        import yaml

        with open(kubeconfig_path) as fh:
            config = yaml.safe_load(fh) or {}
        server = config["clusters"][0]["cluster"]["server"]
        users = config.get("users") or [{}]
        token = (users[0].get("user") or {}).get("token", "")
    except (OSError, KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None
    return server.rstrip("/") + "/metrics", token or ""


def from_settings() -> Source:
    """The configured source.

    ``PORTAL_METRICS_SOURCE``: ``scrape`` (default) reads ``PORTAL_DCGM_URLS``
    (comma-separated), or outside production the sandbox's ``/metrics``, found from the
    kubeconfig; ``prometheus`` reads ``PORTAL_PROMETHEUS_URL``.
    """
    kind = settings.PORTAL_METRICS_SOURCE
    timeout = settings.PORTAL_METRICS_TIMEOUT_SECONDS
    if kind == "prometheus":
        url = settings.PORTAL_PROMETHEUS_URL
        if not url:
            raise ImproperlyConfigured("PORTAL_PROMETHEUS_URL must be set when PORTAL_METRICS_SOURCE=prometheus")
        return PrometheusSource(
            url,
            window_seconds=settings.PORTAL_METRICS_WINDOW_SECONDS,
            timeout=timeout,
            matchers=settings.PORTAL_PROMETHEUS_MATCHERS,
            bearer_token=settings.PORTAL_PROMETHEUS_TOKEN,
        )
    if kind != "scrape":
        raise ImproperlyConfigured(f"PORTAL_METRICS_SOURCE must be scrape or prometheus, not {kind!r}")
    urls = settings.PORTAL_DCGM_URLS or []
    urls = [u.strip() for u in urls.split(",")] if isinstance(urls, str) else list(urls)
    urls = [u for u in urls if u]
    token = settings.PORTAL_DCGM_TOKEN
    if not urls and not getattr(settings, "PRODUCTION", False):
        derived = sandbox_metrics_url(str(getattr(settings, "KUBE_CONFIG", "")))
        if derived:
            urls, token = [derived[0]], token or derived[1]
    if not urls:
        raise ImproperlyConfigured(
            "PORTAL_DCGM_URLS must list dcgm-exporter /metrics URLs (PORTAL_METRICS_SOURCE=scrape)"
        )
    return ScrapeSource(urls, timeout=timeout, bearer_token=token)


__all__ = [
    "GpuSample",
    "PrometheusSource",
    "ScrapeSource",
    "Source",
    "SourceError",
    "from_settings",
    "merge_readings",
    "parse_exposition",
]
