"""Fixtures of the browser-page tests: quotas for the cast's teams, workloads, a sandbox cluster."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.conftest import DEMO_PROFILE

NOTEBOOK_IMAGE = "quay.io/jupyter/pytorch-notebook:2024-12-02"
TRAINING_IMAGE = "nvcr.io/nvidia/pytorch:24.10-py3"


@pytest.fixture
def quotas(cast, catalog):
    """vision and nlp may each use 2 A100s (1 guaranteed), 2 H100s and 1 L4."""
    from quotas.models import Quota

    for team in (cast.vision, cast.nlp):
        Quota.objects.create(team=team, gpu_class="A100-80GB", guaranteed=Decimal(1), limit=Decimal(2))
        Quota.objects.create(team=team, gpu_class="H100-80GB", guaranteed=Decimal(1), limit=Decimal(2))
        Quota.objects.create(team=team, gpu_class="L4", guaranteed=Decimal(1), limit=Decimal(1))
    return cast


@pytest.fixture
def make_workload(cast, catalog):
    """Rows made directly (no admission, no timeline) for pages that only read them."""
    from jobs.models import Workload

    counter = iter(range(10_000))

    def make(team=None, *, user=None, kind="notebook", state="running", offering="a100-80gb-1g.10gb", **fields):
        return Workload.objects.create(
            team=team or cast.vision,
            created_by=user or cast.alice,
            kind=kind,
            name=fields.pop("name", f"w{next(counter)}"),
            offering=catalog[offering],
            image=NOTEBOOK_IMAGE,
            state=state,
            **fields,
        )

    return make


@pytest.fixture
def notebook(quotas):
    """alice's notebook on an A100 slice, requested through the lifecycle (state queued)."""
    from jobs import lifecycle

    return lifecycle.request_workload(
        quotas.alice,
        quotas.vision,
        {"kind": "notebook", "name": "explore", "offering": "a100-80gb-1g.10gb", "image": NOTEBOOK_IMAGE},
    )


@pytest.fixture(autouse=True)
def no_cluster_unless_asked(settings, tmp_path):
    """Tests reach a cluster only through the ``cluster`` fixture, never a developer's sandbox."""
    settings.KUBE_CONFIG = str(tmp_path / "no-kubeconfig")


@pytest.fixture(scope="session")
def _sandbox():
    from sandbox.testing import running_sandbox

    with running_sandbox(DEMO_PROFILE) as sb:
        yield sb


@pytest.fixture
def cluster(_sandbox, settings):
    """Points the portal at a sandbox cluster of the demo profile (shared by the session's tests)."""
    settings.KUBE_CONFIG = str(_sandbox.kubeconfig_path)
    settings.KUBE_CONTEXT = ""
    return _sandbox
