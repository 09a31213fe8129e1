"""Fixtures for quota tests: quotas of the cast's teams, the jobs builder, Kueue's CEL rules."""

from __future__ import annotations

from decimal import Decimal
from unittest import mock

import pytest

from quotas.models import Quota
from tests import kube_schemas

# CEL rules of Kueue's v1beta2 ClusterQueue and ResourceFlavor CRDs that can fire on create,
# with their equivalents (tests/kube_schemas.py refuses to pass a rule it does not know).
KUEUE_CEL = {
    (
        "!has(self.cohortName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, rg.flavors.all(f, "
        "f.resources.all(r, !has(r.borrowingLimit)))) : true"
    ): lambda s: (
        "cohortName" in s
        or all(
            "borrowingLimit" not in r for g in s.get("resourceGroups", []) for f in g["flavors"] for r in f["resources"]
        )
    ),
    "self.flavors.all(x, size(x.resources) == size(self.coveredResources))": lambda s: all(
        len(f["resources"]) == len(s["coveredResources"]) for f in s["flavors"]
    ),
    (
        "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) && "
        "self.borrowWithinCohort.policy != 'Never')"
    ): lambda s: (
        not (
            s.get("reclaimWithinCohort", "Never") == "Never"
            and "borrowWithinCohort" in s
            and s["borrowWithinCohort"].get("policy", "Never") != "Never"
        )
    ),
    "!has(self.topologyName) || self.nodeLabels.size() >= 1": lambda s: (
        "topologyName" not in s or len(s.get("nodeLabels", {})) >= 1
    ),
}
for _rule, _check in KUEUE_CEL.items():
    kube_schemas.KNOWN_CEL.setdefault(_rule, _check)


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
