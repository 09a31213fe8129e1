"""The usage pages: team dashboard, cluster view, workload fragment, and /metrics."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.test import Client

from jobs.models import Kind, State
from tests.cast import PASSWORD
from usage import portal_metrics, spend, telemetry
from usage.models import Budget, TeamUsage, WorkloadDay
from usage.sources import GpuSample


def login(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def no_inline_style_or_script(html: str) -> None:
    assert "style=" not in html
    assert not re.search(r"<script(?![^>]*\bsrc=)", html), "inline script"


def make_team_history(make_workload, cast, n: int) -> None:
    now = datetime.now(UTC)
    for i in range(n):
        w = make_workload(
            "h100-80gb" if i % 2 else "a100-80gb-1g.10gb",
            started=now - timedelta(hours=3 + i),
            finished=None if i % 3 == 0 else now - timedelta(hours=1),
            units=1 + i % 2,
            kind=Kind.NOTEBOOK if i % 3 == 0 else Kind.TRAINING,
        )
        WorkloadDay.objects.create(
            workload=w,
            day=now.date(),
            team=w.team,
            user=w.created_by,
            offering=w.offering,
            gpu_class="H100-80GB",
            device_minutes=120,
            activity_minutes=120 * 0.05 * (i % 5),
            peak_fb_mib=4096,
        )
    for h in range(48):
        TeamUsage.objects.create(
            period="hour",
            start=(now - timedelta(hours=h)).replace(minute=0, second=0, microsecond=0),
            team=cast.vision,
            team_key=cast.vision.pk,
            gpu_class="H100-80GB",
            device_minutes=60,
            gpu_minutes=60.0,
            busy_gpu_minutes=30.0,
        )


@pytest.mark.parametrize("n", [5, 50])
def test_the_dashboard_makes_the_same_queries_for_5_or_50_workloads(
    make_workload, cast, n, django_assert_max_num_queries
):
    make_team_history(make_workload, cast, n)
    Budget.objects.create(team=cast.vision, monthly_amount=Decimal("1000"))
    client = login(cast.alice)
    with django_assert_max_num_queries(14):  # 14 for either size (one: the unread notices, cold cache)
        response = client.get("/usage/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Usage of Computer Vision" in html and "Most expensive this month" in html
    assert "of the $1000.00 budget" in html
    assert "would have done" in html  # the quiet H100s get a right-sizing suggestion
    no_inline_style_or_script(html)


def test_the_cluster_view_is_for_platform_admins_and_draws_90_days_from_day_rollups(make_workload, cast, catalog):
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    for d in range(95):
        TeamUsage.objects.create(
            period="day",
            start=today - timedelta(days=d),
            team=cast.nlp,
            team_key=cast.nlp.pk,
            gpu_class="H100-80GB",
            device_minutes=1440,
            gpu_minutes=1440.0 * 4,
            busy_gpu_minutes=1440.0 * 2,
        )
    w = make_workload("h100-80gb", started=datetime.now(UTC) - timedelta(hours=2))
    telemetry.ingest(
        [
            GpuSample(
                time=datetime.now(UTC),
                uuid="GPU-1",
                model_name="NVIDIA H100 80GB HBM3",
                hostname="h100-0",
                namespace="team-vision",
                pod="p",
                activity=0.01,
            ),
            GpuSample(time=datetime.now(UTC), uuid="GPU-2", model_name="NVIDIA H100 80GB HBM3", hostname="h100-0"),
        ],
        {("team-vision", "p"): w.pk},
        snapshot_at=datetime.now(UTC),
    )
    assert login(cast.alice).get("/usage/cluster/").status_code == 404
    response = login(cast.admin).get("/usage/cluster/?days=90")
    assert response.status_code == 200
    html = response.content.decode()
    no_inline_style_or_script(html)
    assert "last 90 days (daily)" in html
    (held_path,) = re.findall(r'class="usage-line s0" d="([^"]+)"', html)
    assert held_path.count("L") + held_path.count("M") <= 92  # one point per day, not per hour
    assert f"{w.team.slug}/{w.name}" in html  # the idle GPU right now, and whose it is
    assert "Cluster idle" in html and "Cluster GPU cost" in html


def test_the_workload_fragment_polls_while_live_and_stops_with_286(make_workload, cast):
    live = make_workload("h100-80gb", started=datetime.now(UTC) - timedelta(minutes=30), state=State.RUNNING)
    done = make_workload("h100-80gb", started="2026-03-02 10:00:00", finished="2026-03-02 11:00:00")
    telemetry.ingest(
        [
            GpuSample(
                time=datetime.now(UTC) - timedelta(minutes=m),
                uuid="GPU-1",
                model_name="NVIDIA H100 80GB HBM3",
                namespace="team-vision",
                pod="p",
                activity=0.5,
                fb_used_mib=20000,
                fb_free_mib=60000,
            )
            for m in range(5)
        ],
        {("team-vision", "p"): live.pk},
    )
    alice = login(cast.alice)
    response = alice.get(f"/usage/workloads/{live.pk}/", headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    cost = spend.money(spend.workload_cost(live).allocated)
    assert 'hx-trigger="every 10s"' in html and "Cost so far" in html and f"${cost}" in html
    assert html.count('class="usage-line s0"') == 2  # activity and memory of its one GPU
    no_inline_style_or_script(html)
    response = alice.get(f"/usage/workloads/{done.pk}/", headers={"HX-Request": "true"})
    assert response.status_code == 286 and "every 10s" not in response.content.decode()
    assert "$4.00" in response.content.decode()
    assert login(cast.bob).get(f"/usage/workloads/{live.pk}/").status_code == 404


def test_metrics_are_open_in_development_and_need_the_token_when_one_is_set(make_workload, settings, cast):
    make_workload("h100-80gb", started="2026-03-02 10:00:00")
    portal_metrics.observe_reconcile(0.25)
    portal_metrics.observe_reconcile(0.75)
    portal_metrics.count_task_error("jobs.reconcile")
    body = Client().get("/metrics").content.decode()
    assert 'gpu_portal_workloads{kind="training",state="running"} 1.0' in body
    assert "gpu_portal_reconcile_duration_seconds_count 2.0" in body
    assert "gpu_portal_reconcile_duration_seconds_sum 1.0" in body
    assert 'gpu_portal_task_errors_total{task="jobs.reconcile"} 1.0' in body
    assert 'gpu_portal_gpu_units_held{offering="h100-80gb",team="vision"} 1.0' in body
    settings.PORTAL_METRICS_TOKEN = "s3cret"
    assert Client().get("/metrics").status_code == 401
    assert Client().get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert Client().get("/metrics", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    settings.PORTAL_METRICS_TOKEN = ""
    settings.PRODUCTION = True
    assert Client().get("/metrics").status_code == 403


def test_the_grafana_dashboard_queries_only_metrics_that_exist(make_workload, settings):
    import json
    from pathlib import Path

    from usage import sources

    dashboard = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "gpu-portal.json"
    exprs = " ".join(t["expr"] for p in json.loads(dashboard.read_text())["panels"] for t in p.get("targets", []))
    make_workload("h100-80gb", started="2026-03-02 10:00:00")
    portal_metrics.count_task_error("usage.sample_gpus")  # counters with no series are not exposed
    body = Client().get("/metrics").content.decode()
    exposed = {line.split("{")[0].split(" ")[0] for line in body.splitlines() if line and not line.startswith("#")}
    for name in set(re.findall(r"gpu_portal_\w+", exprs)):
        assert name in exposed, name
    assert set(re.findall(r"DCGM_\w+", exprs)) <= set(sources.METRICS)


def test_failed_tasks_and_reconcile_runs_are_counted_from_celerys_signals(db):
    from types import SimpleNamespace

    from celery import shared_task

    from usage.models import PortalCounter
    from usage.signals import observe_reconcile_run

    @shared_task(name="tests.usage.broken")
    def broken():
        raise RuntimeError("boom")

    broken.apply()
    assert PortalCounter.objects.get(name="task_errors", label="tests.usage.broken").count == 1
    # What Celery sends after jobs.reconcile returned its report.
    reconcile = SimpleNamespace(name="jobs.reconcile")
    observe_reconcile_run(sender=reconcile, retval={"lists": 7, "writes": 0, "seconds": 0.5}, state="SUCCESS")
    observe_reconcile_run(sender=SimpleNamespace(name="jobs.submit_workload"), retval=None, state="SUCCESS")
    counter = PortalCounter.objects.get(name="reconcile_seconds")
    assert (counter.count, counter.total) == (1, 0.5)
