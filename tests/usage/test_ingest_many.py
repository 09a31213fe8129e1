"""A backfill of many ticks in one transaction leaves exactly what one ingest per tick leaves."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from tests.usage.conftest import at
from usage import telemetry
from usage.models import GpuMinute, NodeSeen, TeamUsage, WorkloadDay
from usage.sources import GpuSample

pytestmark = pytest.mark.django_db
MINUTE_FIELDS = [f.name for f in GpuMinute._meta.concrete_fields if f.name != "id"]
WD_FIELDS = [f.attname for f in WorkloadDay._meta.concrete_fields if f.name != "id"]
TU_FIELDS = [f.attname for f in TeamUsage._meta.concrete_fields if f.name != "id"]


def snapshot() -> dict:
    def rows(model, fields):
        return sorted(model.objects.values_list(*fields), key=repr)

    return {
        "minutes": rows(
            GpuMinute, [f if f not in ("workload", "team", "user", "offering") else f + "_id" for f in MINUTE_FIELDS]
        ),
        "workload_days": rows(WorkloadDay, WD_FIELDS),
        "team_usage": rows(TeamUsage, TU_FIELDS),
        "nodes": rows(NodeSeen, ["hostname", "gpu_class", "first_sample_at"]),
    }


def wipe() -> None:
    for model in (GpuMinute, WorkloadDay, TeamUsage, NodeSeen):
        model.objects.all().delete()


@pytest.fixture
def ticks(make_workload, cast):
    """Three hours across midnight: whole GPUs, MIG slices, a time-sliced GPU shared by two
    pods, a pod the portal does not know, a free GPU, and a re-run of twenty minutes with
    other numbers (what a backfill over a gap the live sampler partly covered does)."""
    rng = random.Random(5)
    h100 = [make_workload("h100-80gb", started="2026-03-01 20:00:00") for _ in range(3)]
    mig = make_workload("a100-80gb-1g.10gb", team=cast.nlp, user=cast.bob, started="2026-03-01 20:00:00")
    shared = [make_workload("l4-shared", team=cast.nlp, started="2026-03-01 20:00:00") for _ in range(2)]
    owners = {("team-vision", f"h{i}"): w.pk for i, w in enumerate(h100)}
    owners[("team-nlp", "mig")] = mig.pk
    owners.update({("team-nlp", f"s{i}"): w.pk for i, w in enumerate(shared)})

    def tick(t) -> list[GpuSample]:
        def s(uuid, host, model, ns="", pod="", **kw):
            return GpuSample(
                time=t,
                uuid=uuid,
                hostname=host,
                model_name=model,
                namespace=ns,
                pod=pod,
                activity=rng.random(),
                fb_used_mib=rng.randrange(100, 70000),
                fb_free_mib=rng.randrange(0, 10000),
                power_w=rng.uniform(60, 700),
                **kw,
            )

        out = [s(f"GPU-h{i}", "h100-0", "NVIDIA H100 80GB HBM3", "team-vision", f"h{i}") for i in range(3)]
        out.append(s("GPU-h9", "h100-0", "NVIDIA H100 80GB HBM3"))  # free
        out.append(s("GPU-x", "h100-1", "NVIDIA H100 80GB HBM3", "research", "stray"))  # not ours
        out.append(
            s(
                "GPU-a",
                "a100-mig-0",
                "NVIDIA A100-SXM4-80GB",
                "team-nlp",
                "mig",
                gpu_instance="7",
                mig_profile="1g.10gb",
            )
        )
        out += [s("GPU-l4", "l4-shared-0", "NVIDIA L4", "team-nlp", f"s{i}") for i in range(2)]
        return out

    start = at("2026-03-01 22:30:20")
    main = [tick(start + timedelta(minutes=m)) for m in range(180)]
    rerun = [tick(start + timedelta(minutes=m)) for m in range(60, 80)]
    return owners, main, rerun


def test_a_batched_backfill_leaves_exactly_what_one_ingest_per_tick_leaves(ticks):
    owners, main, rerun = ticks
    for samples in main + rerun:
        telemetry.ingest(samples, owners)
    expected = snapshot()
    assert len(expected["minutes"]) == 180 * 7 and len(expected["workload_days"]) == 12
    wipe()
    report = telemetry.ingest_many(main + rerun, owners)
    assert snapshot() == expected
    assert report.replaced == 20 * 7 and report.minute_rows == 200 * 7 and report.free_devices == 200


def test_a_backfill_onto_stored_rollups_adds_like_one_ingest_per_tick(ticks):
    owners, main, rerun = ticks
    for samples in main[:90]:
        telemetry.ingest(samples, owners)
    for samples in main[90:] + rerun:
        telemetry.ingest(samples, owners)
    expected = snapshot()
    wipe()
    for samples in main[:90]:
        telemetry.ingest(samples, owners)
    telemetry.ingest_many(main[90:] + rerun, owners)
    assert snapshot() == expected


def test_a_backfill_of_nothing_changes_nothing():
    report = telemetry.ingest_many([[], []], {})
    assert report.samples == 0 and not GpuMinute.objects.exists()


class FakeSource:
    name = "fake"

    def __init__(self, by_minute):
        self.by_minute, self.asked = by_minute, []

    def collect(self, now=None):
        self.asked.append(now)
        return self.by_minute.get(telemetry.minute_of(now), [])


def test_backfill_collects_every_minute_and_ingests_an_hour_per_batch(ticks, monkeypatch):
    owners, main, _ = ticks
    for samples in main:
        telemetry.ingest(samples, owners)
    expected = snapshot()
    wipe()
    pods = [
        {"metadata": {"namespace": ns, "name": pod, "labels": {"gpu-portal.io/workload-id": str(wid)}}}
        for (ns, pod), wid in owners.items()
    ]
    source = FakeSource({telemetry.minute_of(s[0].time): s for s in main})
    batches = []
    real = telemetry.ingest_many
    monkeypatch.setattr(
        telemetry, "ingest_many", lambda ticks, owners: batches.append(len(ticks)) or real(ticks, owners)
    )
    start = telemetry.minute_of(main[0][0].time)
    report = telemetry.backfill(source, lambda selector: pods, start, start + timedelta(minutes=180))
    assert batches == [60, 60, 60] and len(source.asked) == 180 and source.asked[0] == start
    assert report.minute_rows == 180 * 7
    assert snapshot() == expected


def test_the_backfill_command_names_the_bad_option():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="--since: 'yesterday' is not an ISO date-time"):
        call_command("backfill_gpu_usage", since="yesterday", until="2026-03-02T10:00:00Z")
    with pytest.raises(CommandError, match="--until: must be after --since"):
        call_command("backfill_gpu_usage", since="2026-03-02T10:00:00Z", until="2026-03-02T09:00:00Z")
    with pytest.raises(CommandError, match="--until: at most 31 days"):
        call_command("backfill_gpu_usage", since="2026-01-01T00:00:00Z", until="2026-03-02T00:00:00Z")
