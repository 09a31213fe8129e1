"""Fixtures for quota tests: quotas of the cast's teams and the jobs builder.

Kueue's CEL rules live with the others in tests/kube_schemas.py (KNOWN_CEL).
"""

from __future__ import annotations

from decimal import Decimal
from unittest import mock

import pytest

from quotas.models import Quota


@pytest.fixture(autouse=True)
def no_celery():
    """Nothing reaches a broker: jobs' quota_changed receiver enqueues apply_team after commit."""
    with (
        mock.patch("jobs.tasks.apply_team.delay"),
        mock.patch("jobs.tasks.submit_workload.delay"),
        mock.patch("jobs.tasks.teardown_workload.delay"),
    ):
        yield


def make_quota(team, gpu_class: str, guaranteed, limit, **fields) -> Quota:
    return Quota.objects.create(
        team=team, gpu_class=gpu_class, guaranteed=Decimal(str(guaranteed)), limit=Decimal(str(limit)), **fields
    )


@pytest.fixture
def vision_h100(cast, catalog) -> Quota:
    """vision: 4 H100s guaranteed, 8 at most."""
    return make_quota(cast.vision, "H100-80GB", 4, 8)


@pytest.fixture
def volcano_builder():
    """Registers jobs' team builder, as jobs/apps.py does at startup."""
    from jobs.kube.manifests import team_objects
    from jobs.specs import TeamRef
    from quotas import cluster

    previous = cluster.team_objects_builder()
    cluster.set_team_objects_builder(lambda team, quota: team_objects(TeamRef(team.slug, team.namespace), quota))
    yield
    cluster.set_team_objects_builder(previous)


def notebook(name="nb", offering="h100-80gb", gpus=1):
    return {
        "kind": "notebook",
        "name": name,
        "offering": offering,
        "gpus_per_replica": gpus,
        "image": "quay.io/jupyter/pytorch-notebook:2024-12-02",
    }
