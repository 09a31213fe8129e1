from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
DEMO_PROFILE = REPO_ROOT / "deploy" / "cluster-profiles" / "demo.yaml"
SHARED_REFERENCE = REPO_ROOT.parent / "shared" / "reference"


@pytest.fixture(autouse=True, scope="session")
def fast_password_hashing():
    """Real hashers take ~0.3 s per password on purpose; tests create many users."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def cast(db):
    from tests.cast import make_cast

    return make_cast()


@pytest.fixture
def catalog(db):
    """The demo profile's offerings, loaded as `make run` loads them."""
    from portal.catalog import sync_catalog
    from portal.cluster_profile import load_profile
    from portal.models import Offering

    sync_catalog(load_profile(DEMO_PROFILE))
    return {o.slug: o for o in Offering.objects.all()}


@pytest.fixture
def api():
    from rest_framework.test import APIClient

    return APIClient()


@pytest.fixture
def shared_reference() -> Path:
    if not SHARED_REFERENCE.is_dir():
        pytest.skip("../shared/reference is absent (upstream reference data exists only in the project workspace)")
    return SHARED_REFERENCE


# --- the sandbox cluster, and the portal pointed at it ------------------------------


@pytest.fixture
def sandbox():
    from sandbox.testing import running_sandbox

    crd_dir = SHARED_REFERENCE if SHARED_REFERENCE.is_dir() else None
    with running_sandbox(DEMO_PROFILE, crd_dir=crd_dir, seed=7) as handle:
        yield handle


@pytest.fixture
def portal_on_sandbox(sandbox, settings):
    """The portal's settings point at the sandbox, as `make run` does with its kubeconfig."""
    settings.KUBE_CONFIG = str(sandbox.kubeconfig_path)
    settings.KUBE_REQUEST_TIMEOUT = 5
    return sandbox


@pytest.fixture
def kube(portal_on_sandbox):
    from jobs.kube.client import Cluster

    with Cluster.from_settings() as cluster:
        yield cluster
