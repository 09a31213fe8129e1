"""Right-sizing from recorded samples."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from usage import rightsizing
from usage.models import WorkloadDay
from usage.rightsizing import Measured


def record_day(w, minutes: int, activity: float, peak_mib: int, day=date(2026, 3, 2)):
    WorkloadDay.objects.create(
        workload=w,
        day=day,
        team=w.team,
        user=w.created_by,
        offering=w.offering,
        gpu_class="x",
        device_minutes=minutes,
        activity_minutes=activity * minutes,
        peak_fb_mib=peak_mib,
    )


def test_a_quiet_full_h100_would_have_fitted_a_1g_10gb_slice(make_workload, catalog):
    w = make_workload("h100-80gb", started="2026-03-02 08:00:00", finished="2026-03-02 12:00:00")
    record_day(w, 240, 0.12, 7 * 1024)
    (s,) = rightsizing.for_workloads([w])
    assert s.suggested == "a100-80gb-1g.10gb"
    assert s.saving_per_day == Decimal("86.40")  # (4.00 − 0.40) × 24
    assert s.message == (
        "peak 7 GiB and 12 % activity on H100-80GB full GPU: A100-80GB MIG 1g.10gb would have done, "
        "saving $86.40 per day"
    )
    assert s.as_dict()["suggested"] == "a100-80gb-1g.10gb"


def test_memory_or_activity_beyond_every_smaller_offering_gets_no_suggestion(make_workload, catalog):
    big = make_workload("h100-80gb", started="2026-03-02 08:00:00", finished="2026-03-02 12:00:00")
    record_day(big, 240, 0.05, 30 * 1024)  # 30 GiB × 1.2 fits no slice and exceeds an L4 share
    busy = make_workload("h100-80gb", started="2026-03-02 08:00:00", finished="2026-03-02 12:00:00")
    record_day(busy, 240, 0.6, 4 * 1024)
    assert rightsizing.for_workloads([big, busy]) == []


def test_a_slice_that_needs_little_memory_is_pointed_to_a_shared_gpu_only_if_it_fits_the_share(catalog):
    slice_ = catalog["a100-80gb-1g.10gb"]
    offerings = list(catalog.values())
    # 0.5 of a 1/7 slice = 0.071 of a GPU; 1 GiB: a quarter of an L4 (5.5 GiB, 0.25) fits and costs 0.20.
    s = rightsizing.suggest(1, slice_, 1, Measured(1024, 0.5, 600), offerings)
    assert s is not None and s.suggested == "l4-shared"
    # Too short a record to judge.
    assert rightsizing.suggest(1, slice_, 1, Measured(1024, 0.5, 30), offerings) is None


def test_the_rightsizing_api_lists_the_teams_suggestions(make_workload, api, cast):
    w = make_workload("h100-80gb", started="2026-03-02 08:00:00", state="running")
    record_day(w, 240, 0.1, 6 * 1024)
    other = make_workload("h100-80gb", team=cast.nlp, user=cast.bob, started="2026-03-02 08:00:00", state="running")
    record_day(other, 240, 0.1, 6 * 1024)
    api.force_authenticate(cast.alice)
    body = api.get("/api/v1/usage/rightsizing/", {"team": "vision"}).json()
    assert [(r["workload"], r["suggested"]) for r in body["results"]] == [(w.pk, "a100-80gb-1g.10gb")]
    assert api.get("/api/v1/usage/rightsizing/", {"team": "nlp"}).status_code == 404
    assert [r["workload"] for r in api.get("/api/v1/usage/rightsizing/").json()["results"]] == [w.pk]
