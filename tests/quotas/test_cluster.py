"""The team's cluster amounts, and the YAML diff the approvals console shows for a decision."""

from decimal import Decimal

import pytest

from quotas import cluster
from quotas.models import Quota, QuotaException, QuotaRequest
from tests.quotas.conftest import make_quota

pytestmark = pytest.mark.django_db


def test_resource_amounts_turn_class_quotas_into_resource_units(cast, catalog):
    make_quota(cast.vision, "H100-80GB", 4, 8)
    make_quota(cast.vision, "A100-80GB", 1, 2)  # 7 and 14 slices of 1g.10gb
    make_quota(cast.vision, "L4", 1, Decimal("1.5"))  # time-sliced 4 ways: 4 and 6 shares
    assert cluster.team_resource_quota(cast.vision) == {
        "nvidia.com/gpu": (4, 8),
        "nvidia.com/gpu.shared": (4, 6),
        "nvidia.com/mig-1g.10gb": (7, 14),
    }


def test_the_cluster_ceiling_includes_the_overage_of_approved_exceptions(cast, catalog):
    """Seven 1/7 slices are 0.999999 GPU; one slice over the limit must still be one whole slice more."""
    make_quota(cast.vision, "A100-80GB", 1, 1, used=Decimal("1.142856"), overage=Decimal("0.142856"))
    assert cluster.team_resource_quota(cast.vision) == {"nvidia.com/mig-1g.10gb": (7, 8)}


def test_a_profile_quota_takes_the_slices_from_the_model_quota(cast, catalog):
    make_quota(cast.vision, "A100-80GB", 1, 1)
    make_quota(cast.vision, "A100-80GB/1g.10gb", 2, 3)
    assert cluster.team_resource_quota(cast.vision) == {"nvidia.com/mig-1g.10gb": (2, 3)}


def test_a_quota_request_previews_the_queue_and_resource_quota_as_a_yaml_diff(cast, catalog, volcano_builder):
    make_quota(cast.nlp, "H100-80GB", 2, 4)
    request = QuotaRequest.objects.create(
        team=cast.nlp,
        gpu_class="H100-80GB",
        guaranteed=Decimal(4),
        limit=Decimal(8),
        justification="x",
        requested_by=cast.bob,
    )
    preview = cluster.preview_request(request)
    assert preview.note == ""
    assert "kind: Queue" in preview.before and "kind: ResourceQuota" in preview.before
    assert "kind: Namespace" not in preview.before  # only what the decision can change
    lines = preview.diff.splitlines()
    assert lines[:2] == ["--- nlp now", "+++ nlp after the decision"]
    changed = [line for line in lines if line[:1] in "+-" and line[:3] not in ("---", "+++")]
    # The Queue's capability and deserved, then the two ResourceQuotas (limit, guaranteed).
    assert changed == [
        "-  capability: {nvidia.com/gpu: '4'}",
        "-  deserved: {nvidia.com/gpu: '2'}",
        "+  capability: {nvidia.com/gpu: '8'}",
        "+  deserved: {nvidia.com/gpu: '4'}",
        "-  hard: {requests.nvidia.com/gpu: '4'}",
        "+  hard: {requests.nvidia.com/gpu: '8'}",
        "-  hard: {requests.nvidia.com/gpu: '2'}",
        "+  hard: {requests.nvidia.com/gpu: '4'}",
    ]


def test_an_exception_previews_the_ceiling_growing_by_its_amount(cast, catalog, volcano_builder):
    make_quota(cast.vision, "H100-80GB", 4, 8, used=Decimal(8))
    exception = QuotaException.objects.create(
        team=cast.vision, workload_id=7, gpu_class="H100-80GB", amount=Decimal(2), requested_by=cast.alice
    )
    preview = cluster.preview_exception(exception)
    added = [line for line in preview.diff.splitlines() if line.startswith("+ ")]
    assert added == ["+  capability: {nvidia.com/gpu: '10'}", "+  hard: {requests.nvidia.com/gpu: '10'}"]


def test_lowering_a_limit_below_usage_previews_the_ceiling_at_usage(cast, catalog, volcano_builder):
    make_quota(cast.vision, "H100-80GB", 4, 8, used=Decimal(6))
    request = QuotaRequest(team=cast.vision, gpu_class="H100-80GB", guaranteed=Decimal(2), limit=Decimal(4))
    after = cluster.with_change(
        cluster.class_quotas(cast.vision),
        "H100-80GB",
        guaranteed=request.guaranteed,
        limit=request.limit,
        used=Decimal(6),
    )
    assert after["H100-80GB"].ceiling == 6  # running work keeps its room; nothing new fits


def test_without_the_registered_builder_the_preview_shows_the_amounts(cast, catalog):
    previous = cluster.team_objects_builder()
    cluster.set_team_objects_builder(None)
    try:
        make_quota(cast.nlp, "H100-80GB", 2, 4)
        request = QuotaRequest(team=cast.nlp, gpu_class="H100-80GB", limit=Decimal(6))
        preview = cluster.preview_request(request)
    finally:
        cluster.set_team_objects_builder(previous)
    assert "not registered" in preview.note
    assert (
        "-  nvidia.com/gpu: {guaranteed: 2, limit: 4}\n+  nvidia.com/gpu: {guaranteed: 2, limit: 6}\n" in preview.diff
    )


def test_a_decision_that_changes_nothing_in_the_cluster_has_an_empty_diff(cast, catalog, volcano_builder):
    make_quota(cast.nlp, "H100-80GB", 2, 4)
    request = QuotaRequest(team=cast.nlp, gpu_class="H100-80GB", limit=Decimal("4.5"))  # half a GPU: same whole units
    assert not cluster.preview_request(request).changes


def test_the_kueue_backend_previews_the_cluster_queue(cast, catalog):
    make_quota(cast.nlp, "H100-80GB", 2, 4)
    request = QuotaRequest(team=cast.nlp, gpu_class="H100-80GB", limit=Decimal(6))
    preview = cluster.preview_request(request, queueing="kueue")
    assert "kind: ClusterQueue" in preview.before
    assert "-      - {name: nvidia.com/gpu, nominalQuota: '2', borrowingLimit: '2'}\n" in preview.diff
    assert "+      - {name: nvidia.com/gpu, nominalQuota: '2', borrowingLimit: '4'}\n" in preview.diff


def test_the_queueing_backend_comes_from_the_cluster_profile(settings, tmp_path):
    from tests.conftest import DEMO_PROFILE

    assert cluster.queueing_backend() == "volcano"
    profile = tmp_path / "kueue.yaml"
    profile.write_text(DEMO_PROFILE.read_text().replace("queueing: volcano", "queueing: kueue"))
    settings.CLUSTER_PROFILE = profile
    assert cluster.queueing_backend() == "kueue"


def test_quota_rows_untouched_by_a_preview(cast, catalog, volcano_builder):
    make_quota(cast.nlp, "H100-80GB", 2, 4)
    request = QuotaRequest(team=cast.nlp, gpu_class="H100-80GB", limit=Decimal(6))
    cluster.preview_request(request)
    assert Quota.objects.get(team=cast.nlp).limit == 4
